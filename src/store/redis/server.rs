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

    /// `e` with the password replaced by `***` wherever the server put it: Redis quotes the
    /// arguments of a command it does not know (AUTH renamed away, a proxy without it).
    pub fn scrub(&self, e: RedisStoreError) -> RedisStoreError {
        let Some(password) = self
            .password
            .as_deref()
            .and_then(|p| std::str::from_utf8(p).ok())
            .filter(|p| !p.is_empty())
        else {
            return e;
        };
        let clean = |source: ExchangeError| match source {
            ExchangeError::Server(message) => {
                ExchangeError::Server(message.replace(password, "***"))
            }
            other => other,
        };
        match e {
            RedisStoreError::Connect { server, source } => RedisStoreError::Connect {
                server,
                source: clean(source),
            },
            RedisStoreError::Command { server, source } => RedisStoreError::Command {
                server,
                source: clean(source),
            },
            RedisStoreError::Reply { server, reply } => RedisStoreError::Reply {
                server,
                reply: reply.replace(password, "***"),
            },
            other => other,
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
