//! The byte stream under a connection to a Redis node: TCP or a Unix socket. Each kind keeps
//! the same deadline handling (a read or write waits no longer than the time the exchange has
//! left), so the client above reads and writes them alike. TLS over TCP comes in as a stream
//! made elsewhere ([`Wrapped`]), so that this file needs nothing of it.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A stream made elsewhere over a socket (TLS, `store/redis/tls.rs`), read and written as the
/// others, its timeouts bounding each call.
pub trait Wrapped: Read + Write + Send {
    fn set_read_timeout(&self, left: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&self, left: Option<Duration>) -> io::Result<()>;
}

/// A connected stream.
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<dyn Wrapped>),
}

impl Conn {
    /// Makes each read wait no longer than `left`.
    pub fn set_read_timeout(&self, left: Option<Duration>) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_read_timeout(left),
            Conn::Unix(s) => s.set_read_timeout(left),
            Conn::Tls(s) => s.set_read_timeout(left),
        }
    }

    /// Makes each write wait no longer than `left`.
    pub fn set_write_timeout(&self, left: Option<Duration>) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_write_timeout(left),
            Conn::Unix(s) => s.set_write_timeout(left),
            Conn::Tls(s) => s.set_write_timeout(left),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

impl From<TcpStream> for Conn {
    fn from(s: TcpStream) -> Conn {
        Conn::Tcp(s)
    }
}

impl From<UnixStream> for Conn {
    fn from(s: UnixStream) -> Conn {
        Conn::Unix(s)
    }
}
