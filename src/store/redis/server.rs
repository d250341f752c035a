//! The connection to a Redis node: where the quota's server is, connecting to it within the
//! deadline (the host resolved on a thread of its own, or a Unix socket), AUTH with the user
//! and password, SELECT of the database, and the password taken out of whatever the server
//! says back.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;

use crate::redis_url::{Endpoint, RedisAddress};
use crate::store::redis::conn::Conn;
use crate::store::redis::error::{REFUSALS, RedisStoreError};
use crate::store::redis::resp::{Addr, Deadline, ExchangeError, Node};
use crate::store::redis::sentinel::{self, Sentinels};
use crate::store::redis::tls::{self, TlsConfig, TlsFiles};
use crate::store::refusal::Refusal;

/// Where the server is, from the quota's address, and the user and password to give it.
#[derive(Clone, PartialEq, Eq)]
pub struct Server {
    /// The node first connected to; for a socket, its path with port 0.
    pub addr: Addr,
    pub password: Option<Vec<u8>>,
    pub user: Option<Vec<u8>>,
    /// The database to SELECT after AUTH.
    pub db: Option<u32>,
    /// `rediss://`: the connection must be TLS, never plain; with the client's configuration,
    /// or why it could not be made (a CA file that cannot be read, a key others can read).
    pub tls: Option<Tls>,
    /// The Unix socket of `redis+unix://`.
    pub socket: Option<PathBuf>,
    /// The sentinels of `redis+sentinel://`, asked where the master is.
    pub sentinels: Option<Sentinels>,
}

/// The TLS of a `rediss://` server: the configuration made once, when the store is opened,
/// from `RETRY_REDIS_CA`, `RETRY_REDIS_CERT` and `RETRY_REDIS_KEY`, or why it could not be.
#[derive(Clone)]
pub struct Tls(Result<TlsConfig, String>);

/// Every server of one run reads the same environment: two are alike whatever it said.
impl PartialEq for Tls {
    fn eq(&self, _: &Tls) -> bool {
        true
    }
}

impl Eq for Tls {}

impl Tls {
    fn from_env() -> Tls {
        Tls(tls::client_config(&TlsFiles::from_env()).map_err(|e| e.to_string()))
    }
}

/// A user and a password given apart from the URL (by the environment).
#[derive(Clone, Default)]
pub struct Credentials {
    pub user: Option<Vec<u8>>,
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
    /// The server of `address`, with its user and password, or those of `given` (the
    /// environment's) where it has none.
    pub fn new(address: &RedisAddress, given: Credentials) -> Server {
        Server {
            addr: Addr {
                host: address.host().to_string(),
                port: address.port(),
            },
            password: address
                .password()
                .map(|p| p.as_bytes().to_vec())
                .or(given.password),
            user: address.user().map(|u| u.as_bytes().to_vec()).or(given.user),
            db: address.db(),
            tls: address.tls().then(Tls::from_env),
            socket: address.socket().map(PathBuf::from),
            sentinels: match address.endpoint() {
                Endpoint::Sentinel { sentinels, master } => Some(Sentinels {
                    addrs: sentinels
                        .iter()
                        .map(|(host, port)| Addr {
                            host: host.clone(),
                            port: *port,
                        })
                        .collect(),
                    master: master.clone(),
                }),
                _ => None,
            },
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
    /// with the time left (or connects to the socket), authenticates when there is a
    /// password, and selects the database when the URL names one.
    pub fn open(&self, addr: &Addr, deadline: &Deadline) -> Result<Node, RedisStoreError> {
        let failed = |source| RedisStoreError::Connect {
            server: addr.to_string(),
            source,
        };
        if let Some(path) = self.socket.as_ref().filter(|_| *addr == self.addr) {
            let stream = connect_socket(path).map_err(|e| failed(ExchangeError::Io(e)))?;
            let node = Node::new(addr.clone(), stream);
            return self.greet(node, deadline).map_err(failed);
        }
        // Files that cannot make a TLS client (a CA bundle missing, a key others can read) are
        // said before anything is tried: the server being down would hide them.
        if let Some(Tls(Err(why))) = &self.tls {
            return Err(failed(ExchangeError::Tls(why.clone())));
        }
        if let Some(sentinels) = self.sentinels.as_ref().filter(|_| *addr == self.addr) {
            return self.open_master(sentinels, deadline);
        }
        let addrs = resolve(addr, deadline)?;
        self.connect(addr, addrs, deadline, true).map_err(failed)
    }

    /// The master that `sentinels` name, opened and checked (`store/redis/sentinel.rs`).
    fn open_master(
        &self,
        sentinels: &Sentinels,
        deadline: &Deadline,
    ) -> Result<Node, RedisStoreError> {
        let connect = |addr: &Addr, greet: bool| {
            let addrs = resolve(addr, deadline).map_err(|e| match e {
                RedisStoreError::Resolve { source, .. } => ExchangeError::Io(source),
                _ => deadline.timed_out(),
            })?;
            self.connect(addr, addrs, deadline, greet)
        };
        sentinel::find_master(
            sentinels,
            deadline,
            |addr| connect(addr, false),
            |addr| connect(addr, true),
        )
        .map_err(|mut misses| match misses.pop() {
            // Credentials refused: a misconfiguration, said as any server's refusal is.
            Some(sentinel::Miss::Master(server, source))
                if source.code().is_some_and(|c| REFUSALS.contains(&c)) =>
            {
                RedisStoreError::Connect {
                    server: server.to_string(),
                    source,
                }
            }
            last => {
                misses.extend(last);
                RedisStoreError::NoMaster {
                    sentinels: sentinels.to_string(),
                    why: sentinel::describe(&misses, |text| self.withheld(text)),
                }
            }
        })
    }

    /// A connection to `addr` at one of `addrs` before the deadline, each tried in turn with
    /// the time left, and greeted (AUTH, SELECT) when `greet` is set.
    fn connect(
        &self,
        addr: &Addr,
        addrs: Vec<SocketAddr>,
        deadline: &Deadline,
        greet: bool,
    ) -> Result<Node, ExchangeError> {
        let mut last = None;
        for sockaddr in addrs {
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
            let node = match self.secure(stream, addr, deadline) {
                Ok(conn) => Node::new(addr.clone(), conn),
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            if !greet {
                return Ok(node);
            }
            match self.greet(node, deadline) {
                Ok(node) => return Ok(node),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| deadline.timed_out()))
    }

    /// The TCP connection `stream` as it is, or over TLS for `rediss://`, its handshake within
    /// the deadline: never a plain connection for a `rediss://` server.
    fn secure(
        &self,
        stream: TcpStream,
        addr: &Addr,
        deadline: &Deadline,
    ) -> Result<Conn, ExchangeError> {
        let Some(Tls(config)) = &self.tls else {
            return Ok(Conn::Tcp(stream));
        };
        let config = config
            .as_ref()
            .map_err(|why| ExchangeError::Tls(why.clone()))?;
        tls::connect(stream, &addr.host, config, deadline)
            .map(|s| Conn::Tls(Box::new(s)))
            .map_err(|e| ExchangeError::Tls(e.to_string()))
    }

    /// AUTH (`AUTH USER PASSWORD` with a user, `AUTH PASSWORD` without) when there is a
    /// password, then SELECT when the URL names a database.
    fn greet(&self, mut node: Node, deadline: &Deadline) -> Result<Node, ExchangeError> {
        if let Some(password) = &self.password {
            let auth: Vec<&[u8]> = match &self.user {
                Some(user) => vec![b"AUTH", user, password],
                None => vec![b"AUTH", password],
            };
            node.request(&auth, deadline)
                .map_err(ExchangeError::of_auth)?;
        }
        if let Some(db) = self.db {
            node.request(&[b"SELECT", db.to_string().as_bytes()], deadline)?;
        }
        Ok(node)
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

/// Connects to the Unix socket at `path` once its way and the socket itself are checked
/// (`store::open::open_socket_way`): the password goes only to a server that root, the user
/// running `retry` or a system account put there. The connection is made through the checked
/// directory, so that the way cannot change between the check and the connection.
fn connect_socket(path: &std::path::Path) -> std::io::Result<UnixStream> {
    use std::os::fd::AsRawFd;
    let refused = |e: std::io::Error| match crate::store::refusal::refusal(&e) {
        Some(why) => std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("refusing the socket: {why}"),
        ),
        None => e,
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(refused(Refusal::NotSocket.into()));
    };
    let dir = crate::store::open::open_socket_way(dir).map_err(refused)?;
    crate::store::open::check_socket(&dir, name).map_err(refused)?;
    let pinned = std::path::Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    // A socket's address holds 107 bytes: a name too long once put under /proc is connected
    // to by its path, checked.
    match pinned.as_os_str().len() < 108 {
        true => UnixStream::connect(&pinned),
        false => UnixStream::connect(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(url: &str, user: Option<&str>, password: Option<&str>) -> Server {
        let (address, _) = crate::redis_url::parse(url).unwrap();
        let given = Credentials {
            user: user.map(|u| u.as_bytes().to_vec()),
            password: password.map(|p| p.as_bytes().to_vec()),
        };
        Server::new(&address, given)
    }

    #[test]
    fn the_urls_user_and_password_win_each_on_its_own() {
        let both = server("redis://u:p@h/q", Some("env-u"), Some("env-p"));
        assert_eq!(
            (both.user.as_deref(), both.password.as_deref()),
            (Some(&b"u"[..]), Some(&b"p"[..]))
        );
        let password = server("redis://:p@h/q", Some("env-u"), Some("env-p"));
        assert_eq!(password.user.as_deref(), Some(&b"env-u"[..]));
        assert_eq!(password.password.as_deref(), Some(&b"p"[..]));
        let neither = server("redis://h/3/q", Some("env-u"), Some("env-p"));
        assert_eq!(neither.user.as_deref(), Some(&b"env-u"[..]));
        assert_eq!(neither.password.as_deref(), Some(&b"env-p"[..]));
        assert_eq!(
            (neither.db, neither.tls.is_some(), neither.socket),
            (Some(3), false, None)
        );
        let socket = server("redis+unix:///run/r.sock/q?db=1", None, None);
        assert_eq!(
            socket.socket.as_deref(),
            Some(std::path::Path::new("/run/r.sock"))
        );
        assert_eq!(socket.addr.to_string(), "/run/r.sock");
        assert!(server("rediss://h/q", None, None).tls.is_some());
    }
}
