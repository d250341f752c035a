//! The fleet quota store (docs/herd.md#shared-retry-quota): the bucket of `policy::quota` kept in
//! Redis, shared by every run on every machine that names the same
//! Redis URL (`redis_url.rs`: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME` and the other
//! forms). It offers what
//! [`LocalStore`](crate::store::file::LocalStore) offers (`deposit`, `take`, `peek`, each returning
//! an [`Update`]), so the runner can use either.
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
//! The client is `retry`'s own, over TCP or a Unix socket (`store/redis/resp.rs` over
//! `store/redis/conn.rs`): the few commands it sends
//! (AUTH, EVALSHA, EVAL, ASKING) and the replies of Redis's protocol (RESP2) they get. A
//! general client bounds each read rather than an exchange, reads a reply of any size, and
//! follows cluster redirects only with its cluster machinery.
//!
//! This file holds the store's operations and the cluster redirects they follow; `server`
//! connects and authenticates, `script` holds the script and its calls, and `error` says what
//! went wrong.

mod conn;
mod error;
pub(crate) mod resp;
mod script;
pub(crate) mod sentinel;
pub(crate) mod server;
pub mod tls;

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStringExt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::policy::quota::QuotaParams;
use crate::redis_url::RedisAddress;
use crate::store::quota::{BucketStore, Exchange, Op, Unanswered, Update};
use resp::{Addr, Deadline, Node, Reply};

pub use error::{REFUSALS, RedisStoreError, refusal_words};
pub use resp::{DEADLINE, ExchangeError, MAX_REDIRECTS, MAX_REPLY};
pub use script::{SCRIPT, SCRIPT_SHA1, arguments as script_arguments};

use script::Call;
pub use server::Credentials;
use server::Server;

/// What the name of a quota's key starts with.
pub const KEY_PREFIX: &str = "retry:quota:";

/// The environment variable that gives the password when the address has none: unlike the
/// command line, the environment of a process is not shown to other users.
pub const PASSWORD_VAR: &str = "RETRY_REDIS_PASSWORD";

/// The environment variable that gives the ACL user when the address names none.
pub const USER_VAR: &str = "RETRY_REDIS_USER";

/// The shortest and the longest time after which an idle quota's key vanishes.
const MIN_EXPIRY: Duration = Duration::from_secs(120);
const MAX_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// What a store is opened with besides its address.
#[derive(Clone, Default)]
pub struct Settings {
    /// The user and password to send when the address has none (from [`USER_VAR`] and
    /// [`PASSWORD_VAR`]).
    pub credentials: Credentials,
    /// The end of the run's budget, if it has one: no exchange waits past it.
    pub until: Option<Instant>,
}

impl Settings {
    /// The user and password from [`USER_VAR`] and [`PASSWORD_VAR`] as `var` reads them (an
    /// empty one is none), and the end of the run's budget.
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>, until: Option<Instant>) -> Settings {
        let read = |name| var(name).filter(|v| !v.is_empty()).map(OsString::into_vec);
        Settings {
            credentials: Credentials {
                user: read(USER_VAR),
                password: read(PASSWORD_VAR),
            },
            until,
        }
    }
}

/// The quota `NAME` on one Redis server (or cluster).
pub struct RedisStore {
    server: Server,
    call: Call,
    until: Option<Instant>,
    /// The open connection, to the node that answered last; `None` before the first
    /// operation, and after a failure that may have left a reply unread, until the next
    /// operation connects again.
    node: Mutex<Option<Node>>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("server", &self.server())
            .field("key", &self.call.key)
            .field("params", &self.call.params)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The quota of `address` (as `--quota` gave it), with the user and password of
    /// `settings` where the address has none. Nothing is sent yet: the first operation connects, within its own
    /// deadline, so that the first quota decision, connecting included, waits no longer than
    /// any other (and never past the end of the run's budget). The user and password are sent
    /// with AUTH; the database is the URL's (SELECT), or 0.
    pub fn open(address: &RedisAddress, params: QuotaParams, settings: Settings) -> RedisStore {
        RedisStore {
            server: Server::new(address, settings.credentials),
            call: Call {
                key: format!("{KEY_PREFIX}{}", address.name()),
                params,
                expiry_ms: expiry(&params).as_millis() as u64,
            },
            until: settings.until,
            node: Mutex::new(None),
        }
    }

    /// The server as the log shows it: `HOST:PORT`, never the password.
    pub fn server(&self) -> String {
        self.server.addr.to_string()
    }

    /// The key that holds the bucket: `retry:quota:NAME`.
    pub fn key(&self) -> &str {
        &self.call.key
    }

    /// How long the key outlives the quota's last deposit or take.
    pub fn expiry(&self) -> Duration {
        Duration::from_millis(self.call.expiry_ms)
    }

    /// A first try: deposit the ratio. First tries are never held back, so `granted` is true.
    /// The time is the server's: `_now_ms` is there for the local store's interface.
    pub fn deposit(&self, _now_ms: u64) -> Result<Update, RedisStoreError> {
        self.exchange(&Exchange::plain(Op::Deposit))
    }

    /// A retry: take a token. `granted` false means that the run must give up (reason `quota`).
    pub fn take(&self, _now_ms: u64) -> Result<Update, RedisStoreError> {
        self.exchange(&Exchange::plain(Op::Take))
    }

    /// The quota as it stands: the tokens there are now, and whether a retry would get one. It
    /// writes nothing; a quota not used yet (or expired) reads as a full bucket.
    pub fn peek(&self, _now_ms: u64) -> Result<Update, RedisStoreError> {
        self.exchange(&Exchange::plain(Op::Peek))
    }

    /// Runs the script for `exchange` within one deadline (never past the end of the budget,
    /// but for the last try's count), connecting first if no connection is open (the first
    /// operation, or one after a failure that closed it), and following cluster redirects.
    pub fn exchange(&self, op: &Exchange) -> Result<Update, RedisStoreError> {
        // The count of the run's last try has a deadline of its own, after the end of the
        // budget if need be: a try that the budget cut short is counted all the same.
        let until = match op.op {
            Op::Count => None,
            Op::Deposit | Op::Take | Op::Peek => self.until,
        };
        let deadline = Deadline::new(until);
        // A thread that panicked while holding the lock left at worst a connection in an
        // unknown state, which the failure below replaces.
        let mut slot = self.node.lock().unwrap_or_else(PoisonError::into_inner);
        let (reply, at) = self
            .exchange_on(&mut slot, op, &deadline)
            .map_err(|e| self.server.scrub(e))?;
        script::update(reply).map_err(|reply| {
            self.server.scrub(RedisStoreError::Reply {
                server: at.to_string(),
                reply,
            })
        })
    }

    /// The script's reply, and the node that gave it.
    fn exchange_on(
        &self,
        slot: &mut Option<Node>,
        op: &Exchange,
        deadline: &Deadline,
    ) -> Result<(Reply, Addr), RedisStoreError> {
        let mut ask: Option<Addr> = None;
        for _ in 0..=MAX_REDIRECTS {
            let (answer, at) = match ask.take() {
                Some(addr) => self.eval_asking(addr, op, deadline)?,
                None => self.eval_on(slot, op, deadline)?,
            };
            let message = match answer {
                Ok(value) => return Ok((value, at)),
                Err(ExchangeError::Server(message)) => message,
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
                        source: ExchangeError::Server(message),
                    });
                }
            }
        }
        Err(RedisStoreError::Command {
            server: self.server(),
            source: ExchangeError::Redirects,
        })
    }

    /// The script's answer from the node of the connection kept, opened first if there is
    /// none, and that node.
    fn eval_on(
        &self,
        slot: &mut Option<Node>,
        op: &Exchange,
        deadline: &Deadline,
    ) -> Result<(Result<Reply, ExchangeError>, Addr), RedisStoreError> {
        let node = match slot {
            Some(node) => node,
            None => slot.insert(self.server.open(&self.server.addr, deadline)?),
        };
        let answer = self.call.eval(node, op, deadline, false);
        let at = node.addr.clone();
        // An error the server sent leaves the connection in step; anything else (a timeout, a
        // reset, a reply cut off) may have left bytes to come.
        if !matches!(answer, Ok(_) | Err(ExchangeError::Server(_))) {
            *slot = None;
        }
        Ok((answer, at))
    }

    /// The script's answer from the node that `ASK` named, asked once on a connection of its
    /// own: the slot stays with the node that `MOVED` named until the migration ends.
    fn eval_asking(
        &self,
        addr: Addr,
        op: &Exchange,
        deadline: &Deadline,
    ) -> Result<(Result<Reply, ExchangeError>, Addr), RedisStoreError> {
        let mut node = self.server.open(&addr, deadline)?;
        let answer = node
            .request(&[b"ASKING"], deadline)
            .and_then(|_| self.call.eval(&mut node, op, deadline, true));
        Ok((answer, addr))
    }
}

/// Sends `commands` at once on the connection in `slot` (opened first when there is none),
/// following a Redis Cluster's redirects as a quota's update does: `MOVED` opens the node
/// named and keeps it in `slot`, `ASK` sends them once more to the node named after `ASKING`;
/// at most [`MAX_REDIRECTS`], within the one deadline. Every command names keys of one slot
/// (a store's keys share a hash tag), so a redirect means that none of them ran. `fresh`
/// prepares each connection opened. `Err` when no connection could be made; otherwise the
/// exchange's result, an error reply included.
pub(crate) fn requests_following(
    server: &Server,
    slot: &mut Option<Node>,
    commands: &[Vec<&[u8]>],
    deadline: &Deadline,
    fresh: impl Fn(&mut Node),
) -> Result<Result<Vec<Reply>, ExchangeError>, RedisStoreError> {
    let open = |addr: &Addr| {
        server.open(addr, deadline).map(|mut node| {
            fresh(&mut node);
            node
        })
    };
    let mut ask: Option<Addr> = None;
    for _ in 0..=MAX_REDIRECTS {
        let (answer, at) = match ask.take() {
            Some(addr) => {
                let mut node = open(&addr)?;
                let mut asking: Vec<Vec<&[u8]>> = vec![vec![b"ASKING"]];
                asking.extend(commands.iter().cloned());
                let answer = node.requests(&asking, deadline).map(|mut replies| {
                    replies.remove(0);
                    replies
                });
                (answer, addr)
            }
            None => {
                let node = match slot {
                    Some(node) => node,
                    None => slot.insert(open(&server.addr)?),
                };
                let answer = node.requests(commands, deadline);
                let at = node.addr.clone();
                // An error the server sent leaves the connection in step; anything else may
                // have left bytes to come.
                if !matches!(answer, Ok(_) | Err(ExchangeError::Server(_))) {
                    *slot = None;
                }
                (answer, at)
            }
        };
        let Err(ExchangeError::Server(message)) = &answer else {
            return Ok(answer);
        };
        match redirect(message, &at) {
            Some((Redirect::Moved, addr)) => *slot = Some(open(&addr)?),
            Some((Redirect::Ask, addr)) => ask = Some(addr),
            None => return Ok(answer),
        }
    }
    Ok(Err(ExchangeError::Redirects))
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

/// Whatever goes wrong with Redis is a failure, never busy: the run goes on with the local
/// store.
impl BucketStore for RedisStore {
    fn exchange(&self, exchange: &Exchange, _now_ms: u64) -> Result<Update, Unanswered> {
        RedisStore::exchange(self, exchange).map_err(|e| Unanswered::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
