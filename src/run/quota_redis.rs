//! The fleet quota store (spec 15.3): the bucket of `policy::quota` kept in Redis, shared by
//! every run on every machine that names the same `redis://[:PASSWORD@]HOST[:PORT]/NAME`. It
//! offers what [`LocalStore`](crate::run::quota::LocalStore) offers (`deposit`, `take`, `peek`,
//! each returning an [`Update`]), so the runner can use either.
//!
//! - The bucket is the hash `retry:quota:NAME` with the fields `tokens` and `at`. One Lua script
//!   reads it, refills, deposits or takes, and writes it back; Redis runs a script alone, so
//!   runs on any number of machines never lose an update. It is run with EVALSHA and loaded
//!   again when the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`).
//! - Time is the server's (`TIME`, in the script), not the caller's: the machines of a fleet
//!   disagree about the time, and a bucket stamped by a clock ahead of the others would refill
//!   for the difference each time a slower machine touched it. So the `now_ms` that the
//!   operations take, for the same interface as the local store, is not used.
//! - Each write sets the key to expire after twice the time the floor takes to fill the bucket
//!   (at least 2 minutes, at most a day): a quota idle that long is full anyway, so nothing is
//!   lost when it vanishes. With a floor of 0 the bucket never refills by itself and vanishes
//!   after a day idle, which makes it full again.
//! - Nothing waits long: resolving the host, connecting, the password and a first PING share
//!   [`CONNECT_TIMEOUT`]; each command then waits at most [`COMMAND_TIMEOUT`] for the socket.
//!   Errors are values whose `Display` is one line; the run warns with it and goes on with the
//!   local store.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Mutex, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redis::{
    Client, Connection, ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisConnectionInfo,
    RedisError, Script,
};

use crate::policy::quota::{QuotaParams, check_name};
use crate::run::quota::Update;

/// The longest that resolving the host, connecting and authenticating may take in all.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);

/// The longest that a command may wait to send its request or for its answer.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);

/// The port of `redis://HOST/NAME`.
pub const DEFAULT_PORT: u16 = 6379;

/// What the name of a quota's key starts with.
pub const KEY_PREFIX: &str = "retry:quota:";

/// The shortest and the longest time after which an idle quota's key vanishes.
const MIN_EXPIRY: Duration = Duration::from_secs(120);
const MAX_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// The bucket's arithmetic, as [`Bucket`](crate::policy::quota::Bucket) does it, in one script
/// that Redis runs alone.
///
/// KEYS[1] is the bucket; ARGV are the operation (`deposit`, `take` or `peek`), ratio, floor
/// (tokens per second), cap and the expiry in milliseconds. The answer is `{granted, tokens}`:
/// granted is 1 or 0, and tokens (after the operation) are a string, since Redis would cut a Lua
/// number to an integer. `peek` writes nothing.
const SCRIPT: &str = r#"
-- Redis before 5 needs this to write after reading the clock; later ones do it anyway.
if redis.replicate_commands then redis.replicate_commands() end
local op = ARGV[1]
local ratio, floor, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local expiry = ARGV[5]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(stored[1]), tonumber(stored[2])
local function finite(x) return x ~= nil and x == x and x > -math.huge and x < math.huge end
if not (finite(tokens) and finite(at)) then
  -- A new quota (or a hash that retry did not write): a full bucket.
  tokens, at = cap, now
end
-- Refill what the floor accrued since, up to the cap; a clock that went back accrues nothing.
local elapsed = now - at
if elapsed < 0 then elapsed = 0 end
tokens = math.min(math.max(tokens, 0) + floor * (elapsed / 1000), cap)
local granted = 1
if op == 'deposit' then
  tokens = math.min(tokens + ratio, cap)
elseif op == 'take' or op == 'peek' then
  -- One token, less a slack for the rounding of sums such as 5 x 0.2.
  if tokens >= 1 - 1e-9 then
    if op == 'take' then tokens = math.max(tokens - 1, 0) end
  else
    granted = 0
  end
else
  return redis.error_reply('unknown quota operation ' .. tostring(op))
end
if op ~= 'peek' then
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
    'at', string.format('%.0f', now))
  redis.call('PEXPIRE', KEYS[1], expiry)
end
return {granted, string.format('%.17g', tokens)}
"#;

/// The quota `NAME` on one Redis server.
pub struct RedisStore {
    server: Server,
    key: String,
    params: QuotaParams,
    expiry_ms: u64,
    script: Script,
    /// The open connection; `None` after a failure that may have left an answer unread, until
    /// the next operation connects again.
    connection: Mutex<Option<Connection>>,
}

/// Where the server is, from the quota's address.
#[derive(Clone, PartialEq, Eq)]
struct Server {
    /// A host name or an IP address, without the brackets of an IPv6 one.
    host: String,
    port: u16,
    password: Option<String>,
}

/// Why the fleet store could not be used. The run warns with it, once, and goes on with the
/// local store.
#[derive(Debug)]
pub enum RedisStoreError {
    /// The address is not `redis://[:PASSWORD@]HOST[:PORT]/NAME`, or the name is not one.
    Address(String),
    /// The host name did not resolve, or not within [`CONNECT_TIMEOUT`].
    Resolve { host: String, source: io::Error },
    /// No connection, or the server refused it (a wrong password) or did not answer in time.
    Connect { server: String, source: RedisError },
    /// The script failed, or the server did not answer it in time.
    Command { server: String, source: RedisError },
    /// The script's answer was not a number of tokens.
    Reply { server: String, reply: String },
}

impl fmt::Display for RedisStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisStoreError::Address(e) => write!(f, "{}", one_line(e)),
            RedisStoreError::Resolve { host, source } => write!(
                f,
                "cannot resolve the Redis host '{}': {}",
                one_line(host),
                one_line(&source.to_string())
            ),
            RedisStoreError::Connect { server, source } => write!(
                f,
                "cannot use Redis at {server}: {}",
                why(source, CONNECT_TIMEOUT)
            ),
            RedisStoreError::Command { server, source } => write!(
                f,
                "the quota update failed on Redis at {server}: {}",
                why(source, COMMAND_TIMEOUT)
            ),
            RedisStoreError::Reply { server, reply } => write!(
                f,
                "Redis at {server} answered the quota update with '{}', not a number of tokens",
                one_line(reply)
            ),
        }
    }
}

impl std::error::Error for RedisStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisStoreError::Resolve { source, .. } => Some(source),
            RedisStoreError::Connect { source, .. } | RedisStoreError::Command { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}

/// What went wrong, in words: a timeout says how long was waited.
fn why(e: &RedisError, waited: Duration) -> String {
    if e.is_timeout() {
        format!("no answer within {} ms", waited.as_millis())
    } else {
        one_line(&e.to_string())
    }
}

/// `s` on one line, at most 200 characters: it comes from a server and goes into a log line.
fn one_line(s: &str) -> String {
    let mut line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if s.chars().nth(200).is_some() {
        line.push_str("...");
    }
    line
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("server", &self.server())
            .field("key", &self.key)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

enum Op {
    Deposit,
    Take,
    Peek,
}

impl Op {
    fn word(&self) -> &'static str {
        match self {
            Op::Deposit => "deposit",
            Op::Take => "take",
            Op::Peek => "peek",
        }
    }
}

impl RedisStore {
    /// Connects to the server of `url` (`redis://[:PASSWORD@]HOST[:PORT]/NAME`, as
    /// `QuotaStore::Redis` holds it) for the quota `name`, within [`CONNECT_TIMEOUT`], and
    /// checks that it answers. The password is taken as written (no %-escapes) and sent with
    /// AUTH; the database is 0. The NAME of the URL is the quota's, which `name` gives.
    pub fn connect(
        url: &str,
        name: &str,
        params: QuotaParams,
    ) -> Result<RedisStore, RedisStoreError> {
        check_name(name).map_err(RedisStoreError::Address)?;
        let server = Server::parse(url)?;
        let connection = server.open()?;
        Ok(RedisStore {
            server,
            key: format!("{KEY_PREFIX}{name}"),
            params,
            expiry_ms: expiry(&params).as_millis() as u64,
            script: Script::new(SCRIPT),
            connection: Mutex::new(Some(connection)),
        })
    }

    /// The server as the log shows it: `HOST:PORT`, never the password.
    pub fn server(&self) -> String {
        self.server.to_string()
    }

    /// The key that holds the bucket: `retry:quota:NAME`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How long the key outlives the quota's last deposit or take.
    pub fn expiry(&self) -> Duration {
        Duration::from_millis(self.expiry_ms)
    }

    /// A first try: deposit the ratio. First tries are never held back, so `granted` is true.
    /// The time is the server's: `_now_ms` is there for the local store's interface.
    pub fn deposit(&self, _now_ms: u64) -> Result<Update, RedisStoreError> {
        self.run(Op::Deposit)
    }

    /// A retry: take a token. `granted` false means that the run must give up (reason `quota`).
    pub fn take(&self, _now_ms: u64) -> Result<Update, RedisStoreError> {
        self.run(Op::Take)
    }

    /// The quota as it stands: the tokens there are now, and whether a retry would get one. It
    /// writes nothing; a quota not used yet (or expired) reads as a full bucket.
    pub fn peek(&self, _now_ms: u64) -> Result<Update, RedisStoreError> {
        self.run(Op::Peek)
    }

    /// Runs the script for `op`, connecting again first if an earlier failure closed the
    /// connection.
    fn run(&self, op: Op) -> Result<Update, RedisStoreError> {
        // A thread that panicked while holding the lock left at worst a connection in an
        // unknown state, which the failure below replaces.
        let mut slot = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut connection = match slot.take() {
            Some(connection) => connection,
            None => self.server.open()?,
        };
        let p = &self.params;
        let answer = self
            .script
            .key(&self.key)
            .arg(op.word())
            .arg(p.ratio.to_string())
            .arg(p.floor.to_string())
            .arg(p.cap.to_string())
            .arg(self.expiry_ms)
            .invoke::<(i64, String)>(&mut connection);
        let (granted, tokens) = match answer {
            Ok(answer) => answer,
            Err(source) => {
                // An error the server sent leaves the connection in step; anything else (a
                // timeout, a reset) may have left an answer to come, so it is dropped.
                if matches!(source.kind(), ErrorKind::Server(_)) {
                    *slot = Some(connection);
                }
                return Err(RedisStoreError::Command {
                    server: self.server(),
                    source,
                });
            }
        };
        *slot = Some(connection);
        match tokens.parse::<f64>() {
            Ok(tokens) if tokens.is_finite() => Ok(Update {
                granted: granted == 1,
                tokens,
                note: None,
            }),
            _ => Err(RedisStoreError::Reply {
                server: self.server(),
                reply: tokens,
            }),
        }
    }
}

/// How long an idle quota's key lives: twice the time the floor takes to fill an empty bucket,
/// within [`MIN_EXPIRY`] and [`MAX_EXPIRY`].
pub fn expiry(params: &QuotaParams) -> Duration {
    let fill_secs = params.cap / params.floor;
    let secs = (2.0 * fill_secs).clamp(MIN_EXPIRY.as_secs_f64(), MAX_EXPIRY.as_secs_f64());
    // A floor of 0 fills never (infinity, clamped to the maximum); NaN params give the minimum.
    if secs.is_nan() {
        MIN_EXPIRY
    } else {
        Duration::from_secs_f64(secs)
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

const FORM: &str = "redis://[:PASSWORD@]HOST[:PORT]/NAME";

impl Server {
    /// Reads `redis://[:PASSWORD@]HOST[:PORT]/NAME`: the last '@' ends the password, which may
    /// hold any character; the first '/' after it ends the host and port.
    fn parse(url: &str) -> Result<Server, RedisStoreError> {
        let bad = |why: String| Err(RedisStoreError::Address(why));
        let Some(rest) = url.strip_prefix("redis://") else {
            return bad(format!(
                "the Redis address does not start with redis://: expected {FORM}"
            ));
        };
        let (password, after) = match rest.rsplit_once('@') {
            Some((userinfo, after)) => match userinfo.strip_prefix(':') {
                Some(password) if !password.is_empty() => (Some(password.to_string()), after),
                _ => {
                    return bad(format!(
                        "the part before '@' must be ':PASSWORD': expected {FORM}"
                    ));
                }
            },
            None => (None, rest),
        };
        let Some((host_port, _name)) = after.split_once('/') else {
            return bad(format!("no quota NAME after the host: expected {FORM}"));
        };
        let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
            match inner.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, after)) => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return bad(format!("unexpected '{after}' after the host '[{host}]'")),
                },
                None => return bad(format!("the host '{host_port}' lacks its closing ']'")),
            }
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad(format!(
                "the host '{host}' is not a host name or address: expected {FORM}"
            ));
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return bad(format!("the port '{port}' is not a number from 1 to 65535")),
            },
        };
        Ok(Server {
            host: host.to_string(),
            port,
            password,
        })
    }

    /// Connects within [`CONNECT_TIMEOUT`]: resolves the host, tries its addresses in turn
    /// with the time left, authenticates and PINGs. The `redis` crate would do the first two
    /// itself, but gives each address the whole timeout and cannot bound the name lookup.
    fn open(&self) -> Result<Connection, RedisStoreError> {
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        let mut last = None;
        for addr in self.resolve(deadline)? {
            let Some(budget) = left(deadline) else { break };
            match self.open_at(addr, budget, deadline) {
                Ok(connection) => return Ok(connection),
                Err(e) => last = Some(e),
            }
        }
        let source = last.unwrap_or_else(|| RedisError::from(timed_out()));
        Err(RedisStoreError::Connect {
            server: self.to_string(),
            source,
        })
    }

    fn open_at(
        &self,
        addr: SocketAddr,
        budget: Duration,
        deadline: Instant,
    ) -> Result<Connection, RedisError> {
        let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        let info = ConnectionAddr::Tcp(addr.ip().to_string(), addr.port())
            .into_connection_info()?
            .set_redis_settings(settings);
        let mut connection = Client::open(info)?.get_connection_with_timeout(budget)?;
        // Without a password nothing has been said yet: a port that accepts and never answers
        // must fail here, not at the first update.
        let rest = left(deadline).ok_or_else(timed_out)?;
        connection.set_read_timeout(Some(rest))?;
        connection.set_write_timeout(Some(rest))?;
        redis::cmd("PING").query::<()>(&mut connection)?;
        connection.set_read_timeout(Some(COMMAND_TIMEOUT))?;
        connection.set_write_timeout(Some(COMMAND_TIMEOUT))?;
        Ok(connection)
    }

    /// The host's addresses. A name is looked up on a thread of its own, so that a slow
    /// resolver cannot hold the run past the deadline; a lookup still running then is left to
    /// finish on its own.
    fn resolve(&self, deadline: Instant) -> Result<Vec<SocketAddr>, RedisStoreError> {
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let failed = |source| RedisStoreError::Resolve {
            host: self.host.clone(),
            source,
        };
        let (tx, rx) = mpsc::channel();
        let (host, port) = (self.host.clone(), self.port);
        thread::Builder::new()
            .name("retry-resolve".into())
            .spawn(move || {
                let found = (host.as_str(), port)
                    .to_socket_addrs()
                    .map(Iterator::collect::<Vec<_>>);
                let _ = tx.send(found);
            })
            .map_err(failed)?;
        let wait = left(deadline).unwrap_or_default();
        match rx.recv_timeout(wait) {
            Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
            Ok(Ok(_)) => Err(failed(io::Error::new(
                io::ErrorKind::NotFound,
                "no address found",
            ))),
            Ok(Err(e)) => Err(failed(e)),
            Err(_) => Err(failed(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {} ms", CONNECT_TIMEOUT.as_millis()),
            ))),
        }
    }
}

/// The time left until `deadline`; `None` once it has passed.
fn left(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection timed out")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(url: &str) -> Server {
        match Server::parse(url) {
            Ok(s) => s,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    fn error(url: &str) -> String {
        match Server::parse(url) {
            Ok(s) => panic!("{url} parsed as {s}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_address_gives_the_host_the_port_and_the_password() {
        let s = server("redis://cache.internal/deploys");
        assert_eq!(
            (s.host.as_str(), s.port, s.password),
            ("cache.internal", 6379, None)
        );
        let s = server("redis://:p@ss:w@rd@10.0.0.7:6380/deploys");
        assert_eq!((s.host.as_str(), s.port), ("10.0.0.7", 6380));
        assert_eq!(s.password.as_deref(), Some("p@ss:w@rd"));
        let s = server("redis://[::1]:7000/q");
        assert_eq!((s.host.as_str(), s.port), ("::1", 7000));
        assert_eq!(s.to_string(), "[::1]:7000");
        assert_eq!(server("redis://[fe80::1]/q").port, 6379);
    }

    #[test]
    fn a_malformed_address_is_an_error_that_never_shows_the_password() {
        for (url, says) in [
            ("http://h/q", "redis://"),
            ("redis://h", "no quota NAME"),
            ("redis:///q", "host"),
            ("redis://h:0/q", "port '0'"),
            ("redis://h:99999/q", "port '99999'"),
            ("redis://h:x/q", "port 'x'"),
            ("redis://[::1/q", "closing ']'"),
            ("redis://[::1]x/q", "unexpected 'x'"),
            ("redis://secret@h/q", "':PASSWORD'"),
            ("redis://:@h/q", "':PASSWORD'"),
        ] {
            let e = error(url);
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("secret") && !e.contains('\n'), "{url}: {e}");
        }
    }

    #[test]
    fn an_idle_quota_lives_twice_the_time_the_floor_takes_to_fill_it() {
        let p = |floor, cap| QuotaParams {
            ratio: 0.2,
            floor,
            cap,
        };
        assert_eq!(expiry(&p(1.0, 10.0)), Duration::from_secs(120));
        assert_eq!(expiry(&p(0.5, 1000.0)), Duration::from_secs(4000));
        assert_eq!(expiry(&p(0.0, 10.0)), MAX_EXPIRY);
        assert_eq!(expiry(&p(1e-9, 10.0)), MAX_EXPIRY);
        assert_eq!(expiry(&p(f64::NAN, 10.0)), MIN_EXPIRY);
    }

    #[test]
    fn text_from_the_server_is_shown_on_one_bounded_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
        assert_eq!(one_line(&"x".repeat(300)).len(), 203);
    }
}
