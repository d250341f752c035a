//! The one Lua script that does a quota's arithmetic in Redis, the SHA-1 that EVALSHA names it
//! by, and its calls: EVALSHA, then the script sent whole with EVAL when the node does not
//! have it (after a restart or `SCRIPT FLUSH`), and its answer read as an [`Update`].

use std::time::Duration;

use crate::policy::quota::QuotaParams;
use crate::policy::throttle::{Admission, Counted, Figures};
use crate::store::quota::{Exchange, Update};
use crate::store::redis::resp::{Deadline, ExchangeError, Node, Reply};

/// The bucket's arithmetic, as [`Bucket`](crate::policy::quota::Bucket) does it, and the
/// throttle's, as [`Throttled::step`](crate::store::quota::Throttled::step) does it, in one
/// script that Redis runs alone.
///
/// KEYS[1] is the bucket; ARGV are the operation (`deposit`, `take`, `peek` or `count`), ratio,
/// floor (tokens per second), cap and the expiry in milliseconds; then, with `--throttle`, one
/// more holding the window in milliseconds, K, max, the outcome to count (`accepted`, `refused`
/// or `-`) and the draw, separated by spaces (empty without it: Redis refuses a command of more
/// than 10 words from a client not authenticated yet with a protocol error, rather than the
/// NOAUTH that tells a misconfiguration). The answer is `{granted, tokens, held, requests,
/// accepts, p, window, held requests}`: granted is 1 or 0, held 1, 0 or -1 (no decision), and
/// the numbers are strings, since Redis would cut a Lua number to an integer. `peek` writes
/// nothing. The throttle's window is kept in the same hash (`ts`, `tr`, `ta`, `tpr`, `tpa`,
/// `tw`, and the held requests `th`, `tph`, absent from a hash written before they were
/// counted: none held), so the script touches one key only.
pub const SCRIPT: &str = r#"
-- Redis before 5 needs this to write after reading the clock; later ones do it anyway.
if redis.replicate_commands then redis.replicate_commands() end
local op = ARGV[1]
local ratio, floor, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local expiry = tonumber(ARGV[5])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'ts', 'tr', 'ta', 'tpr', 'tpa', 'tw',
  'th', 'tph')
local tokens, at = tonumber(stored[1]), tonumber(stored[2])
local function finite(x) return x ~= nil and x == x and x > -math.huge and x < math.huge end
if not (finite(tokens) and finite(at)) then
  -- A new quota (or a hash that retry did not write): a full bucket.
  tokens, at = cap, now
end
if op ~= 'deposit' and op ~= 'take' and op ~= 'peek' and op ~= 'count' then
  return redis.error_reply('unknown quota operation ' .. tostring(op))
end
-- The throttle's window: two slots of its length, the current one from ts.
local throttle = {}
for word in string.gmatch(ARGV[6] or '', '%S+') do throttle[#throttle + 1] = word end
local window = tonumber(throttle[1])
-- The window belongs to the record: a run that names another counts into it as it is.
local tw = tonumber(stored[8])
if window and finite(tw) and tw >= 1000 and tw <= 86400000 then window = tw end
local held, requests, accepts, p, helds = -1, 0, 0, 0, 0
local ts, tr, ta, tpr, tpa, th, tph
if window then
  window = math.max(window, 1)
  local k, pmax, counted, draw = tonumber(throttle[2]), tonumber(throttle[3]), throttle[4],
    tonumber(throttle[5])
  ts, tr, ta, tpr, tpa = tonumber(stored[3]), tonumber(stored[4]), tonumber(stored[5]),
    tonumber(stored[6]), tonumber(stored[7])
  if not (finite(ts) and finite(tr) and finite(ta) and finite(tpr) and finite(tpa))
    or ta > tr or tpa > tpr or tr < 0 or tpr < 0 or ta < 0 or tpa < 0 then
    ts, tr, ta, tpr, tpa = 0, 0, 0, 0, 0
  end
  th, tph = tonumber(stored[9]), tonumber(stored[10])
  if not (finite(th) and th >= 0) then th = 0 end
  if not (finite(tph) and tph >= 0) then tph = 0 end
  th, tph = math.min(th, tr), math.min(tph, tpr)
  local function advance()
    local elapsed = now - ts
    if elapsed < 0 then elapsed = 0 end
    if ts == 0 or ts > now + window or elapsed >= 2 * window then
      ts, tr, ta, tpr, tpa, th, tph = now, 0, 0, 0, 0, 0, 0
    elseif elapsed >= window then
      ts, tpr, tpa, tph, tr, ta, th = ts + window, tr, ta, th, 0, 0, 0
    end
  end
  if op ~= 'peek' and (counted == 'accepted' or counted == 'refused') then
    advance()
    tr = tr + 1
    if counted == 'accepted' then ta = ta + 1 end
  end
  if op ~= 'count' then
    advance()
    local into = now - ts
    if into < 0 then into = 0 end
    if into > window then into = window end
    local left = (window - into) / window
    requests, accepts, helds = tr + tpr * left, ta + tpa * left, th + tph * left
    p = (requests - k * accepts) / (requests + 1)
    if p ~= p or p < 0 then p = 0 end
    if p > pmax then p = pmax end
    held = 0
    if op ~= 'peek' and draw < p then
      held = 1
      tr, th = tr + 1, th + 1
    end
  end
  expiry = math.max(expiry, 2 * window)
end
-- Refill what the floor accrued since, up to the cap; a clock that went back accrues nothing.
local elapsed = now - at
if elapsed < 0 then elapsed = 0 end
tokens = math.min(math.max(tokens, 0) + floor * (elapsed / 1000), cap)
local granted = 1
if held == 1 then
  granted = 0
elseif op == 'deposit' then
  tokens = math.min(tokens + ratio, cap)
elseif op == 'take' or op == 'peek' then
  -- One token, less a slack for the rounding of sums such as 5 x 0.2.
  if tokens >= 1 - 1e-9 then
    if op == 'take' then tokens = math.max(tokens - 1, 0) end
  else
    granted = 0
  end
end
if op ~= 'peek' then
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
    'at', string.format('%.0f', now))
  if window then
    redis.call('HSET', KEYS[1], 'ts', string.format('%.0f', ts), 'tr', string.format('%.0f', tr),
      'ta', string.format('%.0f', ta), 'tpr', string.format('%.0f', tpr),
      'tpa', string.format('%.0f', tpa), 'tw', string.format('%.0f', window),
      'th', string.format('%.0f', th), 'tph', string.format('%.0f', tph))
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < expiry then redis.call('PEXPIRE', KEYS[1], string.format('%.0f', expiry)) end
end
return {granted, string.format('%.17g', tokens), held, string.format('%.17g', requests),
  string.format('%.17g', accepts), string.format('%.17g', p), string.format('%.0f', window or 0),
  string.format('%.17g', helds)}
"#;

/// The SHA-1 of [`SCRIPT`], in hex, as `SCRIPT LOAD` answers it and EVALSHA names the script.
/// A unit test checks it against `sha1sum`, and a test of the Redis store against a real
/// server's `SCRIPT LOAD`: change it with the script.
pub const SCRIPT_SHA1: &str = "f1e22b8faed4e6f97cb2ebabce830e6dca287b66";

/// The script's ARGV for `exchange` on a quota of `params` whose key expires after
/// `expiry_ms`: the operation, ratio, floor, cap, expiry, and the throttle's word (empty
/// without one), as the script reads them.
pub fn arguments(params: &QuotaParams, expiry_ms: u64, exchange: &Exchange) -> Vec<String> {
    let throttle = match &exchange.throttle {
        Some(t) => format!(
            "{} {} {} {} {}",
            t.spec.window_ms(),
            t.spec.k,
            t.spec.max,
            match t.counted {
                Some(Counted::Accepted) => "accepted",
                Some(Counted::Refused) => "refused",
                None => "-",
            },
            t.draw
        ),
        None => String::new(),
    };
    vec![
        exchange.op.word().into(),
        params.ratio.to_string(),
        params.floor.to_string(),
        params.cap.to_string(),
        expiry_ms.to_string(),
        throttle,
    ]
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
        exchange: &Exchange,
        deadline: &Deadline,
        asking: bool,
    ) -> Result<Reply, ExchangeError> {
        let args = arguments(&self.params, self.expiry_ms, exchange);
        let rest: Vec<&[u8]> = [&b"1"[..], self.key.as_bytes()]
            .into_iter()
            .chain(args.iter().map(|a| a.as_bytes()))
            .collect();
        let evalsha: Vec<&[u8]> = [&b"EVALSHA"[..], SCRIPT_SHA1.as_bytes()]
            .into_iter()
            .chain(rest.iter().copied())
            .collect();
        match node.request(&evalsha, deadline) {
            Err(ExchangeError::Server(e)) if e.starts_with("NOSCRIPT") => {
                if asking {
                    node.request(&[b"ASKING"], deadline)?;
                }
                let eval: Vec<&[u8]> = [&b"EVAL"[..], SCRIPT.as_bytes()]
                    .into_iter()
                    .chain(rest.iter().copied())
                    .collect();
                node.request(&eval, deadline)
            }
            answer => answer,
        }
    }
}

/// The script's answer `{granted, tokens, held, requests, accepts, p, window, held requests}` as
/// an update; anything
/// else is an error that holds the reply as text.
pub fn update(reply: Reply) -> Result<Update, String> {
    let Reply::Array(Some(items)) = reply else {
        return Err(reply.to_string());
    };
    let [
        Reply::Int(granted),
        Reply::Bulk(Some(tokens)),
        Reply::Int(held),
        Reply::Bulk(Some(requests)),
        Reply::Bulk(Some(accepts)),
        Reply::Bulk(Some(p)),
        Reply::Bulk(Some(window)),
        Reply::Bulk(Some(helds)),
    ] = &items[..]
    else {
        return Err(Reply::Array(Some(items)).to_string());
    };
    let number = |bytes: &[u8], whole: bool| -> Result<f64, String> {
        let text = String::from_utf8_lossy(bytes);
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() && (!whole || x >= 0.0) => Ok(x),
            _ => Err(text.into_owned()),
        }
    };
    let tokens = number(tokens, false)?;
    let admission = match held {
        -1 => None,
        0 | 1 => Some(Admission {
            figures: Figures {
                requests: number(requests, true)?,
                accepts: number(accepts, true)?,
                held: number(helds, true)?,
            },
            p: number(p, true)?.min(1.0),
            held: *held == 1,
            window: Duration::from_millis(number(window, true)? as u64),
        }),
        other => return Err(format!("held {other}")),
    };
    Ok(Update {
        granted: *granted == 1,
        tokens,
        note: None,
        admission,
    })
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

    /// The script's answer: granted, tokens, then held (-1 without a decision) and the figures.
    fn answer(granted: i64, tokens: &[u8], held: i64, figures: [&[u8]; 3]) -> Reply {
        let bulk = |b: &[u8]| Reply::Bulk(Some(b.to_vec()));
        Reply::Array(Some(vec![
            Reply::Int(granted),
            bulk(tokens),
            Reply::Int(held),
            bulk(figures[0]),
            bulk(figures[1]),
            bulk(figures[2]),
            // The record's window: 2 minutes.
            bulk(b"120000"),
            // Of the requests, those held back.
            bulk(b"38"),
        ]))
    }

    #[test]
    fn an_answer_that_is_not_granted_and_tokens_is_shown_as_the_reply() {
        let none = [&b"0"[..], b"0", b"0"];
        let ok = update(answer(1, b"9.5", -1, none)).expect("an update");
        assert_eq!((ok.granted, ok.tokens, ok.admission), (true, 9.5, None));
        assert!(
            !update(answer(0, b"0.25", -1, none))
                .expect("an update")
                .granted
        );
        assert_eq!(
            update(answer(1, b"nan", -1, none)).err().as_deref(),
            Some("nan")
        );
        assert!(update(Reply::Int(1)).is_err());
        // The answer of a version before the throttle is refused, not misread.
        let old = Reply::Array(Some(vec![Reply::Int(1), Reply::Bulk(Some(b"9".to_vec()))]));
        assert!(update(old).is_err());
    }

    #[test]
    fn the_throttle_s_figures_are_read_and_hostile_ones_refused() {
        let held = update(answer(0, b"3", 1, [b"48", b"0", b"0.95"])).expect("an update");
        let admission = held.admission.expect("a decision");
        assert!(admission.held && !held.granted);
        assert_eq!(admission.figures.requests, 48.0);
        assert_eq!(admission.figures.held, 38.0);
        assert_eq!(admission.p, 0.95);
        assert_eq!(admission.window, Duration::from_secs(120));
        assert!(
            update(answer(1, b"3", 0, [b"1", b"1", b"0"]))
                .unwrap()
                .admission
                .is_some()
        );
        for figures in [
            [&b"-1"[..], b"0", b"0"],
            [b"1", b"inf", b"0"],
            [b"1", b"0", b"x"],
        ] {
            assert!(update(answer(1, b"3", 0, figures)).is_err());
        }
        assert!(update(answer(1, b"3", 7, [b"1", b"0", b"0"])).is_err());
        // A p beyond 1 from a hostile server holds no more than every try.
        let p = update(answer(0, b"3", 1, [b"1", b"0", b"5"])).unwrap();
        assert_eq!(p.admission.map(|a| a.p), Some(1.0));
    }
}
