//! The fleet quota store (spec 15.3): the bucket of `policy::quota` kept in Redis, shared by
//! every run on every machine that names the same `redis://[:PASSWORD@]HOST[:PORT]/NAME`. It
//! offers what [`LocalStore`](crate::store::file::LocalStore) offers (`deposit`, `take`, `peek`,
//! each returning an [`Update`]), so the runner can use either.
//!
//! - The bucket is the hash `retry:quota:NAME` with the fields `tokens` and `at`. One Lua script
//!   reads it, refills, deposits or takes, and writes it back; Redis runs a script alone, so
//!   runs on any number of machines never lose an update. It is run with EVALSHA and sent whole
//!   with EVAL when the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). The script
//!   touches that one key only, so on a Redis Cluster it runs on the node that holds its slot.
//! - Time is the server's (`TIME`, in the script), not the caller's: the machines of a fleet
//!   disagree about the time, and a bucket stamped by a clock ahead of the others would refill
//!   for the difference each time a slower machine touched it. So the `now_ms` that the
//!   operations take, for the same interface as the local store, is not used.
//! - Each write sets the key to expire after twice the time the floor takes to fill the bucket
//!   (at least 2 minutes, at most a day): a quota idle that long is full anyway, so nothing is
//!   lost when it vanishes. With a floor of 0 the bucket never refills by itself and vanishes
//!   after a day idle, which makes it full again.
//! - Nothing waits long: each quota decision (an update, with the connecting it needs, the
//!   first one's included, the script sent again, and cluster redirects) has one deadline,
//!   [`DEADLINE`] from its start and never past the end of the run's budget. Every read and
//!   write waits only for what is left of it, so a server that answers a byte at a time cannot
//!   stretch it. A reply is read up to [`MAX_REPLY`] bytes, far more than a quota's answer
//!   takes; a server that sends more is a failed store, not a run that fills its memory.
//! - A Redis Cluster node that does not hold the key answers `MOVED` (or `ASK` while a slot
//!   migrates); the update follows it to the node named, up to [`MAX_REDIRECTS`] times within
//!   the same deadline, and keeps talking to the node that `MOVED` named.
//! - Errors are values whose `Display` is one line and never holds the password, whole or in
//!   part: an error answered to AUTH is kept by its code word only (`WRONGPASS`, `ERR unknown
//!   command`), since Redis quotes the arguments of a command it does not know, cut at 128
//!   characters. The run warns with it and goes on with the local store.
//!
//! The client is `retry`'s own, over a `TcpStream` (`store::resp`): the few commands it sends
//! (AUTH, EVALSHA, EVAL, ASKING) and the replies of Redis's protocol (RESP2) they get;
//! EVALSHA's SHA-1 is `store::sha1`. A general client bounds each read rather than an
//! exchange, reads a reply of any size, and follows cluster redirects only with its cluster
//! machinery.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::ffi::OsStringExt;
use std::sync::{Mutex, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::policy::quota::{QuotaParams, check_name};
use crate::store::quota::{BucketStore, Unanswered, Update};
use crate::store::resp::{Addr, Deadline, Node, Value, one_line};
use crate::store::sha1::sha1_hex;

pub use crate::store::resp::{DEADLINE, Failure, MAX_REDIRECTS, MAX_REPLY};

/// The port of `redis://HOST/NAME`.
pub const DEFAULT_PORT: u16 = 6379;

/// What the name of a quota's key starts with.
pub const KEY_PREFIX: &str = "retry:quota:";

/// The environment variable that gives the password when the address has none: unlike the
/// command line, the environment of a process is not shown to other users.
pub const PASSWORD_VAR: &str = "RETRY_REDIS_PASSWORD";

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

/// What a store is opened with besides its address.
#[derive(Clone, Default)]
pub struct Settings {
    /// The password to send when the address has none (from [`PASSWORD_VAR`]).
    pub password: Option<Vec<u8>>,
    /// The end of the run's budget, if it has one: no exchange waits past it.
    pub until: Option<Instant>,
}

impl Settings {
    /// The password from [`PASSWORD_VAR`] as `var` reads it (an empty one is none), and the
    /// end of the run's budget.
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>, until: Option<Instant>) -> Settings {
        Settings {
            password: var(PASSWORD_VAR)
                .filter(|p| !p.is_empty())
                .map(OsString::into_vec),
            until,
        }
    }
}

/// The quota `NAME` on one Redis server (or cluster).
pub struct RedisStore {
    server: Server,
    key: String,
    params: QuotaParams,
    expiry_ms: u64,
    /// The script's SHA-1, in hex, as EVALSHA names it.
    sha: String,
    until: Option<Instant>,
    /// The open connection, to the node that answered last; `None` before the first
    /// operation, and after a failure that may have left a reply unread, until the next
    /// operation connects again.
    node: Mutex<Option<Node>>,
}

/// Where the server is, from the quota's address, and the password to give it.
#[derive(Clone, PartialEq, Eq)]
struct Server {
    addr: Addr,
    password: Option<Vec<u8>>,
}

/// Why the fleet store could not be used. The run warns with it, once, and goes on with the
/// local store.
#[derive(Debug)]
pub enum RedisStoreError {
    /// The address is not `redis://[:PASSWORD@]HOST[:PORT]/NAME`, or the name is not one.
    Address(String),
    /// The host name did not resolve, or not within the deadline.
    Resolve { host: String, source: io::Error },
    /// No connection, or the server refused it (a wrong password) or did not answer in time.
    Connect { server: String, source: Failure },
    /// The script failed, or the server did not answer it in time.
    Command { server: String, source: Failure },
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
            RedisStoreError::Connect { server, source } => {
                write!(f, "cannot use Redis at {server}: {source}")
            }
            RedisStoreError::Command { server, source } => {
                write!(f, "the quota update failed on Redis at {server}: {source}")
            }
            RedisStoreError::Reply { server, reply } => write!(
                f,
                "Redis at {server} answered the quota update with '{}', not a number of tokens",
                one_line(reply)
            ),
        }
    }
}

/// The code words of a server that refuses the password or the user: a misconfiguration, not
/// an outage.
pub const REFUSALS: [&str; 3] = ["WRONGPASS", "NOAUTH", "NOPERM"];

impl RedisStoreError {
    /// The code word (one of [`REFUSALS`]) when the server refused the password or the user.
    pub fn refusal(&self) -> Option<&'static str> {
        let code = match self {
            RedisStoreError::Connect { source, .. } | RedisStoreError::Command { source, .. } => {
                source.code()?
            }
            _ => return None,
        };
        REFUSALS.into_iter().find(|refusal| *refusal == code)
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
    /// The quota `name` on the server of `url` (`redis://[:PASSWORD@]HOST[:PORT]/NAME`, as
    /// `QuotaStore::Redis` holds it), with the password of `settings` when the URL has none.
    /// Nothing is sent yet: the first operation connects, within its own deadline, so that the
    /// first quota decision, connecting included, waits no longer than any other (and never
    /// past the end of the run's budget). The password is taken as written (no %-escapes) and
    /// sent with AUTH; the database is 0. The NAME of the URL is the quota's, which `name`
    /// gives.
    pub fn open(
        url: &str,
        name: &str,
        params: QuotaParams,
        settings: Settings,
    ) -> Result<RedisStore, RedisStoreError> {
        check_name(name).map_err(RedisStoreError::Address)?;
        let mut server = Server::parse(url)?;
        if server.password.is_none() {
            server.password = settings.password;
        }
        Ok(RedisStore {
            server,
            key: format!("{KEY_PREFIX}{name}"),
            params,
            expiry_ms: expiry(&params).as_millis() as u64,
            sha: sha1_hex(SCRIPT.as_bytes()),
            until: settings.until,
            node: Mutex::new(None),
        })
    }

    /// The server as the log shows it: `HOST:PORT`, never the password.
    pub fn server(&self) -> String {
        self.server.addr.to_string()
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

    /// Runs the script for `op` within one deadline, connecting first if no connection is
    /// open (the first operation, or one after a failure that closed it), and following
    /// cluster redirects.
    fn run(&self, op: Op) -> Result<Update, RedisStoreError> {
        let deadline = Deadline::new(self.until);
        // A thread that panicked while holding the lock left at worst a connection in an
        // unknown state, which the failure below replaces.
        let mut slot = self.node.lock().unwrap_or_else(PoisonError::into_inner);
        let (reply, at) = self
            .exchange(&mut slot, &op, &deadline)
            .map_err(|e| self.server.scrub(e))?;
        let failed = |reply: String| {
            self.server.scrub(RedisStoreError::Reply {
                server: at.to_string(),
                reply,
            })
        };
        let (granted, tokens) = match reply {
            Value::Array(Some(items)) => match &items[..] {
                [Value::Int(granted), Value::Bulk(Some(tokens))] => {
                    (*granted, String::from_utf8_lossy(tokens).into_owned())
                }
                _ => return Err(failed(Value::Array(Some(items)).to_string())),
            },
            other => return Err(failed(other.to_string())),
        };
        match tokens.parse::<f64>() {
            Ok(tokens) if tokens.is_finite() => Ok(Update {
                granted: granted == 1,
                tokens,
                note: None,
            }),
            _ => Err(failed(tokens)),
        }
    }

    /// The script's reply, and the node that gave it.
    fn exchange(
        &self,
        slot: &mut Option<Node>,
        op: &Op,
        deadline: &Deadline,
    ) -> Result<(Value, Addr), RedisStoreError> {
        let mut ask: Option<Addr> = None;
        for _ in 0..=MAX_REDIRECTS {
            let (answer, at) = match ask.take() {
                Some(addr) => self.eval_asking(addr, op, deadline)?,
                None => self.eval_on(slot, op, deadline)?,
            };
            let message = match answer {
                Ok(value) => return Ok((value, at)),
                Err(Failure::Server(message)) => message,
                Err(source) => {
                    return Err(RedisStoreError::Command {
                        server: at.to_string(),
                        source,
                    });
                }
            };
            match redirect(&message, &at) {
                Some((Redirect::Moved, addr)) => {
                    *slot = Some(self.server.open(&addr, deadline)?);
                }
                Some((Redirect::Ask, addr)) => ask = Some(addr),
                None => {
                    return Err(RedisStoreError::Command {
                        server: at.to_string(),
                        source: Failure::Server(message),
                    });
                }
            }
        }
        Err(RedisStoreError::Command {
            server: self.server(),
            source: Failure::Redirects,
        })
    }

    /// The script's answer from the node of the connection kept, opened first if there is
    /// none, and that node.
    fn eval_on(
        &self,
        slot: &mut Option<Node>,
        op: &Op,
        deadline: &Deadline,
    ) -> Result<(Result<Value, Failure>, Addr), RedisStoreError> {
        let node = match slot {
            Some(node) => node,
            None => slot.insert(self.server.open(&self.server.addr, deadline)?),
        };
        let answer = self.eval(node, op, deadline, false);
        let at = node.addr.clone();
        // An error the server sent leaves the connection in step; anything else (a timeout, a
        // reset, a reply cut off) may have left bytes to come.
        if !matches!(answer, Ok(_) | Err(Failure::Server(_))) {
            *slot = None;
        }
        Ok((answer, at))
    }

    /// The script's answer from the node that `ASK` named, asked once on a connection of its
    /// own: the slot stays with the node that `MOVED` named until the migration ends.
    fn eval_asking(
        &self,
        addr: Addr,
        op: &Op,
        deadline: &Deadline,
    ) -> Result<(Result<Value, Failure>, Addr), RedisStoreError> {
        let mut node = self.server.open(&addr, deadline)?;
        let answer = node
            .request(&[b"ASKING"], deadline)
            .and_then(|_| self.eval(&mut node, op, deadline, true));
        Ok((answer, addr))
    }

    /// EVALSHA, then EVAL when the node does not have the script (after ASKING again when
    /// `asking`, which holds for one command only).
    fn eval(
        &self,
        node: &mut Node,
        op: &Op,
        deadline: &Deadline,
        asking: bool,
    ) -> Result<Value, Failure> {
        let p = &self.params;
        let (ratio, floor, cap) = (p.ratio.to_string(), p.floor.to_string(), p.cap.to_string());
        let expiry = self.expiry_ms.to_string();
        let rest: [&[u8]; 7] = [
            b"1",
            self.key.as_bytes(),
            op.word().as_bytes(),
            ratio.as_bytes(),
            floor.as_bytes(),
            cap.as_bytes(),
            expiry.as_bytes(),
        ];
        let evalsha: Vec<&[u8]> = [&b"EVALSHA"[..], self.sha.as_bytes()]
            .into_iter()
            .chain(rest)
            .collect();
        match node.request(&evalsha, deadline) {
            Err(Failure::Server(e)) if e.starts_with("NOSCRIPT") => {
                if asking {
                    node.request(&[b"ASKING"], deadline)?;
                }
                let eval: Vec<&[u8]> = [&b"EVAL"[..], SCRIPT.as_bytes()]
                    .into_iter()
                    .chain(rest)
                    .collect();
                node.request(&eval, deadline)
            }
            answer => answer,
        }
    }
}

/// A cluster's redirect.
#[derive(Debug, PartialEq, Eq)]
enum Redirect {
    /// The slot lives on another node now: go there, this time and the next.
    Moved,
    /// The slot is moving: ask the node named, this time only.
    Ask,
}

/// Reads `MOVED 3999 127.0.0.1:6381` or `ASK 3999 127.0.0.1:6381`. An endpoint without a host
/// (`:6381`) is on the host of the node that answered.
fn redirect(message: &str, from: &Addr) -> Option<(Redirect, Addr)> {
    let mut words = message.split_ascii_whitespace();
    let kind = match words.next()? {
        "MOVED" => Redirect::Moved,
        "ASK" => Redirect::Ask,
        _ => return None,
    };
    let _slot: u16 = words.next()?.parse().ok()?;
    let (host, port) = words.next()?.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse::<u16>().ok().filter(|&p| p > 0)?;
    let host = if host.is_empty() || host == "?" {
        from.host.clone()
    } else {
        host.to_string()
    };
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    Some((kind, Addr { host, port }))
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

const FORM: &str = "redis://[:PASSWORD@]HOST[:PORT]/NAME";

/// Reads `HOST[:PORT]`, or `[IPV6]:PORT`, as the address of a quota gives it.
fn parse_host_port(host_port: &str) -> Result<Addr, String> {
    let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
        match inner.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, after)) => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("unexpected '{after}' after the host '[{host}]'")),
            },
            None => return Err(format!("the host '{host_port}' lacks its closing ']'")),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the host '{host}' is not a host name or address: expected {FORM}"
        ));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => match port.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => return Err(format!("the port '{port}' is not a number from 1 to 65535")),
        },
    };
    Ok(Addr {
        host: host.to_string(),
        port,
    })
}

impl Server {
    /// Reads `redis://[:PASSWORD@]HOST[:PORT]/NAME`: the last '@' ends the password, which may
    /// hold any character; the first '/' after it ends the host and port.
    fn parse(url: &str) -> Result<Server, RedisStoreError> {
        let bad = |why: String| RedisStoreError::Address(why);
        let Some(rest) = url.strip_prefix("redis://") else {
            return Err(bad(format!(
                "the Redis address does not start with redis://: expected {FORM}"
            )));
        };
        let (password, after) = match rest.rsplit_once('@') {
            Some((userinfo, after)) => match userinfo.strip_prefix(':') {
                Some(password) if !password.is_empty() => {
                    (Some(password.as_bytes().to_vec()), after)
                }
                _ => {
                    return Err(bad(format!(
                        "the part before '@' must be ':PASSWORD': expected {FORM}"
                    )));
                }
            },
            None => (None, rest),
        };
        let Some((host_port, _name)) = after.split_once('/') else {
            return Err(bad(format!(
                "no quota NAME after the host: expected {FORM}"
            )));
        };
        let addr = parse_host_port(host_port).map_err(bad)?;
        Ok(Server { addr, password })
    }

    /// `e` with the password replaced by `***` wherever the server put it: Redis quotes the
    /// arguments of a command it does not know (AUTH renamed away, a proxy without it).
    fn scrub(&self, e: RedisStoreError) -> RedisStoreError {
        let Some(password) = self
            .password
            .as_deref()
            .and_then(|p| std::str::from_utf8(p).ok())
            .filter(|p| !p.is_empty())
        else {
            return e;
        };
        let clean = |source: Failure| match source {
            Failure::Server(message) => Failure::Server(message.replace(password, "***")),
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
    fn open(&self, addr: &Addr, deadline: &Deadline) -> Result<Node, RedisStoreError> {
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
                    last = Some(Failure::Io(e));
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

/// Whatever goes wrong with Redis is a failure, never busy: the run goes on with the local
/// store.
impl BucketStore for RedisStore {
    fn deposit(&self, now_ms: u64) -> Result<Update, Unanswered> {
        RedisStore::deposit(self, now_ms).map_err(|e| Unanswered::Failed(e.to_string()))
    }

    fn take(&self, now_ms: u64) -> Result<Update, Unanswered> {
        RedisStore::take(self, now_ms).map_err(|e| Unanswered::Failed(e.to_string()))
    }

    fn peek(&self, now_ms: u64) -> Result<Update, Unanswered> {
        RedisStore::peek(self, now_ms).map_err(|e| Unanswered::Failed(e.to_string()))
    }
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
            Ok(s) => panic!("{url} parsed as {}", s.addr),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_address_gives_the_host_the_port_and_the_password() {
        let s = server("redis://cache.internal/deploys");
        assert_eq!(
            (s.addr.host.as_str(), s.addr.port, s.password),
            ("cache.internal", 6379, None)
        );
        let s = server("redis://:p@ss:w@rd@10.0.0.7:6380/deploys");
        assert_eq!((s.addr.host.as_str(), s.addr.port), ("10.0.0.7", 6380));
        assert_eq!(s.password.as_deref(), Some(&b"p@ss:w@rd"[..]));
        let s = server("redis://[::1]:7000/q");
        assert_eq!((s.addr.host.as_str(), s.addr.port), ("::1", 7000));
        assert_eq!(s.addr.to_string(), "[::1]:7000");
        assert_eq!(server("redis://[fe80::1]/q").addr.port, 6379);
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
    fn a_redirect_names_the_node_that_holds_the_slot() {
        let from = Addr {
            host: "10.0.0.1".into(),
            port: 7000,
        };
        let at = |host: &str, port| Addr {
            host: host.into(),
            port,
        };
        assert_eq!(
            redirect("MOVED 14156 127.0.0.1:7103", &from),
            Some((Redirect::Moved, at("127.0.0.1", 7103)))
        );
        assert_eq!(
            redirect("ASK 3999 10.0.0.2:7001", &from),
            Some((Redirect::Ask, at("10.0.0.2", 7001)))
        );
        assert_eq!(
            redirect("MOVED 1 :7002", &from),
            Some((Redirect::Moved, at("10.0.0.1", 7002)))
        );
        assert_eq!(
            redirect("MOVED 1 ::1:7002", &from),
            Some((Redirect::Moved, at("::1", 7002)))
        );
        for other in [
            "ERR unknown command",
            "MOVED",
            "MOVED x 1.2.3.4:5",
            "MOVED 1 1.2.3.4",
            "MOVED 1 1.2.3.4:0",
            "NOSCRIPT No matching script",
        ] {
            assert_eq!(redirect(other, &from), None, "{other}");
        }
    }
}
