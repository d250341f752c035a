//! A lease on Redis (docs/dead-letters.md#claims): the right to one piece of work for a while,
//! granted to one owner at a time, as redis.io's lock pattern and etcd's lock give it.
//!
//! A lease is a field of a hash whose value is `OWNER TOKEN EXPIRES_MS` (` F` after it once a
//! failed try of the work is counted). It is granted only when no other owner's lease on that
//! field is live, by the server's clock (no machine's clock decides), with a fencing token one
//! higher than any granted on that field before, kept in a second hash. Its owner renews it
//! while it works, and every change it makes later is checked by owner and token: a lease that
//! lapsed and was granted to another has another token, and its first owner's renewal and
//! settlement are refused. A lease that lapsed and that no one took since is still the latest
//! grant: its owner may renew it, since no one else can have done the work meanwhile.
//!
//! The Lua functions below are put before every script that reads or changes a lease, so that
//! one text says what a lease is, whatever the work (a replay's claim on a run).

use std::time::Duration;

/// The functions every script of a lease begins with.
pub const LEASE_LUA: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The lease in field f of hash h: 'OWNER TOKEN EXPIRES_MS', ' F' after it once counted. An
-- older form, 'OWNER EXPIRES_MS', has token 0.
local function lease_of(h, f)
  local v = redis.call('HGET', h, f)
  if not v then return nil end
  local owner, token, expires, counted = string.match(v, '^(%S+) (%d+) (%d+)( ?F?)$')
  if owner then
    return {owner = owner, token = tonumber(token), expires = tonumber(expires), counted = counted == ' F'}
  end
  owner, expires = string.match(v, '^(%S+) (%d+)$')
  if owner then return {owner = owner, token = 0, expires = tonumber(expires), counted = false} end
  return nil
end
local function lease_put(h, f, l)
  local v = l.owner .. ' ' .. tostring(l.token) .. ' ' .. tostring(l.expires)
  if l.counted then v = v .. ' F' end
  redis.call('HSET', h, f, v)
end
local function lease_live(h, f, now)
  local l = lease_of(h, f)
  return l ~= nil and l.expires > now
end
-- Grants the lease of field f to owner for ms: its token, or nil and the live holder; and the
-- owner of a lease that lapsed without being let go, if one did.
local function lease_grant(h, fence, f, owner, ms, now)
  local l = lease_of(h, f)
  if l and l.owner == owner then
    -- The same owner asking again (its first answer was lost): the same lease, renewed.
    l.expires = now + ms
    lease_put(h, f, l)
    return l.token, nil, nil
  end
  if l and l.expires > now then return nil, l.owner, nil end
  local token = redis.call('HINCRBY', fence, f, 1)
  lease_put(h, f, {owner = owner, token = token, expires = now + ms, counted = false})
  if l then return token, nil, l.owner end
  return token, nil, nil
end
-- The lease of field f when it is owner's with token, lapsed or not; nil when it is not.
local function lease_mine(h, f, owner, token)
  local l = lease_of(h, f)
  if l and l.owner == owner and l.token == token then return l end
  return nil
end
local function lease_renew(h, f, owner, token, ms, now)
  local l = lease_mine(h, f, owner, token)
  if not l then return false end
  l.expires = now + ms
  lease_put(h, f, l)
  return true
end
"#;

/// A lease's length when none is given: long enough for a renewal every third of it to
/// survive a slow exchange or two, short enough that the work of an owner that died goes to
/// another within half a minute.
pub const DEFAULT_LENGTH: Duration = Duration::from_secs(30);

/// A lease as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub owner: String,
    pub token: u64,
    /// When it lapses, in milliseconds since the epoch, by the server's clock.
    pub expires_ms: u64,
}

impl Lease {
    /// The lease a hash field holds, in either form.
    pub fn parse(value: &str) -> Option<Lease> {
        let mut words = value.split(' ');
        let owner = words.next().filter(|o| !o.is_empty())?.to_string();
        let second: u64 = words.next()?.parse().ok()?;
        let (token, expires_ms) = match words.next() {
            Some(third) => (second, third.parse().ok()?),
            None => (0, second),
        };
        Some(Lease {
            owner,
            token,
            expires_ms,
        })
    }

    /// Whether it is live at `now_ms` by the server's clock.
    pub fn live_at(&self, now_ms: u64) -> bool {
        self.expires_ms > now_ms
    }
}

/// When a lease of `length` is renewed: every third of it, so that two renewals in a row may
/// fail (a slow exchange, a dropped connection) before it lapses.
pub fn renew_every(length: Duration) -> Duration {
    length / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_read_in_its_form_and_in_the_older_one() {
        assert_eq!(
            Lease::parse("h:1:ab 7 1700000000000 F"),
            Some(Lease {
                owner: "h:1:ab".into(),
                token: 7,
                expires_ms: 1_700_000_000_000
            })
        );
        assert_eq!(
            Lease::parse("h:1:ab 1700000000000").map(|l| (l.token, l.expires_ms)),
            Some((0, 1_700_000_000_000))
        );
        assert_eq!(Lease::parse(""), None);
        assert_eq!(Lease::parse("h x"), None);
        let l = Lease::parse("o 1 100").unwrap();
        assert!(l.live_at(99) && !l.live_at(100));
    }
}
