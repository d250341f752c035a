//! The lease of `--lock redis://…/NAME` (docs/processes.md#one-run-at-a-time): a lock for the
//! fleet, the lease of `store/lease.rs` (the one a replay's claim on a run is) on the field
//! `lease` of the hash `retry:lock:{NAME}`, its fencing tokens in `retry:lock:{NAME}:fence`
//! (one hash tag: a cluster keeps both on one slot). Beside the lease, the field `holder` says
//! who holds it (host, pid, run id, and since when by the server's clock), so that a run turned
//! away can name it.
//!
//! Every exchange has one deadline, connecting included, which never goes past the end of the
//! run's budget; a reply is read up to a few hundred bytes. The password is never shown: errors
//! are the fleet store's ([`FleetError`]), scrubbed as its are.

use std::time::{Duration, SystemTime};

use crate::policy::lock::{LockHolder, LockRecord, RECORD_MAX};
use crate::redis_url::RedisAddress;
use crate::store::fleet::FleetError;
use crate::store::fleet_replies::{exchange_words, texts};
use crate::store::lease::LEASE_LUA;
use crate::store::redis::resp::{Deadline, ExchangeError, Node, Reply};
use crate::store::redis::server::{Credentials, Server};
use crate::store::redis::{RedisStoreError, requests_following};

/// The longest one exchange for the lock may take, connecting included.
pub const EXCHANGE_DEADLINE: Duration = Duration::from_secs(2);

/// Grants the lease to ARGV[1] for ARGV[2] ms and writes ARGV[3] (who it is) beside it with
/// the server's time: `{'ok', token}`, or `{'held', holder}` while another owner's is live.
const TAKE_BODY: &str = r#"
local now = now_ms()
local token, owner = lease_grant(KEYS[1], KEYS[2], 'lease', ARGV[1], tonumber(ARGV[2]), now)
if not token then return {'held', redis.call('HGET', KEYS[1], 'holder') or ''} end
redis.call('HSET', KEYS[1], 'holder', ARGV[3] .. 'since_ms=' .. tostring(now) .. '\n')
return {'ok', tostring(token)}
"#;

/// Renews the lease of ARGV[1] with token ARGV[2] for ARGV[3] ms: 1, or 0 when it is not theirs.
const RENEW_BODY: &str = r#"
if lease_renew(KEYS[1], 'lease', ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), now_ms()) then
  return 1
end
return 0
"#;

/// Lets go of the lease of ARGV[1] with token ARGV[2]: 1, or 0 when it is not theirs.
const RELEASE_BODY: &str = r#"
if not lease_mine(KEYS[1], 'lease', ARGV[1], tonumber(ARGV[2])) then return 0 end
redis.call('HDEL', KEYS[1], 'lease', 'holder')
return 1
"#;

/// Who holds the lease, while it is live: `{holder}`, or `{}`.
const PEEK_BODY: &str = r#"
if lease_live(KEYS[1], 'lease', now_ms()) then
  return {redis.call('HGET', KEYS[1], 'holder') or ''}
end
return {}
"#;

/// Claims `--once`'s key for ARGV[1] as TAKE_BODY grants a lock, unless the key is done
/// (KEYS[3] holds its done record): `{'done', record}`.
const TAKE_ONCE_BODY: &str = r#"
local done = redis.call('GET', KEYS[3])
if done then return {'done', done} end
"#;

/// Marks `--once`'s key done for ARGV[4] ms, with ARGV[3] (who did it) and the server's time,
/// and lets go of the claim of ARGV[1] with token ARGV[2]: 1, or 0 when it is not theirs.
const DONE_BODY: &str = r#"
if not lease_mine(KEYS[1], 'lease', ARGV[1], tonumber(ARGV[2])) then return 0 end
local record = ARGV[3] .. 'done_ms=' .. tostring(now_ms()) .. '\n'
redis.call('SET', KEYS[3], record, 'PX', tonumber(ARGV[4]))
redis.call('HDEL', KEYS[1], 'lease', 'holder')
return 1
"#;

/// What a run of `--once`'s key would find: `{'done', record}`, `{'held', holder}`, or `{}`.
const PEEK_ONCE_BODY: &str = r#"
local done = redis.call('GET', KEYS[3])
if done then return {'done', done} end
if lease_live(KEYS[1], 'lease', now_ms()) then
  return {'held', redis.call('HGET', KEYS[1], 'holder') or ''}
end
return {}
"#;

/// What asking for the lease came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Taken {
    /// The lease is this run's, with this fencing token.
    Granted(u64),
    /// Another run holds it.
    Held(LockHolder),
    /// `--once`: the key was marked done, as this record says.
    Done(LockRecord),
}

/// The lock NAME on one Redis server (or cluster), for one owner.
pub struct LockLease {
    server: Server,
    /// `lock`, or `once` for the claim on a `--once` key.
    kind: &'static str,
    name: String,
    owner: String,
    node: Option<Node>,
    /// The digest of the command line the holder last heard of holds the key with.
    last_command: String,
}

impl LockLease {
    /// The lock of `address`, asked for as `owner`, with the user and password of `given`
    /// where the address has none. Nothing is sent yet.
    pub fn open(address: &RedisAddress, given: Credentials, owner: String) -> LockLease {
        LockLease {
            server: Server::new(address, given),
            kind: "lock",
            name: address.name().to_string(),
            owner,
            node: None,
            last_command: String::new(),
        }
    }

    /// The claim on the `--once` key of `address`: the hash `retry:once:{KEY}` and its
    /// fencing tokens as a lock's, and the key's done record in `retry:once:{KEY}:done`.
    pub fn open_once(address: &RedisAddress, given: Credentials, owner: String) -> LockLease {
        LockLease {
            kind: "once",
            ..LockLease::open(address, given, owner)
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease's hash, its fencing tokens, and, for `--once`, the key's done record.
    fn keys(&self) -> Vec<String> {
        let hash = format!("retry:{}:{{{}}}", self.kind, self.name);
        let mut keys = vec![format!("{hash}:fence")];
        if self.kind == "once" {
            keys.push(format!("{hash}:done"));
        }
        keys.insert(0, hash);
        keys
    }

    /// The holder's own lines of `me`, without the token (the lease's) and the time (the
    /// server's); with the digest of the command line under `--once`.
    fn lines_of(me: &LockHolder, command: &str) -> String {
        let record = LockRecord {
            holder: me.clone(),
            command: command.to_string(),
            ..LockRecord::default()
        };
        record
            .encode()
            .lines()
            .filter(|l| !l.starts_with("token=") && !l.starts_with("since="))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// Asks for the lease, for `length`, as `me`, within `within`.
    pub fn take(
        &mut self,
        me: &LockHolder,
        length: Duration,
        within: Duration,
    ) -> Result<Taken, FleetError> {
        self.take_as(me, "", length, within)
    }

    /// Asks for the claim on the `--once` key, for `length`, as `me`, for the command of
    /// digest `command`, within `within`; or learns that the key is done. The holder's record
    /// says which command holds it.
    pub fn take_once(
        &mut self,
        me: &LockHolder,
        command: &str,
        length: Duration,
        within: Duration,
    ) -> Result<(Taken, String), FleetError> {
        let taken = self.take_as(me, command, length, within)?;
        let theirs = match &taken {
            Taken::Held(_) | Taken::Granted(_) => self.last_command.clone(),
            Taken::Done(record) => record.command.clone(),
        };
        Ok((taken, theirs))
    }

    fn take_as(
        &mut self,
        me: &LockHolder,
        command: &str,
        length: Duration,
        within: Duration,
    ) -> Result<Taken, FleetError> {
        let text = LockLease::lines_of(me, command);
        let ms = length.as_millis().max(1).to_string();
        let owner = self.owner.clone();
        let args: [&[u8]; 3] = [owner.as_bytes(), ms.as_bytes(), text.as_bytes()];
        let body = match self.kind {
            "once" => format!("{TAKE_ONCE_BODY}{TAKE_BODY}"),
            _ => TAKE_BODY.to_string(),
        };
        let reply = self.script(&body, &args, within)?;
        let words = texts(&reply).ok_or_else(|| self.odd(&reply))?;
        match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["ok", token] => {
                self.last_command = command.to_string();
                token
                    .parse()
                    .map(Taken::Granted)
                    .map_err(|_| self.odd(&reply))
            }
            ["held", holder] => {
                self.last_command = LockRecord::decode(&self.name, holder).command;
                Ok(Taken::Held(self.holder(holder)))
            }
            ["done", record] if self.kind == "once" => {
                Ok(Taken::Done(LockRecord::decode(&self.name, record)))
            }
            _ => Err(self.odd(&reply)),
        }
    }

    /// Marks the `--once` key that this owner claims with `token` done by `me` for the
    /// command of digest `command`, kept `kept`, within `within`: whether the claim was still
    /// this owner's (when it was not, nothing is marked).
    pub fn mark_done(
        &mut self,
        token: u64,
        me: &LockHolder,
        command: &str,
        kept: Duration,
        within: Duration,
    ) -> Result<bool, FleetError> {
        let text = LockLease::lines_of(me, command);
        let (token, ms) = (token.to_string(), kept.as_millis().max(1).to_string());
        let owner = self.owner.clone();
        let args: [&[u8]; 4] = [
            owner.as_bytes(),
            token.as_bytes(),
            text.as_bytes(),
            ms.as_bytes(),
        ];
        match self.script(DONE_BODY, &args, within)? {
            Reply::Int(n) => Ok(n == 1),
            other => Err(self.odd(&other)),
        }
    }

    /// Renews the lease of `token` for `length`, within `within`: whether it is still this
    /// owner's.
    pub fn renew(
        &mut self,
        token: u64,
        length: Duration,
        within: Duration,
    ) -> Result<bool, FleetError> {
        let (token, ms) = (token.to_string(), length.as_millis().max(1).to_string());
        let owner = self.owner.clone();
        let args: [&[u8]; 3] = [owner.as_bytes(), token.as_bytes(), ms.as_bytes()];
        match self.script(RENEW_BODY, &args, within)? {
            Reply::Int(n) => Ok(n == 1),
            other => Err(self.odd(&other)),
        }
    }

    /// Lets go of the lease of `token`, within `within`: whether it was still this owner's.
    pub fn release(&mut self, token: u64, within: Duration) -> Result<bool, FleetError> {
        let token = token.to_string();
        let owner = self.owner.clone();
        let args: [&[u8]; 2] = [owner.as_bytes(), token.as_bytes()];
        match self.script(RELEASE_BODY, &args, within)? {
            Reply::Int(n) => Ok(n == 1),
            other => Err(self.odd(&other)),
        }
    }

    /// Who holds the lease now, if anyone, for the dry run.
    pub fn peek(&mut self, within: Duration) -> Result<Option<LockHolder>, FleetError> {
        let reply = self.script(PEEK_BODY, &[], within)?;
        let words = texts(&reply).ok_or_else(|| self.odd(&reply))?;
        Ok(words.first().map(|holder| self.holder(holder)))
    }

    /// What a run of the `--once` key would find now, for the dry run: `None` when it is free,
    /// else what it found and the digest of the command that the key is bound to.
    pub fn peek_once(&mut self, within: Duration) -> Result<Option<(Taken, String)>, FleetError> {
        let reply = self.script(PEEK_ONCE_BODY, &[], within)?;
        let words = texts(&reply).ok_or_else(|| self.odd(&reply))?;
        match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            [] => Ok(None),
            ["done", record] => {
                let record = LockRecord::decode(&self.name, record);
                let command = record.command.clone();
                Ok(Some((Taken::Done(record), command)))
            }
            ["held", holder] => {
                let command = LockRecord::decode(&self.name, holder).command;
                Ok(Some((Taken::Held(self.holder(holder)), command)))
            }
            _ => Err(self.odd(&reply)),
        }
    }

    /// The holder that the field `holder` names.
    fn holder(&self, text: &str) -> LockHolder {
        let mut holder = LockRecord::decode(&self.name, text).holder;
        let since = text
            .lines()
            .find_map(|l| l.strip_prefix("since_ms="))
            .and_then(|ms| ms.parse::<u64>().ok());
        if let Some(ms) = since {
            let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
            holder.since = humantime::format_rfc3339_millis(at).to_string();
        }
        holder
    }

    /// Runs `body` after the lease's functions on the lock's keys with `args`, within `within`:
    /// once more on a new connection when the one kept from an earlier exchange turns out
    /// closed (every script of the lock may be sent twice to the same effect).
    fn script(
        &mut self,
        body: &str,
        args: &[&[u8]],
        within: Duration,
    ) -> Result<Reply, FleetError> {
        let script = format!("{LEASE_LUA}{body}");
        let keys = self.keys();
        let count = keys.len().to_string();
        let mut words: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), count.as_bytes()];
        words.extend(keys.iter().map(|k| k.as_bytes()));
        words.extend_from_slice(args);
        let deadline = Deadline::within(within.min(EXCHANGE_DEADLINE));
        let reused = self.node.is_some();
        let mut answer = self.exchange(&words, &deadline)?;
        if reused && matches!(answer, Err(ExchangeError::Io(_))) {
            answer = self.exchange(&words, &deadline)?;
        }
        let mut replies = answer.map_err(|source| {
            self.failed(RedisStoreError::Command {
                server: self.server.addr.to_string(),
                source,
            })
        })?;
        replies
            .pop()
            .ok_or_else(|| FleetError::new("Redis sent no reply"))
    }

    fn exchange(
        &mut self,
        words: &[&[u8]],
        deadline: &Deadline,
    ) -> Result<Result<Vec<Reply>, ExchangeError>, FleetError> {
        // A lock's reply is a holder's few lines: anything longer is no answer of the script.
        let fresh = |node: &mut Node| node.allow_replies_of(RECORD_MAX * 2);
        requests_following(
            &self.server,
            &mut self.node,
            &[words.to_vec()],
            deadline,
            fresh,
        )
        .map_err(|e| self.failed(e))
    }

    /// `e` as one line without the password; a refusal of the credentials as such.
    fn failed(&self, e: RedisStoreError) -> FleetError {
        if let Some(code) = e.refusal() {
            return FleetError::refused(&self.server.addr.to_string(), code);
        }
        match self.server.scrub(e) {
            RedisStoreError::Command { server, source } => FleetError::new(format!(
                "Redis at {server} failed: {}",
                exchange_words(&source)
            )),
            other => FleetError::new(other.to_string()),
        }
    }

    fn odd(&self, reply: &Reply) -> FleetError {
        let text = self.server.withheld(reply.to_string());
        FleetError::new(format!(
            "Redis at {} answered '{}', which is no answer to retry's request",
            self.server.addr,
            crate::store::redis::resp::one_line(&text)
        ))
    }
}
