//! The Lua scripts of a fleet's dead letters on Redis (`store/fleet.rs`), each run by Redis
//! alone, so that replays on any number of machines never see a record half settled.
//!
//! - `ADD` (KEYS stream, ids; ARGV run id, host, record): adds a run id once;
//! - `CLAIM` (KEYS ids, state, claims, attempts; ARGV run id, consumer, length in ms, the
//!   attempts the replay listed): `ok`, or why not (`gone`, `settled`, `replayed`, `claimed`);
//! - `SETTLE` (KEYS claims, state, attempts, ids; ARGV run id, consumer, `resolved`, `failed`
//!   or `release`): what became of a replayed run, and the end of its claim;
//! - `FORGET` (KEYS ids, state; ARGV run ids): how many were forgotten.

pub const ADD: &str = r#"
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
local e = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'host', ARGV[2], 'record', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], e)
return 1
"#;

pub const CLAIM: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 'gone' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'settled' end
-- Replayed by another replay since this one listed it: that replay's try was this round's.
if tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0') ~= tonumber(ARGV[4]) then return 'replayed' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local c = redis.call('HGET', KEYS[3], ARGV[1])
if c then
  local expires = tonumber(string.match(c, '(%d+)$'))
  if expires and expires > now then return 'claimed' end
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ' ' .. tostring(now + tonumber(ARGV[3])))
return 'ok'
"#;

pub const SETTLE: &str = r#"
local c = redis.call('HGET', KEYS[1], ARGV[1])
local mine = c and string.sub(c, 1, #ARGV[2] + 1) == ARGV[2] .. ' '
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then
  if mine then redis.call('HDEL', KEYS[1], ARGV[1]) end
  return 0
end
if ARGV[3] == 'resolved' then
  redis.call('HSETNX', KEYS[2], ARGV[1], 'resolved')
  if mine then redis.call('HDEL', KEYS[1], ARGV[1]) end
elseif ARGV[3] == 'failed' then
  -- The claim stays until the replay ends: a replay running meanwhile does not run it again.
  redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
elseif mine then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
"#;

pub const FORGET: &str = r#"
local n = 0
for i = 1, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 and redis.call('HSETNX', KEYS[2], ARGV[i], 'forgotten') == 1 then
    n = n + 1
  end
end
return n
"#;
