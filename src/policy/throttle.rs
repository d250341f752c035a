//! Admission control for a fleet (docs/herd.md#admission-control): `--throttle K` holds tries
//! back, first ones included, in proportion to how much of the recent work of the runs that
//! share a quota failed. The figures are kept in the quota's store (a file on one machine, a Redis
//! key for a fleet) and the store decides and counts in one atomic step; this module is that
//! step's arithmetic, pure, with the time and the draw passed in.
//!
//! - Over a sliding window the store counts `requests` (tries, held ones included) and `accepts`
//!   (tries that did not fail transiently: successes and permanent failures), and of the
//!   requests those it `held` back, which the log tells apart from the tries that ran. Before
//!   each try,
//!   `p = min(max, max(0, (requests − K·accepts) / (requests + 1)))`, and a draw below `p` holds
//!   the try back. While at least 1/K of the tries are accepted, `p` is 0.
//! - The sliding window is kept in constant space, as two fixed slots of the window's length:
//!   the current slot's counts, plus the previous slot's weighted by the part of it that still
//!   falls in the window. A window of 2 minutes 30 seconds into its slot counts all of this slot
//!   and 3/4 of the last one.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::duration::{hms, parse_duration};
use crate::policy::classify::Verdict;

/// What `--throttle K[:window=DURATION,max=P]` asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThrottleSpec {
    /// How many requests per accept the fleet may send before tries are held back (> 1).
    pub k: f64,
    /// How far back the figures reach.
    pub window: Duration,
    /// The most `p` may be: a trickle of tries still probes a dependency that is down.
    pub max: f64,
}

impl ThrottleSpec {
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(120);
    pub const DEFAULT_MAX: f64 = 0.95;
    /// The shortest and the longest window.
    pub const MIN_WINDOW: Duration = Duration::from_secs(1);
    pub const MAX_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
    pub const MAX_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
    pub const MIN_WINDOW_MS: u64 = 1000;
    /// The largest K: beyond it the throttle would never hold anything.
    pub const MAX_K: f64 = 1000.0;

    /// The window in milliseconds, as the stores keep it.
    pub fn window_ms(&self) -> u64 {
        u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX)
    }

    /// The chance that a try is held back, given the figures of the window.
    pub fn p(&self, figures: Figures) -> f64 {
        let Figures {
            requests, accepts, ..
        } = figures;
        let p = (requests - self.k * accepts) / (requests + 1.0);
        if p.is_nan() {
            return 0.0;
        }
        p.clamp(0.0, self.max)
    }
}

impl Default for ThrottleSpec {
    fn default() -> ThrottleSpec {
        ThrottleSpec {
            k: 2.0,
            window: ThrottleSpec::DEFAULT_WINDOW,
            max: ThrottleSpec::DEFAULT_MAX,
        }
    }
}

impl fmt::Display for ThrottleSpec {
    /// As `--throttle` would be written to ask for it: the settings that are not the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.k)?;
        let window = self.window != ThrottleSpec::DEFAULT_WINDOW;
        let max = self.max != ThrottleSpec::DEFAULT_MAX;
        if window || max {
            f.write_str(":")?;
        }
        if window {
            write!(f, "window={}", hms(self.window))?;
        }
        if max {
            let sep = if window { "," } else { "" };
            write!(f, "{sep}max={}", six_digits(self.max))?;
        }
        Ok(())
    }
}

impl FromStr for ThrottleSpec {
    type Err = String;

    /// `K`, or `K:window=DURATION,max=P` with either setting or both, in any order.
    fn from_str(s: &str) -> Result<ThrottleSpec, String> {
        let (k, settings) = match s.split_once(':') {
            Some((k, rest)) => (k, Some(rest)),
            None => (s, None),
        };
        let mut spec = ThrottleSpec {
            k: parse_k(k.trim())?,
            ..ThrottleSpec::default()
        };
        let Some(settings) = settings else {
            return Ok(spec);
        };
        let (mut window, mut max) = (false, false);
        for item in settings.split(',') {
            let item = item.trim();
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!(
                    "'{item}' is not KEY=VALUE (K:window=DURATION,max=P)"
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            let seen = match key {
                "window" => {
                    spec.window = parse_window(value)?;
                    &mut window
                }
                "max" => {
                    spec.max = parse_max(value)?;
                    &mut max
                }
                _ => return Err(format!("unknown setting '{key}' (window or max)")),
            };
            if std::mem::replace(seen, true) {
                return Err(format!("the setting '{key}' is given twice"));
            }
        }
        Ok(spec)
    }
}

fn parse_k(k: &str) -> Result<f64, String> {
    match k.parse::<f64>() {
        Ok(n) if n > 1.0 && n <= ThrottleSpec::MAX_K => Ok(n),
        _ => Err(format!(
            "K={k}: expected a number above 1 and at most {} (2 holds tries back once fewer \
             than half are accepted)",
            ThrottleSpec::MAX_K
        )),
    }
}

/// A number given as a setting, as it is printed back: at most 6 significant digits, in
/// exponent form when it is that small or that large (`1e-300`, not 300 digits).
pub fn six_digits(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return x.to_string();
    }
    let rounded: f64 = format!("{x:.5e}").parse().unwrap_or(x);
    match rounded.abs() {
        a if (1e-4..1e6).contains(&a) => rounded.to_string(),
        _ => format!("{rounded:e}"),
    }
}

/// `p` as the log prints it: two decimals, or as many more as show that it is neither 0 nor 1
/// when it is neither (`0.004`, `0.999999`), up to twelve; past them, a `p` nearer 0 in six
/// digits with its exponent (`1e-300`, as a `max` that small is given), one nearer 1 as the
/// twelve nines it is below.
pub fn shown_p(p: f64) -> String {
    for decimals in 2..=12 {
        let text = format!("{p:.decimals$}");
        let back: f64 = text.parse().unwrap_or(p);
        let lost = (back == 0.0 && p > 0.0) || (back == 1.0 && p < 1.0);
        if !lost {
            return text;
        }
    }
    if p < 0.5 {
        six_digits(p)
    } else {
        "0.999999999999".into()
    }
}

fn parse_window(value: &str) -> Result<Duration, String> {
    let window = parse_duration(value).map_err(|e| format!("window={value}: {e}"))?;
    if window < ThrottleSpec::MIN_WINDOW || window > ThrottleSpec::MAX_WINDOW {
        return Err(format!("window={value}: expected from 1s to 1d"));
    }
    Ok(window)
}

fn parse_max(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(n) if n > 0.0 && n < 1.0 => Ok(n),
        _ => Err(format!(
            "max={value}: expected a number above 0 and below 1 (1 would hold every try back)"
        )),
    }
}

/// The window's figures at one moment: the tries it counts, those of them accepted, and those
/// of them held back (the others ran). They are estimates of the sliding window, so not whole
/// numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub requests: f64,
    pub accepts: f64,
    pub held: f64,
}

/// How a try counts in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// It succeeded, or failed for good: the dependency answered.
    Accepted,
    /// It failed transiently, or was held back: a request only.
    Refused,
}

/// How a try that ran counts for the throttle: accepted when the dependency answered (a success,
/// a permanent failure), refused when it failed transiently; not at all when interrupted or
/// stopped for a lost lock.
pub fn counted(verdict: &Verdict) -> Option<Counted> {
    match verdict {
        Verdict::Success(_) | Verdict::Permanent(_) => Some(Counted::Accepted),
        Verdict::Transient(_) => Some(Counted::Refused),
        Verdict::Interrupted | Verdict::LockLost => None,
    }
}

/// The counters a store keeps for a quota's throttle: two slots of the window's length, the
/// current one starting at `start_ms` (ms since the Unix epoch) and the one before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub start_ms: u64,
    pub requests: u64,
    pub accepts: u64,
    pub prev_requests: u64,
    pub prev_accepts: u64,
    /// Of the requests, those held back, in each slot (0 in a record written before they were
    /// counted).
    pub held: u64,
    pub prev_held: u64,
    /// The window its figures are counted over, in ms: the record's own, kept whatever window
    /// a run names (0: not recorded yet, the run's is taken).
    pub window_ms: u64,
}

impl Window {
    /// Moves the slots on to `now_ms`: a slot that ended becomes the previous one, and slots
    /// that ended a whole window ago count no more. A clock that went back a little moves
    /// nothing; a current slot dated more than a window in the future (a clock that was ahead,
    /// then corrected) is read as starting now: the window starts again, rather than holding
    /// the fleet until the clock catches up.
    pub fn advance(&mut self, window_ms: u64, now_ms: u64) {
        let window_ms = window_ms.max(1);
        let elapsed = now_ms.saturating_sub(self.start_ms);
        let ahead = self.start_ms > now_ms.saturating_add(window_ms);
        if self.start_ms == 0 || ahead || elapsed >= window_ms.saturating_mul(2) {
            *self = Window {
                start_ms: now_ms,
                window_ms: self.window_ms,
                ..Window::default()
            };
        } else if elapsed >= window_ms {
            *self = Window {
                start_ms: self.start_ms + window_ms,
                requests: 0,
                accepts: 0,
                prev_requests: self.requests,
                prev_accepts: self.accepts,
                held: 0,
                prev_held: self.held,
                window_ms: self.window_ms,
            };
        }
    }

    /// The figures of the window ending at `now_ms` (after [`Window::advance`]).
    pub fn figures(&self, window_ms: u64, now_ms: u64) -> Figures {
        let window_ms = window_ms.max(1);
        let into = now_ms.saturating_sub(self.start_ms).min(window_ms);
        let left = (window_ms - into) as f64 / window_ms as f64;
        Figures {
            requests: self.requests as f64 + self.prev_requests as f64 * left,
            accepts: self.accepts as f64 + self.prev_accepts as f64 * left,
            held: self.held as f64 + self.prev_held as f64 * left,
        }
    }

    /// Counts one try at `now_ms`.
    pub fn count(&mut self, counted: Counted, window_ms: u64, now_ms: u64) {
        self.advance(window_ms, now_ms);
        self.requests = more(self.requests);
        if counted == Counted::Accepted {
            self.accepts = more(self.accepts);
        }
    }

    /// Counts one try held back at `now_ms`: a request, and a held one.
    pub fn count_held(&mut self, window_ms: u64, now_ms: u64) {
        self.count(Counted::Refused, window_ms, now_ms);
        self.held = more(self.held).min(self.requests);
    }

    /// The window as its record in the quota's file: `retry-throttle v1 start=… r=… a=… pr=…
    /// pa=… w=… h=… ph=…`, padded with spaces to [`WINDOW_RECORD_LEN`] bytes, the last one a
    /// newline.
    pub fn encode(&self) -> [u8; WINDOW_RECORD_LEN] {
        let c = |n: u64| n.min(MAX_COUNT);
        let mut text = format!(
            "{WINDOW_PREFIX}start={} r={} a={} pr={} pa={}",
            self.start_ms,
            c(self.requests),
            c(self.accepts),
            c(self.prev_requests),
            c(self.prev_accepts)
        );
        // At most a day, 8 digits: the record stays within its length.
        if self.window_ms > 0 {
            text += &format!(" w={}", self.window_ms.min(ThrottleSpec::MAX_WINDOW_MS));
        }
        // Left out when nothing was held, as a record written before they were counted.
        if self.held > 0 || self.prev_held > 0 {
            text += &format!(" h={} ph={}", c(self.held), c(self.prev_held));
        }
        let mut record = [b' '; WINDOW_RECORD_LEN];
        // At most 18 + 26 + 4 × 16 + 11 + 2 × 16 = 151 bytes: the start as any u64, the counts
        // in 12 digits, the window in 8, and their names.
        let len = text.len().min(WINDOW_RECORD_LEN - 1);
        record[..len].copy_from_slice(&text.as_bytes()[..len]);
        record[WINDOW_RECORD_LEN - 1] = b'\n';
        record
    }

    /// Reads a record that [`Window::encode`] wrote; anything else is `None`.
    pub fn decode(bytes: &[u8]) -> Option<Window> {
        if bytes.len() != WINDOW_RECORD_LEN || bytes[WINDOW_RECORD_LEN - 1] != b'\n' {
            return None;
        }
        let text = std::str::from_utf8(&bytes[..WINDOW_RECORD_LEN - 1]).ok()?;
        let mut fields = text
            .trim_end_matches(' ')
            .strip_prefix(WINDOW_PREFIX)?
            .split(' ');
        let mut next = |name: &str| -> Option<u64> { number(fields.next()?, name) };
        let mut window = Window {
            start_ms: next("start")?,
            requests: next("r")?,
            accepts: next("a")?,
            prev_requests: next("pr")?,
            prev_accepts: next("pa")?,
            held: 0,
            prev_held: 0,
            window_ms: 0,
        };
        // A record written before the window was kept has none, and one written before the
        // held tries were counted has no `h` and `ph`: none held.
        let mut fields = fields.peekable();
        if let Some(field) = fields.next_if(|f| f.starts_with("w=")) {
            // A window no run could have named (under 1s, over a day) is no record retry wrote.
            window.window_ms = number(field, "w").filter(|w| {
                (ThrottleSpec::MIN_WINDOW_MS..=ThrottleSpec::MAX_WINDOW_MS).contains(w)
            })?;
        }
        if let Some(field) = fields.next_if(|f| f.starts_with("h=")) {
            window.held = number(field, "h")?;
            window.prev_held = number(fields.next()?, "ph")?;
        }
        let consistent = window.accepts <= window.requests
            && window.prev_accepts <= window.prev_requests
            && window.held <= window.requests
            && window.prev_held <= window.prev_requests
            && fields.next().is_none();
        consistent.then_some(window)
    }
}

/// `NAME=DIGITS`'s number, from a window's record.
fn number(field: &str, name: &str) -> Option<u64> {
    let value = field.strip_prefix(name)?.strip_prefix('=')?;
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// One more in a count of the window, which stops at [`MAX_COUNT`].
fn more(n: u64) -> u64 {
    n.saturating_add(1).min(MAX_COUNT)
}

/// The most a count of a window's record reaches: 12 digits, so that every count fits in the
/// record's length (a day's window at eleven million tries a second).
pub const MAX_COUNT: u64 = 999_999_999_999;

/// The size of a throttle's record in the quota's file, after the bucket's.
pub const WINDOW_RECORD_LEN: usize = 160;

const WINDOW_PREFIX: &str = "retry-throttle v1 ";

/// What a run sends with an exchange to have its next try admitted or held back: its throttle
/// and its draw, uniform in `[0, 1)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ask {
    pub spec: ThrottleSpec,
    pub draw: f64,
}

/// What the store decided about a try.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Admission {
    /// The figures it decided on, before this try counted.
    pub figures: Figures,
    pub p: f64,
    /// True when the try is held back; it was then counted as a request, and a held one.
    pub held: bool,
    /// The window the figures are counted over: the quota record's own, which may not be the
    /// one the run named.
    pub window: Duration,
}

/// The store's atomic step for a try: with the window moved on to `now_ms`, `p` from its
/// figures, and the try held back when the draw falls below `p`, then counted at once.
pub fn admit(window: &mut Window, ask: &Ask, now_ms: u64) -> Admission {
    let window_ms = ask.spec.window_ms();
    window.advance(window_ms, now_ms);
    let figures = window.figures(window_ms, now_ms);
    let p = ask.spec.p(figures);
    let held = ask.draw < p;
    if held {
        window.count_held(window_ms, now_ms);
    }
    Admission {
        figures,
        p,
        held,
        window: ask.spec.window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_764_480_000_000;
    const W: u64 = 120_000;

    fn spec(k: f64) -> ThrottleSpec {
        ThrottleSpec {
            k,
            ..ThrottleSpec::default()
        }
    }

    fn figures(requests: f64, accepts: f64) -> Figures {
        Figures {
            requests,
            accepts,
            held: 0.0,
        }
    }

    #[test]
    fn p_is_zero_while_at_least_one_try_in_k_is_accepted() {
        let k2 = spec(2.0);
        assert_eq!(k2.p(figures(0.0, 0.0)), 0.0);
        assert_eq!(k2.p(figures(100.0, 50.0)), 0.0);
        assert_eq!(k2.p(figures(100.0, 100.0)), 0.0);
        // Just below half accepted: a little above 0.
        let p = k2.p(figures(100.0, 49.0));
        assert!((p - 2.0 / 101.0).abs() < 1e-12, "{p}");
        // K = 1.1 is stricter: 60 of 100 accepted already holds some back with K = 1.5.
        assert_eq!(spec(1.5).p(figures(100.0, 70.0)), 0.0);
        assert!(spec(1.5).p(figures(100.0, 60.0)) > 0.0);
    }

    #[test]
    fn p_shows_it_is_neither_0_nor_1_and_a_setting_prints_back_short() {
        assert_eq!(shown_p(0.95), "0.95");
        assert_eq!(shown_p(0.0), "0.00");
        assert_eq!(shown_p(0.004), "0.004");
        assert_eq!(shown_p(0.999999), "0.999999");
        assert_eq!(shown_p(1.0), "1.00");
        // A tiny max makes a tiny p: in digits people read, never three hundred of them.
        assert_eq!(shown_p(1e-300), "1e-300");
        assert_eq!(shown_p(1.234_567_89e-20), "1.23457e-20");
        assert_eq!(shown_p(1.0 - 1e-15), "0.999999999999");
        assert_eq!(six_digits(0.9), "0.9");
        assert_eq!(six_digits(0.123456789), "0.123457");
        assert_eq!(six_digits(1e-300), "1e-300");
        let tiny: ThrottleSpec = "2:max=1e-300".parse().unwrap();
        assert_eq!(tiny.to_string(), "2:max=1e-300");
        let close: ThrottleSpec = "2:max=0.999999".parse().unwrap();
        assert_eq!(close.to_string(), "2:max=0.999999");
    }

    #[test]
    fn a_window_dated_in_the_future_starts_again() {
        let window_ms = 120_000;
        let hour = 3_600_000;
        let t0 = 1_764_480_000_000;
        // Counted while the clock was an hour ahead: every try failed.
        let mut w = Window::default();
        for _ in 0..200 {
            w.count(Counted::Refused, window_ms, t0 + hour);
        }
        // The clock is corrected: the window starts again now.
        w.advance(window_ms, t0);
        assert_eq!(
            w,
            Window {
                start_ms: t0,
                ..Window::default()
            }
        );
        assert_eq!(w.figures(window_ms, t0).requests, 0.0);
        // A clock a little behind another's moves nothing.
        let mut w = Window::default();
        w.count(Counted::Refused, window_ms, t0 + 500);
        w.advance(window_ms, t0);
        assert_eq!((w.start_ms, w.requests), (t0 + 500, 1));
    }

    #[test]
    fn p_is_capped_at_max() {
        // Nothing accepted: (r − 0) / (r + 1) → 1, but never past max.
        assert_eq!(spec(2.0).p(figures(1000.0, 0.0)), 0.95);
        let low = ThrottleSpec {
            max: 0.5,
            ..spec(2.0)
        };
        assert_eq!(low.p(figures(1000.0, 0.0)), 0.5);
        // Few requests: the + 1 keeps p low while the figures say little.
        assert_eq!(spec(2.0).p(figures(1.0, 0.0)), 0.5);
    }

    #[test]
    fn a_held_try_counts_as_a_request_only() {
        let mut window = Window::default();
        for _ in 0..10 {
            window.count(Counted::Refused, W, T0);
        }
        let ask = Ask {
            spec: spec(2.0),
            draw: 0.5,
        };
        let admission = admit(&mut window, &ask, T0 + 1);
        assert_eq!(admission.figures, figures(10.0, 0.0));
        assert!((admission.p - 10.0 / 11.0).abs() < 1e-12);
        assert!(admission.held);
        assert_eq!((window.requests, window.accepts, window.held), (11, 0, 1));
        // The next decision's figures tell the held try from the ten that ran.
        let next = admit(&mut window, &ask, T0 + 2);
        assert_eq!(
            next.figures,
            Figures {
                requests: 11.0,
                accepts: 0.0,
                held: 1.0
            }
        );
        // A draw at or above p admits the try, which is not counted until its outcome is.
        let ask = Ask {
            spec: spec(2.0),
            draw: 0.99,
        };
        let admission = admit(&mut window, &ask, T0 + 3);
        assert!(!admission.held);
        assert_eq!((window.requests, window.accepts, window.held), (12, 0, 2));
    }

    #[test]
    fn a_store_that_saw_no_failure_admits_everything() {
        let mut window = Window::default();
        for draw in [0.0, 0.5, 0.999] {
            let ask = Ask {
                spec: spec(2.0),
                draw,
            };
            assert!(!admit(&mut window, &ask, T0).held);
        }
        assert_eq!(window.requests, 0);
    }

    #[test]
    fn the_previous_slot_fades_out_over_the_window() {
        let mut window = Window::default();
        for _ in 0..8 {
            window.count(Counted::Refused, W, T0);
        }
        window.count(Counted::Accepted, W, T0);
        window.count(Counted::Accepted, W, T0);
        // A quarter of the way into the next slot: 3/4 of the last one still counts.
        let at = T0 + W + W / 4;
        window.advance(W, at);
        assert_eq!(window.figures(W, at), figures(7.5, 1.5));
        // Two windows on, nothing counts.
        let later = T0 + 2 * W;
        window.advance(W, later);
        assert_eq!(window.figures(W, later), figures(0.0, 0.0));
        let mut idle = window;
        idle.advance(W, later + 3 * W);
        assert_eq!(idle.figures(W, later + 3 * W), figures(0.0, 0.0));
    }

    #[test]
    fn a_clock_that_went_back_moves_nothing() {
        let mut window = Window::default();
        window.count(Counted::Refused, W, T0);
        window.advance(W, T0 - 60_000);
        assert_eq!(window.requests, 1);
        assert_eq!(window.figures(W, T0 - 60_000), figures(1.0, 0.0));
    }

    #[test]
    fn records_read_back_and_damaged_ones_are_refused() {
        let window = Window {
            start_ms: u64::MAX,
            requests: MAX_COUNT,
            accepts: MAX_COUNT,
            prev_requests: MAX_COUNT,
            prev_accepts: 3,
            held: MAX_COUNT,
            prev_held: MAX_COUNT,
            window_ms: ThrottleSpec::MAX_WINDOW_MS,
        };
        let record = window.encode();
        assert_eq!(Window::decode(&record), Some(window));
        // A count past the record's width is written as the most it holds.
        let past = Window {
            requests: u64::MAX,
            ..window
        };
        assert_eq!(Window::decode(&past.encode()), Some(window));
        assert_eq!(Window::decode(&record[..100]), None);
        let mut bad = record;
        bad[20] = b'x';
        assert_eq!(Window::decode(&bad), None);
        // More accepts than requests is no record retry wrote.
        let odd = Window {
            accepts: 5,
            requests: 4,
            ..Window::default()
        };
        assert_eq!(Window::decode(&odd.encode()), None);
        assert_eq!(Window::decode(&[b' '; WINDOW_RECORD_LEN]), None);
        // A window no run could name: a record written by something else.
        for w in [0, 999, ThrottleSpec::MAX_WINDOW_MS + 1, u64::MAX] {
            let mut text = format!("{WINDOW_PREFIX}start=1 r=1 a=0 pr=0 pa=0 w={w}").into_bytes();
            text.resize(WINDOW_RECORD_LEN - 1, b' ');
            text.push(b'\n');
            assert_eq!(Window::decode(&text), None, "w={w}");
        }
    }

    #[test]
    fn held_tries_are_counted_apart_and_an_older_record_holds_none() {
        let mut window = Window::default();
        for _ in 0..10 {
            window.count(Counted::Refused, W, T0);
        }
        for _ in 0..58 {
            window.count_held(W, T0);
        }
        assert_eq!((window.requests, window.held), (68, 58));
        let record = window.encode();
        assert!(record.starts_with(b"retry-throttle v1 start="));
        assert_eq!(Window::decode(&record), Some(window));
        // Held tries move to the previous slot with the rest, and fade out with it.
        let at = T0 + W + W / 2;
        window.advance(W, at);
        assert_eq!((window.held, window.prev_held), (0, 58));
        assert_eq!(window.figures(W, at).held, 29.0);
        assert_eq!(Window::decode(&window.encode()), Some(window));
        // A record written before the held tries were counted, with its window and without.
        for tail in [" w=120000", ""] {
            let mut text =
                format!("{WINDOW_PREFIX}start={T0} r=68 a=0 pr=0 pa=0{tail}").into_bytes();
            text.resize(WINDOW_RECORD_LEN - 1, b' ');
            text.push(b'\n');
            let old = Window::decode(&text).expect("an older record reads");
            assert_eq!(
                (old.requests, old.held, old.prev_held),
                (68, 0, 0),
                "{tail}"
            );
        }
        // More held than requests, or `h` without `ph`, is no record retry wrote.
        for tail in [" w=120000 h=69 ph=0", " h=1", " w=120000 ph=1 h=1"] {
            let mut text =
                format!("{WINDOW_PREFIX}start={T0} r=68 a=0 pr=0 pa=0{tail}").into_bytes();
            text.resize(WINDOW_RECORD_LEN - 1, b' ');
            text.push(b'\n');
            assert_eq!(Window::decode(&text), None, "{tail}");
        }
    }

    #[test]
    fn the_option_reads_k_and_its_settings() {
        assert_eq!("2".parse(), Ok(spec(2.0)));
        let both: ThrottleSpec = "1.1:window=5m,max=0.9".parse().unwrap();
        assert_eq!(
            both,
            ThrottleSpec {
                k: 1.1,
                window: Duration::from_secs(300),
                max: 0.9
            }
        );
        assert_eq!(both.to_string(), "1.1:window=5m,max=0.9");
        assert_eq!(spec(2.0).to_string(), "2");
        let short: ThrottleSpec = "3:window=2s".parse().unwrap();
        assert_eq!(short.to_string(), "3:window=2s");
        for bad in [
            "1",
            "0.5",
            "x",
            "",
            "nan",
            "inf",
            "2:",
            "2:window",
            "2:window=0s",
            "2:window=2d",
            "2:max=1",
            "2:max=0",
            "2:max=-1",
            "2:size=3",
            "2:max=0.5,max=0.6",
        ] {
            assert!(bad.parse::<ThrottleSpec>().is_err(), "{bad}");
        }
    }
}
