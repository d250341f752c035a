//! Pushback (docs/herd.md#pushback): the wait a command's output asks for (`Retry-After: 30`,
//! `retry in 2m`, `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT`), read from the first capture
//! group of `--delay-from-output`, and how it bends the policy's own wait.

use std::time::{Duration, SystemTime};

use super::backoff::Wait;
use super::httpdate::{DateError, HttpDate, TimeSource};
use super::output::Pattern;
use crate::duration::parse_duration;

/// What the capture group of one match asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A wait: `30`, `2m`.
    Wait(Duration),
    /// A moment to wait until: an HTTP-date.
    Until(HttpDate),
}

/// The text of a capture group as a request: spaces around it, and one sentence's punctuation
/// after it (`retry in 2m.`), left out.
fn request_text(group: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(group)
        .map_err(|_| "not UTF-8 text".to_string())?
        .trim()
        .trim_end_matches(['.', ',', ';', ':', '!', ')', ']', '"', '\''])
        .trim();
    if text.is_empty() {
        return Err("empty".into());
    }
    Ok(text)
}

/// The wait `text` is, if it is one.
fn wait_in(text: &str) -> Option<Duration> {
    match parse_duration(text) {
        Ok(wait) => Some(wait),
        // A request longer than a `Duration` holds is the longest wait there is, not none.
        Err(_) if too_long(text) => Some(Duration::MAX),
        Err(_) => None,
    }
}

/// Reads what a capture group asks for: a wait as `read_wait` reads it, or an HTTP-date (in
/// any of its three forms; `now` places the two-digit year of the RFC 850 form). The error
/// says why the text is neither, on one line.
pub fn read_request(group: &[u8], now: SystemTime) -> Result<Asked, String> {
    let text = request_text(group)?;
    if let Some(wait) = wait_in(text) {
        return Ok(Asked::Wait(wait));
    }
    match HttpDate::parse(text, HttpDate::from_system(now)) {
        Ok(date) => Ok(Asked::Until(date)),
        Err(DateError::Malformed(why)) => Err(format!("not an HTTP-date: {why}")),
        Err(DateError::NotADate) => {
            Err("not a number of seconds, a duration or an HTTP-date".into())
        }
    }
}

/// The pattern of a `Date:` line, the clock of the server that wrote the output: its group is
/// the date.
pub fn date_line() -> Pattern {
    Pattern::capturing(r"(?i)^Date:\s*(.+)$").expect("the pattern of a Date: line is valid")
}

/// Whether `text` is a wait too long to be kept: a number of seconds past 2^64, or a
/// DURATION whose number overflows.
fn too_long(text: &str) -> bool {
    let seconds = text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.parse::<f64>().is_ok_and(|secs| secs > 0.0);
    seconds
        || matches!(
            humantime::parse_duration(text),
            Err(humantime::DurationError::NumberOverflow)
        )
}

/// What the output of one try asked for, match after match: the last request that could be
/// read wins (a later `Retry-After` overrides an earlier one, as a later header line would), and
/// a match whose group holds no request is ignored, the last such kept to be told. A moment
/// asked for is measured against the output's last `Date:` line when it has one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// What the last match that carried a request asked for.
    pub asked: Option<Asked>,
    /// The last match whose group carried no request: what it carried (lossy UTF-8), and why it is
    /// none.
    pub ignored: Option<Ignored>,
    /// The moment the output's last `Date:` line that carried an HTTP-date names: the server's
    /// clock, when the try was an HTTP request.
    pub server_date: Option<HttpDate>,
}

/// A match of `--delay-from-output` that asked for no wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// What the first capture group caught; `None` when it took no part in the match.
    pub group: Option<String>,
    pub why: String,
}

impl Requests {
    /// One more match, whose first capture group caught `group` (`None`: it took no part), seen
    /// at `now` by the local clock.
    pub fn saw(&mut self, group: Option<&[u8]>, now: SystemTime) {
        let Some(group) = group else {
            self.ignored = Some(Ignored {
                group: None,
                why: "its first capture group took no part in the match".into(),
            });
            return;
        };
        match read_request(group, now) {
            Ok(asked) => self.asked = Some(asked),
            Err(why) => {
                // A megabyte of digits is not worth repeating in the log.
                let mut text = String::from_utf8_lossy(group).into_owned();
                if text.len() > 64 {
                    let mut end = 64;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                    text.push('…');
                }
                self.ignored = Some(Ignored {
                    group: Some(text),
                    why,
                });
            }
        }
    }

    /// One more `Date:` line, whose group caught `group`, seen at `now`: kept when it holds an
    /// HTTP-date, passed over otherwise (the local clock then measures).
    pub fn saw_date_line(&mut self, group: Option<&[u8]>, now: SystemTime) {
        let date = group
            .and_then(|g| request_text(g).ok())
            .and_then(|text| HttpDate::parse(text, HttpDate::from_system(now)).ok());
        if let Some(date) = date {
            self.server_date = Some(date);
        }
    }

    /// The wait asked for, at `now` by the local clock (when the try ended): a moment asked
    /// for is that far after the output's own `Date:`, or after `now` without one; a moment
    /// past asks for no wait.
    pub fn wait(&self, now: SystemTime) -> Option<Duration> {
        match self.asked? {
            Asked::Wait(wait) => Some(wait),
            Asked::Until(date) => Some(match self.server_date {
                Some(server) => date.since(server),
                None => date.after(now),
            }),
        }
    }

    /// The clock that measured the wait asked for, when it was a moment (an HTTP-date).
    pub fn clock(&self) -> Option<TimeSource> {
        match self.asked? {
            Asked::Wait(_) => None,
            Asked::Until(_) if self.server_date.is_some() => Some(TimeSource::Server),
            Asked::Until(_) => Some(TimeSource::Local),
        }
    }
}

/// The wait before a retry, given the policy's own (`own`, jittered and capped) and the one the
/// output asked for: the longer of the two. The request is neither jittered nor capped by
/// `--max-delay`: the cap bounds `retry`'s own backoff, not what the other side asked for.
pub fn apply(own: Wait, requested: Option<Duration>) -> Wait {
    match requested {
        Some(asked) => Wait {
            delay: own.delay.max(asked),
            requested: Some(asked),
            ..own
        },
        None => own,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::UNIX_EPOCH;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 2015-10-21 07:27:30 UTC by the local clock, half a minute before the dates below.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_445_412_450)
    }

    fn read_wait(group: &[u8]) -> Result<Duration, String> {
        match read_request(group, now())? {
            Asked::Wait(wait) => Ok(wait),
            Asked::Until(date) => Err(format!("a date: {date:?}")),
        }
    }

    #[test]
    fn a_wait_is_seconds_or_a_duration() {
        assert_eq!(read_wait(b"30"), Ok(Duration::from_secs(30)));
        assert_eq!(read_wait(b"1.5"), Ok(ms(1500)));
        assert_eq!(read_wait(b"2m"), Ok(Duration::from_secs(120)));
        assert_eq!(read_wait(b"1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(read_wait(b" 250ms."), Ok(ms(250)));
        assert_eq!(read_wait(b"0"), Ok(Duration::ZERO));
    }

    #[test]
    fn a_wait_too_long_to_hold_is_the_longest_wait_not_none() {
        for text in [
            &b"18446744073709551616"[..],
            b"99999999999999999999999999999",
            b"18446744073709551616.5",
            b"99999999999999999999999y",
        ] {
            assert_eq!(read_wait(text), Ok(Duration::MAX), "{text:?}");
        }
        assert_eq!(
            read_wait(b"99999999999"),
            Ok(Duration::from_secs(99_999_999_999))
        );
    }

    #[test]
    fn an_http_date_in_any_form_is_a_moment_to_wait_until() {
        let at = HttpDate::parse(
            "Wed, 21 Oct 2015 07:28:00 GMT",
            HttpDate::from_system(now()),
        )
        .unwrap();
        for text in [
            &b"Wed, 21 Oct 2015 07:28:00 GMT"[..],
            b" Wed, 21 Oct 2015 07:28:00 GMT\r",
            b"Wednesday, 21-Oct-15 07:28:00 GMT",
            b"Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(read_request(text, now()), Ok(Asked::Until(at)), "{text:?}");
        }
    }

    #[test]
    fn what_is_no_wait_says_why() {
        for (text, why) in [
            (
                &b"soon"[..],
                "not a number of seconds, a duration or an HTTP-date",
            ),
            (b"-5", "not a number of seconds, a duration or an HTTP-date"),
            (
                b"Thu, 21 Oct 2015 07:28:00 GMT",
                "not an HTTP-date: 21 Oct 2015 is a Wednesday, not a Thursday",
            ),
            (
                b"Wed, 32 Oct 2015 07:28:00 GMT",
                "not an HTTP-date: Oct 2015 has no day 32",
            ),
            (
                b"Wed, 21 Oct 2015",
                "not an HTTP-date: not laid out as Sun, 06 Nov",
            ),
            (b"  ", "empty"),
            (b"\xff3", "not UTF-8"),
        ] {
            let err = read_request(text, now()).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_last_wait_asked_for_wins_and_matches_without_one_are_ignored() {
        let mut r = Requests::default();
        r.saw(Some(b"30"), now());
        r.saw(Some(b"5"), now());
        assert_eq!(r.wait(now()), Some(Duration::from_secs(5)));
        assert_eq!(r.ignored, None);
        r.saw(Some(b"later"), now());
        r.saw(None, now());
        r.saw(Some(b"Mon, 21 Oct 2015 07:28:00 GMT"), now());
        assert_eq!(r.wait(now()), Some(Duration::from_secs(5)));
        assert_eq!(r.clock(), None, "a wait, not a moment");
        let ignored = r.ignored.unwrap();
        assert_eq!(
            ignored.group.as_deref(),
            Some("Mon, 21 Oct 2015 07:28:00 GMT")
        );
        assert!(ignored.why.contains("not a Monday"), "{}", ignored.why);
        let mut r = Requests::default();
        r.saw(None, now());
        let ignored = r.ignored.unwrap();
        assert_eq!(ignored.group, None);
        assert!(ignored.why.contains("took no part"), "{}", ignored.why);
        let mut r = Requests::default();
        r.saw(Some("x".repeat(1000).as_bytes()), now());
        let shown = r.ignored.unwrap().group.unwrap();
        assert!(shown.len() < 80 && shown.ends_with('…'), "{shown}");
    }

    #[test]
    fn a_moment_is_measured_by_the_outputs_date_line_else_by_the_local_clock() {
        let mut r = Requests::default();
        r.saw(Some(b"Wed, 21 Oct 2015 07:28:00 GMT"), now());
        // Half a minute ahead of the local clock, read 250ms after it.
        assert_eq!(r.wait(now() + ms(250)), Some(ms(29_750)));
        assert_eq!(r.clock(), Some(TimeSource::Local));
        // By the server's own clock, the date is three seconds away.
        r.saw_date_line(Some(b"Wed, 21 Oct 2015 07:27:57 GMT\r"), now());
        assert_eq!(r.wait(now()), Some(Duration::from_secs(3)));
        assert_eq!(r.clock(), Some(TimeSource::Server));
        // A Date: line that holds no date leaves the last one that did.
        r.saw_date_line(Some(b"yesterday"), now());
        r.saw_date_line(None, now());
        assert_eq!(r.wait(now()), Some(Duration::from_secs(3)));
        // The last Date: line wins, and a moment past asks for no wait.
        r.saw_date_line(Some(b"Wed, 21 Oct 2015 08:00:00 GMT"), now());
        assert_eq!(r.wait(now()), Some(Duration::ZERO));
        assert_eq!(r.clock(), Some(TimeSource::Server));
        let mut r = Requests::default();
        r.saw(Some(b"Tue, 20 Oct 2015 07:28:00 GMT"), now());
        assert_eq!(r.wait(now()), Some(Duration::ZERO), "a day ago");
        assert_eq!(r.clock(), Some(TimeSource::Local));
        assert_eq!(Requests::default().wait(now()), None);
        assert_eq!(Requests::default().clock(), None);
    }

    #[test]
    fn a_date_line_is_matched_whatever_its_case() {
        let p = date_line();
        assert!(p.is_match(b"Date: Wed, 21 Oct 2015 07:28:00 GMT"));
        assert!(p.is_match(b"date:Wed, 21 Oct 2015 07:28:00 GMT\r"));
        assert!(p.is_match(b"DATE:   x"));
        assert!(!p.is_match(b"X-Date: Wed, 21 Oct 2015 07:28:00 GMT"));
        assert!(!p.is_match(b"Date:"));
    }

    #[test]
    fn the_request_is_a_floor_that_keeps_the_policys_base() {
        let own = Wait {
            base: ms(800),
            delay: ms(300),
            requested: None,
            clock: None,
        };
        assert_eq!(apply(own, None), own);
        let asked = apply(own, Some(ms(1000)));
        assert_eq!((asked.base, asked.delay), (ms(800), ms(1000)));
        assert_eq!(asked.requested, Some(ms(1000)));
        assert!(asked.set_by_request());
        let shorter = apply(own, Some(ms(100)));
        assert_eq!(shorter.delay, ms(300));
        assert!(!shorter.set_by_request());
    }
}
