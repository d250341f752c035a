//! A small HTTP server of a test, on 127.0.0.1 and a port of its own: it records every request
//! it reads (method, path, headers, body) and answers each as it was told, with a status or
//! not at all (a server that hangs). Its thread ends with the test program.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// With this status and a short body.
    Status(u16),
    /// Never: it reads the request and keeps the connection open.
    Hang,
    /// With this status and a body that repeats the request's path, as a web server's page
    /// for a missing file does (`The requested URL /… was not found on this server.`).
    Echo(u16),
}

/// One request as the receiver read it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The receiver: its port and what it has read.
pub struct Receiver {
    pub port: u16,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the receiver");
        let port = listener.local_addr().expect("its address").port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = got.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || serve(conn, answer, &seen));
            }
        });
        Receiver { port, got }
    }

    /// `http://127.0.0.1:PORT` and `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What it has read so far.
    pub fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

/// Reads the requests of one connection and answers each.
fn serve(conn: TcpStream, answer: Answer, seen: &Mutex<Vec<Received>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut writer = conn.try_clone().expect("the connection");
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut words = line.split_whitespace();
        let (method, path) = (
            words.next().unwrap_or("").to_string(),
            words.next().unwrap_or("").to_string(),
        );
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let length = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0usize);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap().push(Received {
            method,
            path: path.clone(),
            headers,
            body,
        });
        match answer {
            Answer::Hang => {
                // Keeps the connection open, answering nothing, until the client goes.
                let mut rest = Vec::new();
                let _ = reader.read_to_end(&mut rest);
                return;
            }
            Answer::Status(status) => {
                if reply(&mut writer, status, &status.to_string()).is_err() {
                    return;
                }
            }
            Answer::Echo(status) => {
                let said = format!("The requested URL {path} was not found on this server.");
                if reply(&mut writer, status, &said).is_err() {
                    return;
                }
            }
        }
    }
}

/// Answers `status` with `said` as the body.
fn reply(writer: &mut TcpStream, status: u16, said: &str) -> std::io::Result<()> {
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{said}",
        said.len()
    );
    writer.write_all(reply.as_bytes())
}
