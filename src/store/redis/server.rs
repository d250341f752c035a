//! The connection to a Redis node: where the quota's server is, connecting to it within the
//! deadline (the host resolved on a thread of its own), AUTH with the password, and the
//! password taken out of whatever the server says back.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::thread;

use crate::policy::quota::RedisAddress;
use crate::store::redis::error::RedisStoreError;
use crate::store::redis::resp::{Addr, Deadline, ExchangeError, Node};

/// Where the server is, from the quota's address, and the password to give it.
#[derive(Clone, PartialEq, Eq)]
pub struct Server {
    pub addr: Addr,
    pub password: Option<Vec<u8>>,
}

/// What is shown in place of a server's words that quote the password.
const WITHHELD: &str = "(the server's words are not shown: they quote the password)";

/// The shortest piece of a password that a text may not hold.
const PIECE: usize = 8;

/// Whether `text` holds a piece of `password`: `PIECE` bytes of it in a row, or the whole of a
/// shorter one. `password` is not empty.
pub(crate) fn quotes(text: &str, password: &[u8]) -> bool {
    let text = text.as_bytes();
    let piece = PIECE.min(password.len());
    password
        .windows(piece)
        .any(|w| text.windows(piece).any(|t| t == w))
}

impl Server {
    /// The server of `address`, with its password, or `password` when it has none.
    pub fn new(address: &RedisAddress, password: Option<Vec<u8>>) -> Server {
        Server {
            addr: Addr {
                host: address.host().to_string(),
                port: address.port(),
            },
            password: address
                .password()
                .map(|p| p.as_bytes().to_vec())
                .or(password),
        }
    }

    /// `e` without the server's words where they hold any piece of the password: Redis quotes
    /// the arguments of a command it does not know (AUTH renamed away, a proxy without it), cut
    /// where it cuts them, and may do so in any reply, the script's too. A text that holds 8
    /// characters of the password in a row, or the whole of a shorter one, is withheld whole.
    pub fn scrub(&self, e: RedisStoreError) -> RedisStoreError {
        if self.password.as_deref().is_none_or(|p| p.is_empty()) {
            return e;
        }
        let clean = |text: String| self.withheld(text);
        let source = |source: ExchangeError| match source {
            ExchangeError::Server(message) => ExchangeError::Server(clean(message)),
            other => other,
        };
        match e {
            RedisStoreError::Connect { server, source: s } => RedisStoreError::Connect {
                server,
                source: source(s),
            },
            RedisStoreError::Command { server, source: s } => RedisStoreError::Command {
                server,
                source: source(s),
            },
            RedisStoreError::Reply { server, reply } => RedisStoreError::Reply {
                server,
                reply: clean(reply),
            },
            other => other,
        }
    }

    /// `text`, which holds words the server sent (an entry id, a record), withheld whole as
    /// [`Server::scrub`] withholds them when they hold any piece of the password.
    pub fn withheld(&self, text: String) -> String {
        match self.password.as_deref().filter(|p| !p.is_empty()) {
            Some(password) if quotes(&text, password) => WITHHELD.to_string(),
            _ => text,
        }
    }

    /// Connects to `addr` before the deadline: resolves the host, tries its addresses in turn
    /// with the time left, and authenticates when there is a password.
    pub fn open(&self, addr: &Addr, deadline: &Deadline) -> Result<Node, RedisStoreError> {
        let mut last = None;
        for sockaddr in resolve(addr, deadline)? {
            let left = match deadline.left() {
                Ok(left) => left,
                Err(e) => {
                    last = Some(e);
                    break;
                }
            };
            let stream = match TcpStream::connect_timeout(&sockaddr, left) {
                Ok(stream) => stream,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    last = Some(deadline.timed_out());
                    continue;
                }
                Err(e) => {
                    last = Some(ExchangeError::Io(e));
                    continue;
                }
            };
            // Requests are small and each waits for its reply: send them at once.
            let _ = stream.set_nodelay(true);
            let mut node = Node::new(addr.clone(), stream);
            let Some(password) = &self.password else {
                return Ok(node);
            };
            match node.request(&[b"AUTH", password], deadline) {
                Ok(_) => return Ok(node),
                Err(e) => last = Some(e.of_auth()),
            }
        }
        Err(RedisStoreError::Connect {
            server: addr.to_string(),
            source: last.unwrap_or_else(|| deadline.timed_out()),
        })
    }
}

/// The host's addresses. A name is looked up on a thread of its own, so that a slow resolver
/// cannot hold the run past the deadline; a lookup still running then is left to finish on its
/// own.
fn resolve(addr: &Addr, deadline: &Deadline) -> Result<Vec<SocketAddr>, RedisStoreError> {
    if let Ok(ip) = addr.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, addr.port)]);
    }
    let failed = |source| RedisStoreError::Resolve {
        host: addr.host.clone(),
        source,
    };
    let (tx, rx) = mpsc::channel();
    let (host, port) = (addr.host.clone(), addr.port);
    thread::Builder::new()
        .name("retry-resolve".into())
        .spawn(move || {
            let found = (host.as_str(), port)
                .to_socket_addrs()
                .map(Iterator::collect::<Vec<_>>);
            let _ = tx.send(found);
        })
        .map_err(failed)?;
    let wait = deadline.left().unwrap_or_default();
    match rx.recv_timeout(wait) {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
        Ok(Ok(_)) => Err(failed(io::Error::new(
            io::ErrorKind::NotFound,
            "no address found",
        ))),
        Ok(Err(e)) => Err(failed(e)),
        Err(_) => Err(failed(io::Error::new(
            io::ErrorKind::TimedOut,
            deadline.timed_out().to_string(),
        ))),
    }
}
