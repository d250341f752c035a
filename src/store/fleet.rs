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
//! - `retry:dead:{NAME}:claims`: run id → `CONSUMER EXPIRES_MS`, the replay running it now.
//!
//! A replay claims a record with one script that Redis runs alone: it is given the record only
//! when no one settled it and no claim on it is still running, so two replays at once, on one
//! machine or many, never both run it. The claim lasts as long as the record's run may (its
//! budget and the grace of its stop, an hour when it has no budget); a replay that dies leaves
//! the claim to run out, and the record to the next replay. The server's clock decides, not the
//! machines'. Redis Streams' consumer groups hand an entry to one consumer too, but a record that
//! fails again must go back to the next replay at once while a running claim holds for up to its
//! own budget, which one idle time for the whole group cannot say.

use std::time::{Duration, SystemTime};

use crate::policy::quota::RedisAddress;
use crate::store::deadletter::{Pending, Record, State, record_of_line};
use crate::store::fleet_scripts::{ADD, CLAIM, FORGET, SETTLE};
use crate::store::record::fits_a_reader;
use crate::store::redis::RedisStoreError;
use crate::store::redis::resp::{Deadline, ExchangeError, Node, Reply};
use crate::store::redis::server::Server;

/// The longest one exchange with Redis may take, connecting included: a page of records on a
/// slow link, far longer than a quota's decision may.
pub const EXCHANGE_DEADLINE: Duration = Duration::from_secs(2);

/// The records read from the stream at a time.
const PAGE: usize = 5000;

/// The most bytes one reply may take: a page of records of the usual few hundred bytes each
/// takes under a megabyte; a server sending more than this is refused, not believed.
const MOST_REPLY: usize = 64 << 20;

/// A claim's length when the record's run has no budget.
pub const CLAIM_WITHOUT_BUDGET: Duration = Duration::from_secs(3600);

/// Why the fleet's store could not be used, on one line that never holds the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError(pub String);

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A record of the stream, with where it ran and who runs it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub pending: Pending,
    pub host: String,
    /// The replay that claimed it, while the claim runs: `CONSUMER EXPIRES_MS`.
    pub claim: Option<String>,
    /// The stream entry's id.
    pub entry: String,
}

/// What a claim came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This replay runs the record.
    Granted,
    /// Another replay runs it now, or ran it to its end.
    Taken,
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
    name: String,
    node: Option<Node>,
}

impl Fleet {
    /// The store of `address`, with `password` when the address has none. Nothing is sent yet.
    pub fn open(address: &RedisAddress, password: Option<Vec<u8>>) -> Fleet {
        Fleet {
            server: Server::new(address, password),
            name: address.name().to_string(),
            node: None,
        }
    }

    /// The store of `address`, with the password of `RETRY_REDIS_PASSWORD` as `var` reads it
    /// when the address has none, as the quota takes it.
    pub fn from_env(
        address: &RedisAddress,
        var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Fleet {
        let password = crate::store::redis::Settings::from_env(var, None).password;
        Fleet::open(address, password)
    }

    fn key(&self, part: &str) -> String {
        match part {
            "" => format!("retry:dead:{{{}}}", self.name),
            part => format!("retry:dead:{{{}}}:{part}", self.name),
        }
    }

    /// Sends one command within [`EXCHANGE_DEADLINE`], connecting first when no connection is
    /// open; a failure that may leave a reply unread closes the connection.
    fn request(&mut self, args: &[&[u8]]) -> Result<Reply, FleetError> {
        let mut replies = self.requests(&[args.to_vec()])?;
        replies
            .pop()
            .ok_or_else(|| FleetError("Redis sent no reply".into()))
    }

    /// Sends `commands` at once within one [`EXCHANGE_DEADLINE`], and reads their replies.
    fn requests(&mut self, commands: &[Vec<&[u8]>]) -> Result<Vec<Reply>, FleetError> {
        let deadline = Deadline::within(EXCHANGE_DEADLINE);
        let node = match &mut self.node {
            Some(node) => node,
            None => {
                let mut node = self
                    .server
                    .open(&self.server.addr.clone(), &deadline)
                    .map_err(|e| self.failed(e))?;
                node.allow_replies_of(MOST_REPLY);
                self.node.insert(node)
            }
        };
        let answer = node.requests(commands, &deadline);
        if !matches!(answer, Ok(_) | Err(ExchangeError::Server(_))) {
            self.node = None;
        }
        answer.map_err(|source| {
            self.failed(RedisStoreError::Command {
                server: self.server.addr.to_string(),
                source,
            })
        })
    }

    /// `e` as one line without the password.
    fn failed(&self, e: RedisStoreError) -> FleetError {
        FleetError(match self.server.scrub(e) {
            RedisStoreError::Command { server, source } => {
                format!("Redis at {server} failed: {}", exchange_words(&source))
            }
            other => other.to_string(),
        })
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
        let keys = [self.key(""), self.key("ids")];
        let line = record.line();
        fits_a_reader(&line).map_err(|e| FleetError(e.to_string()))?;
        let args: [&[u8]; 3] = [record.id.as_bytes(), host.as_bytes(), line.as_bytes()];
        match self.script(ADD, &keys, &args)? {
            Reply::Int(n) => Ok(n == 1),
            other => Err(self.odd(&other)),
        }
    }

    fn odd(&self, reply: &Reply) -> FleetError {
        let text = self.server.scrub(RedisStoreError::Reply {
            server: self.server.addr.to_string(),
            reply: reply.to_string(),
        });
        match text {
            RedisStoreError::Reply { server, reply } => FleetError(format!(
                "Redis at {server} answered '{}', which is no answer to retry's request",
                crate::store::redis::resp::one_line(&reply)
            )),
            other => FleetError(other.to_string()),
        }
    }

    /// Every record of the stream, in the order added, with its state; the settled ones only
    /// with `all`. A page's states, claims and attempts are asked for with the next page, in
    /// one round trip, so that Redis reads the next page while this one is read here. A page
    /// whose reply is longer than retry reads is asked for again in pages a tenth as long, down
    /// to one record: large records make a slower listing, never none.
    pub fn list(&mut self, all: bool) -> Result<Vec<Listed>, FleetError> {
        let mut listed = Vec::new();
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
                    .ok_or_else(|| FleetError("Redis sent too few replies".into()))?;
                self.field_values(reply, entries.len())
            };
            let (states, claims, attempts) = (fields()?, fields()?, fields()?);
            let rest = replies.next();
            self.page(entries, [states, claims, attempts], all, &mut listed)?;
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
                .ok_or_else(|| FleetError("Redis sent a stream entry that is not one".into()))?;
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
                .map_err(|why| FleetError(self.server.withheld(damaged(why))))?;
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
                claim: claims[k].clone(),
                entry,
            });
        }
        Ok(())
    }

    /// The entry id to read on from after `last`: an id that is not one is told without the
    /// password, as the server's words always are.
    fn after(&self, last: &str) -> Result<String, FleetError> {
        let not_one = || format!("an entry id '{last}' that is not one");
        after(last).ok_or_else(|| FleetError(self.server.withheld(not_one())))
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

    /// Claims the run `id` for `consumer` for `length`, if no replay settled it, holds it or
    /// replayed it since this one listed it with `attempts` failed replays.
    pub fn claim(
        &mut self,
        id: &str,
        consumer: &str,
        length: Duration,
        attempts: u64,
    ) -> Result<Claim, FleetError> {
        let keys = [
            self.key("ids"),
            self.key("state"),
            self.key("claims"),
            self.key("attempts"),
        ];
        let ms = length.as_millis().max(1).to_string();
        let attempts = attempts.to_string();
        match self.script(
            CLAIM,
            &keys,
            &[
                id.as_bytes(),
                consumer.as_bytes(),
                ms.as_bytes(),
                attempts.as_bytes(),
            ],
        )? {
            Reply::Bulk(Some(b)) if b == b"ok" => Ok(Claim::Granted),
            Reply::Bulk(Some(_)) => Ok(Claim::Taken),
            other => Err(self.odd(&other)),
        }
    }

    /// Settles the run `id` that `consumer` replayed: resolved, or one failed attempt more;
    /// either way its claim ends.
    pub fn settle(&mut self, id: &str, consumer: &str, resolved: bool) -> Result<(), FleetError> {
        let keys = [
            self.key("claims"),
            self.key("state"),
            self.key("attempts"),
            self.key("ids"),
        ];
        let how: &[u8] = if resolved { b"resolved" } else { b"failed" };
        match self.script(SETTLE, &keys, &[id.as_bytes(), consumer.as_bytes(), how])? {
            Reply::Int(_) => Ok(()),
            other => Err(self.odd(&other)),
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
                    _ => Err(FleetError("Redis answered TIME with something else".into())),
                }
            }
            other => Err(self.odd(&other)),
        }
    }

    /// Ends the claims of `consumer` on the runs `ids`, which it replayed and which failed
    /// again: pending, for the next replay.
    pub fn release(&mut self, ids: &[String], consumer: &str) -> Result<(), FleetError> {
        let keys = [
            self.key("claims"),
            self.key("state"),
            self.key("attempts"),
            self.key("ids"),
        ];
        for id in ids {
            match self.script(
                SETTLE,
                &keys,
                &[id.as_bytes(), consumer.as_bytes(), b"release"],
            )? {
                Reply::Int(_) => {}
                other => return Err(self.odd(&other)),
            }
        }
        Ok(())
    }

    /// Marks the runs `ids` forgotten; how many were.
    pub fn forget(&mut self, ids: &[String]) -> Result<u64, FleetError> {
        let keys = [self.key("ids"), self.key("state")];
        let mut n = 0;
        for batch in ids.chunks(1000) {
            let args: Vec<&[u8]> = batch.iter().map(|i| i.as_bytes()).collect();
            match self.script(FORGET, &keys, &args)? {
                Reply::Int(k) => n += k.max(0) as u64,
                other => return Err(self.odd(&other)),
            }
        }
        Ok(n)
    }

    /// Drops from the stream the records settled, and the pending ones that gave up before
    /// `cutoff`, with all that is kept about them.
    pub fn prune(&mut self, cutoff: SystemTime) -> Result<StreamPruned, FleetError> {
        let mut pruned = StreamPruned::default();
        let mut dropped: Vec<(String, String)> = Vec::new();
        let now = self.server_ms()?;
        for l in self.list(true)? {
            let old = humantime::parse_rfc3339(&l.pending.record.ts).is_ok_and(|at| at < cutoff);
            // A run a replay holds now is that replay's to settle: it stays.
            let held = l
                .claim
                .as_deref()
                .and_then(|c| c.rsplit_once(' '))
                .and_then(|(_, expires)| expires.parse::<u64>().ok())
                .is_some_and(|expires| expires > now);
            if held {
                pruned.kept += 1;
                continue;
            }
            match l.pending.state {
                State::Resolved => pruned.resolved += 1,
                State::Forgotten => pruned.forgotten += 1,
                State::Pending if old => pruned.old += 1,
                State::Pending => {
                    pruned.kept += 1;
                    continue;
                }
            }
            dropped.push((l.entry, l.pending.record.id));
        }
        for batch in dropped.chunks(1000) {
            let stream = self.key("");
            let mut words: Vec<&[u8]> = vec![b"XDEL", stream.as_bytes()];
            words.extend(batch.iter().map(|(e, _)| e.as_bytes()));
            self.request(&words)?;
            for part in ["ids", "state", "attempts", "claims"] {
                let key = self.key(part);
                let mut words: Vec<&[u8]> = vec![b"HDEL", key.as_bytes()];
                words.extend(batch.iter().map(|(_, id)| id.as_bytes()));
                self.request(&words)?;
            }
        }
        Ok(pruned)
    }
}

/// The most runs a fleet's history keeps: past it, Redis trims the oldest (`MAXLEN ~`, so a
/// little more are kept until a whole node of the stream can go).
pub const HISTORY_CAP: u64 = 1_000_000;

/// The runs read from a history stream at a time.
const HISTORY_PAGE: usize = 5000;

impl Fleet {
    fn history_key(&self) -> String {
        format!("retry:history:{{{}}}", self.name)
    }

    /// Adds the history line of a run that ended on `host`.
    pub fn add_run(&mut self, line: &str, host: &str) -> Result<(), FleetError> {
        let key = self.history_key();
        let cap = HISTORY_CAP.to_string();
        let words: [&[u8]; 10] = [
            b"XADD",
            key.as_bytes(),
            b"MAXLEN",
            b"~",
            cap.as_bytes(),
            b"*",
            b"host",
            host.as_bytes(),
            b"line",
            line.as_bytes(),
        ];
        match self.request(&words)? {
            Reply::Bulk(Some(_)) => Ok(()),
            other => Err(self.odd(&other)),
        }
    }

    /// Drops the runs of the history added before `cutoff` (an entry's id is the server's
    /// time when the run's end was added): how many went, and how many are left.
    pub fn prune_history(&mut self, cutoff: SystemTime) -> Result<(u64, u64), FleetError> {
        let key = self.history_key();
        let ms = cutoff
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            .to_string();
        let dropped = match self.request(&[b"XTRIM", key.as_bytes(), b"MINID", ms.as_bytes()])? {
            Reply::Int(n) => n.max(0) as u64,
            other => return Err(self.odd(&other)),
        };
        match self.request(&[b"XLEN", key.as_bytes()])? {
            Reply::Int(n) => Ok((dropped, n.max(0) as u64)),
            other => Err(self.odd(&other)),
        }
    }

    /// Every run of the history, oldest first: its host and its line.
    pub fn runs(&mut self) -> Result<Vec<(String, String)>, FleetError> {
        let mut runs = Vec::new();
        let mut from = "-".to_string();
        loop {
            let key = self.history_key();
            let count = HISTORY_PAGE.to_string();
            let reply = self.request(&[
                b"XRANGE",
                key.as_bytes(),
                from.as_bytes(),
                b"+",
                b"COUNT",
                count.as_bytes(),
            ])?;
            let Reply::Array(Some(items)) = reply else {
                return Err(self.odd(&reply));
            };
            let more = items.len() == HISTORY_PAGE;
            let mut last = None;
            for item in items {
                let (id, fields) = fields_of(item).ok_or_else(|| {
                    FleetError("Redis sent a stream entry that is not one".into())
                })?;
                let host = fields
                    .iter()
                    .find(|(k, _)| k == "host")
                    .map(|(_, v)| v.clone());
                if let Some((_, line)) = fields.into_iter().find(|(k, _)| k == "line") {
                    runs.push((host.unwrap_or_default(), line));
                }
                last = Some(id);
            }
            match (more, last) {
                (true, Some(last)) => {
                    from = self.after(&last)?;
                }
                _ => break,
            }
        }
        Ok(runs)
    }
}

/// One entry of an XRANGE reply as its id and its fields, each a pair of texts.
fn fields_of(item: Reply) -> Option<(String, Vec<(String, String)>)> {
    let Reply::Array(Some(mut parts)) = item else {
        return None;
    };
    let Some(Reply::Array(Some(fields))) = parts.pop() else {
        return None;
    };
    let Some(Reply::Bulk(Some(id))) = parts.pop() else {
        return None;
    };
    // The bytes are taken, not copied: a page holds thousands of records.
    let text = |r: Reply| match r {
        Reply::Bulk(Some(b)) => String::from_utf8(b).ok(),
        _ => None,
    };
    let mut pairs = Vec::with_capacity(fields.len() / 2);
    let mut items = fields.into_iter();
    while let Some(name) = items.next() {
        pairs.push((text(name)?, text(items.next()?)?));
    }
    Some((String::from_utf8(id).ok()?, pairs))
}

/// An exchange's failure in words, without the quota's wording of a reply too large.
fn exchange_words(e: &ExchangeError) -> String {
    match e {
        ExchangeError::TooLarge => format!(
            "its reply is longer than the {} MiB retry reads of one",
            MOST_REPLY >> 20
        ),
        other => other.to_string(),
    }
}

/// Whether `why` says that a reply was longer than retry reads of one: a page of records too
/// large, to ask for again in smaller pages.
fn too_large(why: &FleetError) -> bool {
    why.0.ends_with(&exchange_words(&ExchangeError::TooLarge))
}

/// The entry id just after `id` (`MS-SEQ`), to go on reading a stream from.
fn after(id: &str) -> Option<String> {
    let (ms, seq) = id.split_once('-')?;
    let ms: u64 = ms.parse().ok()?;
    let seq: u64 = seq.parse().ok()?;
    Some(match seq.checked_add(1) {
        Some(seq) => format!("{ms}-{seq}"),
        None => format!("{}-0", ms.checked_add(1)?),
    })
}

/// One entry of an XRANGE reply: `[id, [field, value, ...]]`, read as its id, run id, host and
/// record line.
fn entry(item: Reply) -> Option<(String, String, String, String)> {
    let (id, fields) = fields_of(item)?;
    let (mut run, mut host, mut record) = (None, None, None);
    for (name, value) in fields {
        match name.as_str() {
            "id" => run = Some(value),
            "host" => host = Some(value),
            "record" => record = Some(value),
            _ => {}
        }
    }
    Some((id, run?, host.unwrap_or_default(), record?))
}

/// This machine's name, as the records of its runs say where they ran.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// A name for one replay among all the fleet's: its host, process and a random part.
pub fn consumer_name() -> String {
    format!(
        "{}:{}:{:08x}",
        host_name(),
        std::process::id(),
        rand::random::<u32>()
    )
}

/// How long a replay's claim on a record lasts: the record's budget and the grace of its last
/// stop, which is as long as its run may take, or [`CLAIM_WITHOUT_BUDGET`].
pub fn claim_length(budget: Option<Duration>, kill_after: Duration) -> Duration {
    match budget {
        Some(b) => b + kill_after,
        None => CLAIM_WITHOUT_BUDGET,
    }
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

    #[test]
    fn a_claim_lasts_the_records_budget_and_its_grace_or_an_hour() {
        assert_eq!(
            claim_length(Some(Duration::from_secs(30)), Duration::from_secs(5)),
            Duration::from_secs(35)
        );
        assert_eq!(
            claim_length(None, Duration::from_secs(5)),
            CLAIM_WITHOUT_BUDGET
        );
    }
}
