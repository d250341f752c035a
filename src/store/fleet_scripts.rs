//! The Lua scripts of a fleet's dead letters on Redis (`store/fleet.rs`), each run by Redis
//! alone, so that replays on any number of machines never see a record half settled.
//!
//! A replay's claim on a run is a lease (`store/lease.rs` says what one is): a field of the
//! claims hash holding `OWNER TOKEN EXPIRES_MS`, granted with a fencing token one higher than
//! any granted for that run before, renewed while the replay lives, and checked by owner and
//! token before what became of the run is settled.
//!
//! - `ADD` (KEYS stream, ids, pruned; ARGV run id, host, record): adds a run id once, and
//!   never one a prune dropped;
//! - `CLAIM` (KEYS ids, state, claims, attempts, fence; ARGV run id, owner, length in ms, the
//!   attempts the replay listed): `ok` with the token and the owner of a lapsed lease, or why
//!   not (`gone`, `settled`, `replayed`, `claimed` with its holder);
//! - `RENEW` (KEYS claims; ARGV owner, length in ms, then run id and token pairs): 1 for each
//!   lease still this owner's, now renewed, 0 for each lost;
//! - `SETTLE` (KEYS claims, state, attempts, ids; ARGV run id, owner, token, `resolved`
//!   (the lease then replaced by the mark `OWNER TOKEN 0 R`, a lease lapsed long ago to every
//!   reader, by which the same request sent again is answered `ok`),
//!   `failed` or `release`): `ok`, `gone`, `lost` when the lease is no longer this owner's, or
//!   `settled` when the run was forgotten while the lease had lapsed;
//! - `FORGET` (KEYS ids, state, claims; ARGV run ids): how many were forgotten, and the ids
//!   left alone because a replay holds them;
//! - `PRUNE` (KEYS stream, ids, state, attempts, claims, fence, pruned; ARGV entry id and run
//!   id pairs): drops each run no live lease holds, leaving a tombstone (the server's time in
//!   the pruned hash) so that a move of kept runs cut short never brings it back; how many were
//!   dropped, and the ids still claimed.

use crate::store::lease::LEASE_LUA;

const ADD_BODY: &str = r#"
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
local e = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'host', ARGV[2], 'record', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], e)
return 1
"#;

const CLAIM_BODY: &str = r#"
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], id) == 0 then return {'gone'} end
if redis.call('HEXISTS', KEYS[2], id) == 1 then return {'settled'} end
-- Replayed by another replay since this one listed it: that replay's try was this round's.
if tonumber(redis.call('HGET', KEYS[4], id) or '0') ~= tonumber(ARGV[4]) then return {'replayed'} end
local token, holder, lapsed = lease_grant(KEYS[3], KEYS[5], id, ARGV[2], tonumber(ARGV[3]), now_ms())
if not token then return {'claimed', holder} end
return {'ok', tostring(token), lapsed or ''}
"#;

const RENEW_BODY: &str = r#"
local now = now_ms()
local out = {}
for i = 3, #ARGV, 2 do
  if lease_renew(KEYS[1], ARGV[i], ARGV[1], tonumber(ARGV[i + 1]), tonumber(ARGV[2]), now) then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
"#;

const SETTLE_BODY: &str = r#"
local id = ARGV[1]
-- A run resolved under this lease keeps its mark in place of the lease, so that the same
-- request sent again (its answer lost with the connection) is answered as the first was.
local mark = ARGV[2] .. ' ' .. ARGV[3] .. ' 0 R'
if ARGV[4] == 'resolved' and redis.call('HGET', KEYS[1], id) == mark then return 'ok' end
local l = lease_mine(KEYS[1], id, ARGV[2], tonumber(ARGV[3]))
if not l then return 'lost' end
if redis.call('HEXISTS', KEYS[4], id) == 0 then
  redis.call('HDEL', KEYS[1], id)
  return 'gone'
end
-- Forgotten while its lease had lapsed (its replay stopped or cut off): the forget stands.
if ARGV[4] ~= 'release' and redis.call('HEXISTS', KEYS[2], id) == 1 then
  redis.call('HDEL', KEYS[1], id)
  return 'settled'
end
if ARGV[4] == 'resolved' then
  redis.call('HSETNX', KEYS[2], id, 'resolved')
  redis.call('HSET', KEYS[1], id, mark)
elseif ARGV[4] == 'failed' then
  -- Counted once, however often the request is sent again; the lease stays until the replay
  -- ends, so that a replay running meanwhile does not run it again.
  if not l.counted then
    redis.call('HINCRBY', KEYS[3], id, 1)
    l.counted = true
    lease_put(KEYS[1], id, l)
  end
else
  redis.call('HDEL', KEYS[1], id)
end
return 'ok'
"#;

const FORGET_BODY: &str = r#"
local now = now_ms()
local n = 0
local held = {}
for i = 1, #ARGV do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], id) == 1 then
    if lease_live(KEYS[3], id, now) then
      held[#held + 1] = id
    elseif redis.call('HSETNX', KEYS[2], id, 'forgotten') == 1 then
      n = n + 1
    end
  end
end
return {n, held}
"#;

const PRUNE_BODY: &str = r#"
local now = now_ms()
local dropped = 0
local held = {}
for i = 1, #ARGV, 2 do
  local entry, id = ARGV[i], ARGV[i + 1]
  if lease_live(KEYS[5], id, now) then
    held[#held + 1] = id
  else
    redis.call('XDEL', KEYS[1], entry)
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[4], id)
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
    redis.call('HSET', KEYS[7], id, tostring(now))
    dropped = dropped + 1
  end
end
return {dropped, held}
"#;

/// The scripts, each after the lease's functions.
pub struct Scripts {
    pub add: String,
    pub claim: String,
    pub renew: String,
    pub settle: String,
    pub forget: String,
    pub prune: String,
}

impl Scripts {
    pub fn new() -> Scripts {
        let with_lease = |body: &str| format!("{LEASE_LUA}{body}");
        Scripts {
            add: ADD_BODY.to_string(),
            claim: with_lease(CLAIM_BODY),
            renew: with_lease(RENEW_BODY),
            settle: with_lease(SETTLE_BODY),
            forget: with_lease(FORGET_BODY),
            prune: with_lease(PRUNE_BODY),
        }
    }
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts::new()
    }
}
