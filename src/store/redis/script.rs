//! The one Lua script that does a quota's arithmetic in Redis, the SHA-1 that EVALSHA names it
//! by, and its calls: EVALSHA, then the script sent whole with EVAL when the node does not
//! have it (after a restart or `SCRIPT FLUSH`), and its answer read as an [`Update`].

use crate::policy::quota::QuotaParams;
use crate::store::quota::Update;
use crate::store::resp::{Deadline, ExchangeError, Node, Reply};

/// The bucket's arithmetic, as [`Bucket`](crate::policy::quota::Bucket) does it, in one script
/// that Redis runs alone.
///
/// KEYS[1] is the bucket; ARGV are the operation (`deposit`, `take` or `peek`), ratio, floor
/// (tokens per second), cap and the expiry in milliseconds. The answer is `{granted, tokens}`:
/// granted is 1 or 0, and tokens (after the operation) are a string, since Redis would cut a Lua
/// number to an integer. `peek` writes nothing.
pub const SCRIPT: &str = r#"
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

/// The SHA-1 of [`SCRIPT`], in hex, as `SCRIPT LOAD` answers it and EVALSHA names the script.
/// A unit test checks it against `sha1sum`, and a test of the Redis store against a real
/// server's `SCRIPT LOAD`: change it with the script.
pub const SCRIPT_SHA1: &str = "0052c739969b3ac2d837ef14e8a50559dd709b57";

/// What the script is asked to do.
pub enum Op {
    Deposit,
    Take,
    Peek,
}

impl Op {
    /// The operation as ARGV[1] names it.
    fn word(&self) -> &'static str {
        match self {
            Op::Deposit => "deposit",
            Op::Take => "take",
            Op::Peek => "peek",
        }
    }
}

/// What every call of the script for one quota sends besides the operation: the key that
/// holds the bucket, the quota's numbers, and the key's expiry.
pub struct Call {
    pub key: String,
    pub params: QuotaParams,
    pub expiry_ms: u64,
}

impl Call {
    /// EVALSHA, then EVAL when the node does not have the script (after ASKING again when
    /// `asking`, which holds for one command only).
    pub fn eval(
        &self,
        node: &mut Node,
        op: &Op,
        deadline: &Deadline,
        asking: bool,
    ) -> Result<Reply, ExchangeError> {
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
        let evalsha: Vec<&[u8]> = [&b"EVALSHA"[..], SCRIPT_SHA1.as_bytes()]
            .into_iter()
            .chain(rest)
            .collect();
        match node.request(&evalsha, deadline) {
            Err(ExchangeError::Server(e)) if e.starts_with("NOSCRIPT") => {
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

/// The script's answer `{granted, tokens}` as an update; anything else is an error that holds
/// the reply as text.
pub fn update(reply: Reply) -> Result<Update, String> {
    let (granted, tokens) = match reply {
        Reply::Array(Some(items)) => match &items[..] {
            [Reply::Int(granted), Reply::Bulk(Some(tokens))] => {
                (*granted, String::from_utf8_lossy(tokens).into_owned())
            }
            _ => return Err(Reply::Array(Some(items)).to_string()),
        },
        other => return Err(other.to_string()),
    };
    match tokens.parse::<f64>() {
        Ok(tokens) if tokens.is_finite() => Ok(Update {
            granted: granted == 1,
            tokens,
            note: None,
        }),
        _ => Err(tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// The SHA-1 of `bytes` in hex, as `sha1sum` (or, without it, `shasum`) computes it.
    fn sha1_by_tool(bytes: &[u8]) -> String {
        for (tool, args) in [("sha1sum", &[][..]), ("shasum", &["-a", "1"][..])] {
            let Ok(mut child) = Command::new(tool)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
            else {
                continue;
            };
            // Written whole and closed, so that the tool sees the end of its input.
            let mut stdin = child.stdin.take().expect("a pipe to the tool");
            stdin
                .write_all(bytes)
                .expect("the script written to the tool");
            drop(stdin);
            let out = child.wait_with_output().expect("the tool's output");
            assert!(out.status.success(), "{tool}: {out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            return text.split_whitespace().next().unwrap_or("").to_string();
        }
        panic!("neither sha1sum nor shasum could be run to check SCRIPT_SHA1");
    }

    #[test]
    fn the_digest_is_the_sha1_of_the_script_as_it_is_now() {
        let digest = sha1_by_tool(SCRIPT.as_bytes());
        assert_eq!(
            SCRIPT_SHA1, digest,
            "the script changed without its digest: SCRIPT_SHA1 must be {digest}"
        );
    }

    #[test]
    fn an_answer_that_is_not_granted_and_tokens_is_shown_as_the_reply() {
        let answer = |granted, tokens: &[u8]| {
            Reply::Array(Some(vec![
                Reply::Int(granted),
                Reply::Bulk(Some(tokens.to_vec())),
            ]))
        };
        let ok = update(answer(1, b"9.5")).expect("an update");
        assert_eq!((ok.granted, ok.tokens), (true, 9.5));
        assert!(!update(answer(0, b"0.25")).expect("an update").granted);
        assert_eq!(update(answer(1, b"nan")).err().as_deref(), Some("nan"));
        assert!(update(Reply::Int(1)).is_err());
    }
}
