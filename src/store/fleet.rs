//! A fleet's dead letters on Redis (docs/dead-letters.md#a-fleets-failed-runs-on-redis): the runs
//! that gave up on any machine naming `redis://HOST[:PORT]/NAME`, in one Redis Stream, with what
//! became of each beside it. The client is the quota's (`store/redis/`): one deadline per
//! exchange, replies bounded, the password never shown.
//!
//! The keys of NAME, all with the hash tag `{NAME}` so that a cluster keeps them on one node:
//!
//! - `retry:dead:{NAME}`: the stream; one entry per run that gave up, its fields `id` (the run
//!   id), `host` (the machine it ran on) and `record` (the line a dead-letter file would hold);
//! - `retry:dead:{NAME}:ids`: run id → its entry's id, so that a record sent twice (a run that
//!   sent it and did not hear back, a move of the records kept locally) is added once;
//! - `retry:dead:{NAME}:state`: run id → `resolved` or `forgotten`, once settled;
//! - `retry:dead:{NAME}:attempts`: run id → how many replays of it failed;
//! - `retry:dead:{NAME}:claims`: run id → the lease of the replay running it now
//!   (`OWNER TOKEN EXPIRES_MS`, `store/lease.rs`);
//! - `retry:dead:{NAME}:fence`: run id → the last fencing token granted on it;
//! - `retry:dead:{NAME}:pruned`: run id → when a prune dropped it (the server's time in ms), so
//!   that a move of kept runs cut short never brings it back.
//!
//! A replay claims a record with one script that Redis runs alone: it is given the record only
//! when no one settled it and no lease on it is live, so two replays at once, on one machine or
//! many, never both run it. The claim is a lease that the replay renews while it lives; a
//! replay that dies or is stopped leaves it to lapse, and the record to the next replay, and a
//! replay whose lease another took since settles nothing. The server's clock decides, not the
//! machines'. Redis Streams' consumer groups hand an entry to one consumer too, but a record that
//! fails again must go back to the next replay at once while a running claim holds for as long
//! as its replay lives, which one idle time for the whole group cannot say.

use std::time::{Duration, SystemTime};

use crate::redis_url::RedisAddress;
use crate::store::deadletter::{Pending, Record, State, record_of_line};
pub use crate::store::fleet_replies::{FleetError, FleetErrorKind};
use crate::store::fleet_replies::{MOST_REPLY, after, count_and_ids, entry, exchange_words, texts};
use crate::store::fleet_scripts::Scripts;
use crate::store::lease::Lease;
use crate::store::record::fits_a_reader;
use crate::store::redis::resp::{Deadline, ExchangeError, Node, Reply};
use crate::store::redis::server::{Credentials, Server};
use crate::store::redis::{RedisStoreError, requests_following};

/// The longest one exchange with Redis may take, connecting included: a page of records on a
/// slow link, far longer than a quota's decision may.
pub const EXCHANGE_DEADLINE: Duration = Duration::from_secs(2);

/// The records read from the stream at a time.
const PAGE: usize = 5000;

/// A record of the stream, with where it ran and who runs it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub pending: Pending,
    pub host: String,
    /// The replay that holds it, while its lease is live by the server's clock.
    pub claim: Option<String>,
    /// The stream entry's id.
    pub entry: String,
}

/// What a claim came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This replay runs the record, under this fencing token; `lapsed` names the replay whose
    /// lease on it lapsed without being let go (it died, or was stopped or cut off), if one did.
    Granted { token: u64, lapsed: Option<String> },
    /// Another replay holds it now.
    ClaimedByAnother(String),
    /// It was resolved or forgotten since it was listed.
    Settled,
    /// Another replay ran it since it was listed, and it failed again: that was its replay.
    Replayed,
    /// A prune dropped it since it was listed.
    Gone,
}

/// What settling a replayed run came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    Done,
    /// A prune dropped it meanwhile.
    Gone,
    /// The lease is no longer this replay's: another holds the run now, and this replay
    /// settles nothing.
    Lost,
    /// It was forgotten while the lease had lapsed (its replay stopped or cut off, and nobody
    /// else took it): the forget stands, and this replay settles nothing.
    Forgotten,
}

/// What becomes of a replayed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    Resolved,
    /// It failed again: one attempt more, and the lease renewed until the replay ends.
    Failed,
    /// The replay ends: its lease on a run that failed again is let go.
    Release,
}

/// What a prune of the stream dropped and kept, counted in runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamPruned {
    pub resolved: u64,
    pub forgotten: u64,
    pub old: u64,
    pub kept: u64,
}

/// The dead letters of NAME on one Redis server.
pub struct Fleet {
    server: Server,
    pub(crate) name: String,
    node: Option<Node>,
    scripts: Scripts,
}

impl Fleet {
    /// The store of `address`, with the user and password of `given` where the address has
    /// none. Nothing is sent yet.
    pub fn open(address: &RedisAddress, given: Credentials) -> Fleet {
        Fleet {
            server: Server::new(address, given),
            name: address.name().to_string(),
            node: None,
            scripts: Scripts::new(),
        }
    }

    /// The store of `address`, with the user and password of `RETRY_REDIS_USER` and
    /// `RETRY_REDIS_PASSWORD` as `var` reads them where the address has none, as the quota takes
    /// them.
    pub fn from_env(
        address: &RedisAddress,
        var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Fleet {
        let given = crate::store::redis::Settings::from_env(var, None).credentials;
        Fleet::open(address, given)
    }

    fn key(&self, part: &str) -> String {
        match part {
            "" => format!("retry:dead:{{{}}}", self.name),
            part => format!("retry:dead:{{{}}}:{part}", self.name),
        }
    }

    /// Sends one command within [`EXCHANGE_DEADLINE`], connecting first when no connection is
    /// open; a failure that may leave a reply unread closes the connection. Every command sent
    /// this way may be sent twice (see [`Fleet::requests`]).
    pub(crate) fn request(&mut self, args: &[&[u8]]) -> Result<Reply, FleetError> {
        let mut replies = self.requests(&[args.to_vec()])?;
        replies
            .pop()
            .ok_or_else(|| FleetError::new("Redis sent no reply"))
    }

    /// Sends `commands` at once within one [`EXCHANGE_DEADLINE`], and reads their replies. A
    /// connection kept from an earlier exchange that turns out closed (the server's idle
    /// `timeout`, `CLIENT KILL`, a proxy) is opened again and the commands sent once more,
    /// within what is left of the deadline: every command of this store may be sent twice to
    /// the same effect (a run id is added once, a claim asked again by its owner is the same
    /// claim, a failed attempt is counted once per lease).
    fn requests(&mut self, commands: &[Vec<&[u8]>]) -> Result<Vec<Reply>, FleetError> {
        self.requests_once_or_twice(commands, true)
    }

    pub(crate) fn requests_once_or_twice(
        &mut self,
        commands: &[Vec<&[u8]>],
        again: bool,
    ) -> Result<Vec<Reply>, FleetError> {
        let deadline = Deadline::within(EXCHANGE_DEADLINE);
        let reused = self.node.is_some();
        let answer = self.exchange(commands, &deadline)?;
        let dropped = matches!(&answer, Err(ExchangeError::Io(_)));
        let answer = match answer {
            Err(_) if again && reused && dropped => self.exchange(commands, &deadline)?,
            answer => answer,
        };
        answer.map_err(|source| {
            self.failed(RedisStoreError::Command {
                server: self.server.addr.to_string(),
                source,
            })
        })
    }

    /// One exchange of `commands` before `deadline`, on the open connection or a new one: `Err`
    /// when no connection could be made, else the exchange's result.
    fn exchange(
        &mut self,
        commands: &[Vec<&[u8]>],
        deadline: &Deadline,
    ) -> Result<Result<Vec<Reply>, ExchangeError>, FleetError> {
        let server = &self.server;
        let fresh = |node: &mut Node| node.allow_replies_of(MOST_REPLY);
        requests_following(server, &mut self.node, commands, deadline, fresh)
            .map_err(|e| self.failed(e))
    }

    /// `e` as one line without the password.
    fn failed(&self, e: RedisStoreError) -> FleetError {
        if let Some(code) = e.refusal() {
            return FleetError::refused(&self.server.addr.to_string(), code);
        }
        match self.server.scrub(e) {
            RedisStoreError::Command { server, source } => FleetError {
                text: format!("Redis at {server} failed: {}", exchange_words(&source)),
                kind: match source {
                    ExchangeError::TooLarge => FleetErrorKind::TooLarge,
                    _ => FleetErrorKind::Other,
                },
            },
            other => FleetError::new(other.to_string()),
        }
    }

    /// Runs a script on the keys `keys` with `args`.
    fn script(
        &mut self,
        script: &str,
        keys: &[String],
        args: &[&[u8]],
    ) -> Result<Reply, FleetError> {
        let count = keys.len().to_string();
        let mut words: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), count.as_bytes()];
        words.extend(keys.iter().map(|k| k.as_bytes()));
        words.extend_from_slice(args);
        self.request(&words)
    }

    /// Adds the record of a run that gave up on `host`; false when the stream has it already.
    /// A record longer than a file's line may be is refused, as a file refuses it.
    pub fn add(&mut self, record: &Record, host: &str) -> Result<bool, FleetError> {
        let keys = [self.key(""), self.key("ids"), self.key("pruned")];
        let line = record.line();
        fits_a_reader(&line).map_err(|e| FleetError::new(e.to_string()))?;
        let args: [&[u8]; 3] = [record.id.as_bytes(), host.as_bytes(), line.as_bytes()];
        let script = self.scripts.add.clone();
        match self.script(&script, &keys, &args)? {
            Reply::Int(n) => Ok(n == 1),
            other => Err(self.odd(&other)),
        }
    }

    pub(crate) fn odd(&self, reply: &Reply) -> FleetError {
        let text = self.server.scrub(RedisStoreError::Reply {
            server: self.server.addr.to_string(),
            reply: reply.to_string(),
        });
        match text {
            RedisStoreError::Reply { server, reply } => FleetError::new(format!(
                "Redis at {server} answered '{}', which is no answer to retry's request",
                crate::store::redis::resp::one_line(&reply)
            )),
            other => FleetError::new(other.to_string()),
        }
    }

    /// Every record of the stream, in the order added, with its state; the settled ones only
    /// with `all`. A page's states, claims and attempts are asked for with the next page, in
    /// one round trip, so that Redis reads the next page while this one is read here. A page
    /// whose reply is longer than retry reads is asked for again in pages a tenth as long, down
    /// to one record: large records make a slower listing, never none.
    pub fn list(&mut self, all: bool) -> Result<Vec<Listed>, FleetError> {
        let mut listed = Vec::new();
        // A claim is shown while its lease is live by the server's clock, which decides it.
        let now = self.server_ms()?;
        let key = self.key("");
        let mut count = PAGE;
        let range = |from: &str, count: usize| -> Vec<Vec<u8>> {
            let count = count.to_string();
            [
                &b"XRANGE"[..],
                key.as_bytes(),
                from.as_bytes(),
                b"+",
                b"COUNT",
                count.as_bytes(),
            ]
            .iter()
            .map(|w| w.to_vec())
            .collect()
        };
        let mut reply = loop {
            let first = range("-", count);
            match self.request(&first.iter().map(Vec::as_slice).collect::<Vec<_>>()) {
                Err(why) if too_large(&why) && count > 1 => count = (count / 10).max(1),
                other => break other?,
            }
        };
        loop {
            let entries = self.entries(reply)?;
            let Some(last) = entries.last().map(|e| e.0.clone()) else {
                break;
            };
            let more = entries.len() == count;
            let from = more.then(|| self.after(&last)).transpose()?;
            let (state, claims, attempts) =
                (self.key("state"), self.key("claims"), self.key("attempts"));
            let ids: Vec<&[u8]> = entries.iter().map(|e| e.1.as_bytes()).collect();
            let hmget_keys = [state, claims, attempts];
            let hmgets: Vec<Vec<&[u8]>> = hmget_keys
                .iter()
                .map(|key| {
                    let mut words: Vec<&[u8]> = vec![b"HMGET", key.as_bytes()];
                    words.extend_from_slice(&ids);
                    words
                })
                .collect();
            let replies = loop {
                let next = from.as_deref().map(|from| range(from, count));
                let mut commands = hmgets.clone();
                if let Some(next) = &next {
                    commands.push(next.iter().map(Vec::as_slice).collect());
                }
                match self.requests(&commands) {
                    Err(why) if next.is_some() && too_large(&why) && count > 1 => {
                        count = (count / 10).max(1);
                    }
                    other => break other?,
                }
            };
            let mut replies = replies.into_iter();
            let mut fields = || -> Result<Vec<Option<String>>, FleetError> {
                let reply = replies
                    .next()
                    .ok_or_else(|| FleetError::new("Redis sent too few replies"))?;
                self.field_values(reply, entries.len())
            };
            let (states, claims, attempts) = (fields()?, fields()?, fields()?);
            let rest = replies.next();
            self.page(entries, [states, claims, attempts], all, now, &mut listed)?;
            match rest {
                Some(next) if more => reply = next,
                _ => break,
            }
        }
        Ok(listed)
    }

    /// The entries of an XRANGE reply: id, run id, host, record line.
    fn entries(&self, reply: Reply) -> Result<Vec<(String, String, String, String)>, FleetError> {
        let Reply::Array(Some(items)) = reply else {
            return Err(self.odd(&reply));
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let entry = entry(item)
                .ok_or_else(|| FleetError::new("Redis sent a stream entry that is not one"))?;
            out.push(entry);
        }
        Ok(out)
    }

    /// Reads a page of entries, with their states, claims and attempts, into `listed`.
    fn page(
        &mut self,
        entries: Vec<(String, String, String, String)>,
        [states, claims, attempts]: [Vec<Option<String>>; 3],
        all: bool,
        now: u64,
        listed: &mut Vec<Listed>,
    ) -> Result<(), FleetError> {
        for (k, (entry, _, host, line)) in entries.into_iter().enumerate() {
            let state = match states[k].as_deref() {
                Some("resolved") => State::Resolved,
                Some("forgotten") => State::Forgotten,
                _ => State::Pending,
            };
            if state != State::Pending && !all {
                continue;
            }
            let damaged = |why| format!("the stream's entry {entry} is damaged: {why}");
            let record = record_of_line(&line)
                .map_err(|why| FleetError::new(self.server.withheld(damaged(why))))?;
            listed.push(Listed {
                pending: Pending {
                    line: listed.len() + 1,
                    record,
                    attempts: attempts[k]
                        .as_deref()
                        .and_then(|a| a.parse().ok())
                        .unwrap_or(0),
                    state,
                },
                host,
                claim: claims[k]
                    .as_deref()
                    .and_then(Lease::parse)
                    .filter(|lease| lease.live_at(now))
                    .map(|lease| lease.owner),
                entry,
            });
        }
        Ok(())
    }

    /// The entry id to read on from after `last`: an id that is not one is told without the
    /// password, as the server's words always are.
    pub(crate) fn after(&self, last: &str) -> Result<String, FleetError> {
        let not_one = || format!("an entry id '{last}' that is not one");
        after(last).ok_or_else(|| FleetError::new(self.server.withheld(not_one())))
    }

    /// The values of an HMGET reply of `n` fields.
    fn field_values(&self, reply: Reply, n: usize) -> Result<Vec<Option<String>>, FleetError> {
        match reply {
            Reply::Array(Some(items)) if items.len() == n => Ok(items
                .into_iter()
                .map(|i| match i {
                    Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                    _ => None,
                })
                .collect()),
            other => Err(self.odd(&other)),
        }
    }

    /// Claims the run `id` for `owner`, a lease of `length`, if no replay settled it, holds it
    /// or replayed it since this one listed it with `attempts` failed replays.
    pub fn claim(
        &mut self,
        id: &str,
        owner: &str,
        length: Duration,
        attempts: u64,
    ) -> Result<Claim, FleetError> {
        let keys = [
            self.key("ids"),
            self.key("state"),
            self.key("claims"),
            self.key("attempts"),
            self.key("fence"),
        ];
        let ms = length.as_millis().max(1).to_string();
        let attempts = attempts.to_string();
        let script = self.scripts.claim.clone();
        let args: [&[u8]; 4] = [
            id.as_bytes(),
            owner.as_bytes(),
            ms.as_bytes(),
            attempts.as_bytes(),
        ];
        let reply = self.script(&script, &keys, &args)?;
        let words = texts(&reply).ok_or_else(|| self.odd(&reply))?;
        let word = |k: usize| words.get(k).map(String::as_str);
        Ok(match word(0) {
            Some("ok") => Claim::Granted {
                token: word(1)
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| self.odd(&reply))?,
                lapsed: word(2).filter(|w| !w.is_empty()).map(str::to_string),
            },
            Some("claimed") => Claim::ClaimedByAnother(word(1).unwrap_or_default().to_string()),
            Some("settled") => Claim::Settled,
            Some("replayed") => Claim::Replayed,
            Some("gone") => Claim::Gone,
            _ => return Err(self.odd(&reply)),
        })
    }

    /// Renews for `length` the leases of `owner` on the runs `claimed` (run id and token): for
    /// each, whether it is still the owner's.
    pub fn renew(
        &mut self,
        owner: &str,
        length: Duration,
        claimed: &[(String, u64)],
    ) -> Result<Vec<bool>, FleetError> {
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let keys = [self.key("claims")];
        let ms = length.as_millis().max(1).to_string();
        let tokens: Vec<String> = claimed.iter().map(|(_, t)| t.to_string()).collect();
        let mut args: Vec<&[u8]> = vec![owner.as_bytes(), ms.as_bytes()];
        for ((id, _), token) in claimed.iter().zip(&tokens) {
            args.push(id.as_bytes());
            args.push(token.as_bytes());
        }
        let script = self.scripts.renew.clone();
        match self.script(&script, &keys, &args)? {
            Reply::Array(Some(items)) if items.len() == claimed.len() => {
                Ok(items.iter().map(|i| matches!(i, Reply::Int(1))).collect())
            }
            other => Err(self.odd(&other)),
        }
    }

    /// Settles the run `id` that `owner` replayed under the lease of `token`, as `how` says;
    /// nothing is changed when the lease is no longer the owner's.
    pub fn settle(
        &mut self,
        id: &str,
        owner: &str,
        token: u64,
        how: Settle,
    ) -> Result<Settled, FleetError> {
        let keys = [
            self.key("claims"),
            self.key("state"),
            self.key("attempts"),
            self.key("ids"),
        ];
        let how: &[u8] = match how {
            Settle::Resolved => b"resolved",
            Settle::Failed => b"failed",
            Settle::Release => b"release",
        };
        let token = token.to_string();
        let script = self.scripts.settle.clone();
        let args: [&[u8]; 4] = [id.as_bytes(), owner.as_bytes(), token.as_bytes(), how];
        let reply = self.script(&script, &keys, &args)?;
        match &reply {
            Reply::Bulk(Some(b)) if b == b"ok" => Ok(Settled::Done),
            Reply::Bulk(Some(b)) if b == b"gone" => Ok(Settled::Gone),
            Reply::Bulk(Some(b)) if b == b"lost" => Ok(Settled::Lost),
            Reply::Bulk(Some(b)) if b == b"settled" => Ok(Settled::Forgotten),
            _ => Err(self.odd(&reply)),
        }
    }

    /// The server's time, in milliseconds since the epoch: the clock the claims are written by.
    fn server_ms(&mut self) -> Result<u64, FleetError> {
        match self.request(&[b"TIME"])? {
            Reply::Array(Some(parts)) if parts.len() == 2 => {
                let number = |r: &Reply| match r {
                    Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse::<u64>().ok(),
                    _ => None,
                };
                match (number(&parts[0]), number(&parts[1])) {
                    (Some(s), Some(us)) => Ok(s * 1000 + us / 1000),
                    _ => Err(FleetError::new("Redis answered TIME with something else")),
                }
            }
            other => Err(self.odd(&other)),
        }
    }

    /// Marks the runs `ids` forgotten: how many were, and the ids a replay holds now, which
    /// are left pending (that replay settles them).
    pub fn forget(&mut self, ids: &[String]) -> Result<(u64, Vec<String>), FleetError> {
        let keys = [self.key("ids"), self.key("state"), self.key("claims")];
        let mut n = 0;
        let mut claimed = Vec::new();
        let script = self.scripts.forget.clone();
        for batch in ids.chunks(1000) {
            let args: Vec<&[u8]> = batch.iter().map(|i| i.as_bytes()).collect();
            let reply = self.script(&script, &keys, &args)?;
            let (k, ids) = count_and_ids(&reply).ok_or_else(|| self.odd(&reply))?;
            n += k;
            claimed.extend(ids);
        }
        Ok((n, claimed))
    }

    /// Drops from the stream the records settled, and the pending ones that gave up before
    /// `cutoff`, with all that is kept about them; a run whose lease is live is kept, judged
    /// by the server as it drops each (a replay claiming it meanwhile keeps it).
    pub fn prune(&mut self, cutoff: SystemTime) -> Result<StreamPruned, FleetError> {
        let mut pruned = StreamPruned::default();
        // (entry, run id, what it would be counted as)
        let mut dropping: Vec<(String, String, State)> = Vec::new();
        for l in self.list(true)? {
            let old = humantime::parse_rfc3339(&l.pending.record.ts).is_ok_and(|at| at < cutoff);
            if l.claim.is_some() || (l.pending.state == State::Pending && !old) {
                pruned.kept += 1;
                continue;
            }
            dropping.push((l.entry, l.pending.record.id, l.pending.state));
        }
        let keys: Vec<String> = ["", "ids", "state", "attempts", "claims", "fence", "pruned"]
            .iter()
            .map(|part| self.key(part))
            .collect();
        let script = self.scripts.prune.clone();
        for batch in dropping.chunks(1000) {
            let mut args: Vec<&[u8]> = Vec::with_capacity(batch.len() * 2);
            for (entry, id, _) in batch {
                args.push(entry.as_bytes());
                args.push(id.as_bytes());
            }
            let reply = self.script(&script, &keys, &args)?;
            let (_, claimed) = count_and_ids(&reply).ok_or_else(|| self.odd(&reply))?;
            for (_, id, state) in batch {
                if claimed.contains(id) {
                    pruned.kept += 1;
                    continue;
                }
                match state {
                    State::Resolved => pruned.resolved += 1,
                    State::Forgotten => pruned.forgotten += 1,
                    State::Pending => pruned.old += 1,
                }
            }
        }
        self.drop_old_tombstones()?;
        Ok(pruned)
    }

    /// Drops the tombstones of runs pruned longer ago than [`TOMBSTONE_KEPT`]: a run kept on a
    /// machine longer than that after a prune dropped it could come back with its move.
    fn drop_old_tombstones(&mut self) -> Result<(), FleetError> {
        let now = self.server_ms()?;
        let oldest = now.saturating_sub(TOMBSTONE_KEPT.as_millis() as u64);
        let key = self.key("pruned");
        let mut cursor = "0".to_string();
        loop {
            let reply = self.request(&[
                b"HSCAN",
                key.as_bytes(),
                cursor.as_bytes(),
                b"COUNT",
                b"1000",
            ])?;
            let Reply::Array(Some(mut parts)) = reply else {
                return Err(self.odd(&reply));
            };
            let (Some(Reply::Array(Some(fields))), Some(Reply::Bulk(Some(next)))) =
                (parts.pop(), parts.pop())
            else {
                return Err(FleetError::new("Redis answered HSCAN with something else"));
            };
            let mut old: Vec<Vec<u8>> = Vec::new();
            for pair in fields.chunks(2) {
                if let [Reply::Bulk(Some(id)), Reply::Bulk(Some(at))] = pair {
                    let at: u64 = std::str::from_utf8(at)
                        .ok()
                        .and_then(|a| a.parse().ok())
                        .unwrap_or(0);
                    if at < oldest {
                        old.push(id.clone());
                    }
                }
            }
            if !old.is_empty() {
                let mut words: Vec<&[u8]> = vec![b"HDEL", key.as_bytes()];
                words.extend(old.iter().map(Vec::as_slice));
                self.request(&words)?;
            }
            cursor = String::from_utf8_lossy(&next).into_owned();
            if cursor == "0" {
                return Ok(());
            }
        }
    }
}

/// Whether `why` is a reply longer than retry reads of one: a page of records too large, to
/// ask for again in smaller pages.
fn too_large(why: &FleetError) -> bool {
    why.kind == FleetErrorKind::TooLarge
}

/// How long a prune keeps the tombstone of a run it dropped.
pub const TOMBSTONE_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

/// This machine's name, as the records of its runs say where they ran.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// A name for one replay among all the fleet's: its host, process and a random part. A lease
/// holds it as one word, so a space or a control character the host name holds (the kernel
/// takes any byte but NUL) is written `_`.
pub fn consumer_name() -> String {
    let host: String = host_name()
        .chars()
        .map(|c| match c.is_whitespace() || c.is_control() {
            true => '_',
            false => c,
        })
        .collect();
    format!(
        "{}:{}:{:08x}",
        host,
        std::process::id(),
        rand::random::<u32>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_entry_id_follows_the_last_read() {
        assert_eq!(after("1700000000000-0").as_deref(), Some("1700000000000-1"));
        assert_eq!(after(&format!("5-{}", u64::MAX)).as_deref(), Some("6-0"));
        assert_eq!(after("x-1"), None);
    }
}
