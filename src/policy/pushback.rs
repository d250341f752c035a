//! Pushback (docs/herd.md#pushback): the wait a command's output asks for (`Retry-After: 30`,
//! `retry in 2m`), read from the first capture group of `--delay-from-output`, and how it bends the
//! policy's own wait.

use std::time::Duration;

use super::backoff::Wait;
use crate::duration::parse_duration;

/// Reads the wait a capture group holds: a number of seconds (`30`, `1.5`) or a DURATION
/// (`2m`, `1m30s`, `250ms`). Spaces around it, and one sentence's punctuation after it (`retry
/// in 2m.`), are left out. The error says why the text is no wait, on one line.
pub fn read_wait(group: &[u8]) -> Result<Duration, String> {
    let text = std::str::from_utf8(group)
        .map_err(|_| "not UTF-8 text".to_string())?
        .trim()
        .trim_end_matches(['.', ',', ';', ':', '!', ')', ']', '"', '\''])
        .trim();
    if text.is_empty() {
        return Err("empty".into());
    }
    match parse_duration(text) {
        Ok(wait) => Ok(wait),
        // A request longer than a `Duration` holds is the longest wait there is, not none.
        Err(_) if too_long(text) => Ok(Duration::MAX),
        Err(_) => Err("not a number of seconds or a duration".into()),
    }
}

/// Whether `text` is a wait too long to be held: a number of seconds past 2^64, or a
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

/// What the output of one try asked for, match after match: the last wait that could be read
/// wins (a later `Retry-After` overrides an earlier one, as a later header line would), and a
/// match whose group holds no wait is ignored, the last such kept to be told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// The wait asked for by the last match that held one.
    pub wait: Option<Duration>,
    /// The last match whose group held no wait: what it held (lossy UTF-8), and why it is none.
    pub ignored: Option<Ignored>,
}

/// A match of `--delay-from-output` that asked for no wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// What the first capture group held; `None` when it took no part in the match.
    pub group: Option<String>,
    pub why: String,
}

impl Requests {
    /// One more match, whose first capture group held `group` (`None`: it took no part).
    pub fn saw(&mut self, group: Option<&[u8]>) {
        let Some(group) = group else {
            self.ignored = Some(Ignored {
                group: None,
                why: "its first capture group took no part in the match".into(),
            });
            return;
        };
        match read_wait(group) {
            Ok(wait) => self.wait = Some(wait),
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
    fn what_is_no_wait_says_why() {
        for (text, why) in [
            (&b"soon"[..], "not a number of seconds or a duration"),
            (b"-5", "not a number of seconds or a duration"),
            (b"Wed, 21 Oct 2015 07:28:00 GMT", "not a number"),
            (b"  ", "empty"),
            (b"\xff3", "not UTF-8"),
        ] {
            let err = read_wait(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_last_wait_asked_for_wins_and_matches_without_one_are_ignored() {
        let mut r = Requests::default();
        r.saw(Some(b"30"));
        r.saw(Some(b"5"));
        assert_eq!(r.wait, Some(Duration::from_secs(5)));
        assert_eq!(r.ignored, None);
        r.saw(Some(b"later"));
        r.saw(None);
        assert_eq!(r.wait, Some(Duration::from_secs(5)));
        let ignored = r.ignored.unwrap();
        assert_eq!(ignored.group, None);
        assert!(ignored.why.contains("took no part"), "{}", ignored.why);
        let mut r = Requests::default();
        r.saw(Some("x".repeat(1000).as_bytes()));
        let shown = r.ignored.unwrap().group.unwrap();
        assert!(shown.len() < 80 && shown.ends_with('…'), "{shown}");
    }

    #[test]
    fn the_request_is_a_floor_that_keeps_the_policys_base() {
        let own = Wait {
            base: ms(800),
            delay: ms(300),
            requested: None,
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
