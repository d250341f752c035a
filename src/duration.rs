//! Durations and times as people write and read them.

use std::time::{Duration, SystemTime};

/// Parses a DURATION: a humantime form (`250ms`, `2s`, `1m30s`, `2h`) or a bare non-negative
/// decimal number of seconds (`2`, `0.25`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(format!("empty duration; {DURATION_FORM}"));
    }
    if s.starts_with('-') {
        return Err("a duration cannot be negative".into());
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = s
            .parse()
            .map_err(|_| format!("'{s}' is not a number of seconds"))?;
        let d = Duration::try_from_secs_f64(secs)
            .map_err(|_| "the duration is too large".to_string())?;
        // A positive duration below the clock's step rounds up to that step: rounded down to
        // 0 it would mean no limit at all.
        return Ok(if d.is_zero() && secs > 0.0 {
            Duration::from_nanos(1)
        } else {
            d
        });
    }
    humantime::parse_duration(s).map_err(|e| format!("{}; {DURATION_FORM}", unreadable(s, &e)))
}

/// What a duration looks like, as an error says it.
const DURATION_FORM: &str =
    "a duration is a number and a unit, such as 500ms, 2s, 1m30s or 1.5h, or a number of seconds";

/// Why `s` is not a duration, in `retry`'s words rather than the parser's.
fn unreadable(s: &str, e: &humantime::DurationError) -> String {
    use humantime::DurationError as E;
    match e {
        E::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!("{value} has no unit (such as {value}s or {value}m)")
        }
        E::UnknownUnit { unit, .. } => format!(
            "'{}' is not a unit of time (the units are ms, s, m, h and d, also ns, us, w)",
            crate::text::printable(unit)
        ),
        E::InvalidCharacter(at) => match s.get(*at..).and_then(|rest| rest.chars().next()) {
            Some(c) => format!(
                "'{}' cannot be part of a duration",
                crate::text::printable(&c.to_string())
            ),
            None => "it is not a duration".into(),
        },
        E::NumberExpected(0) => "a duration starts with a number".into(),
        E::NumberExpected(at) => match s.get(*at..) {
            Some(rest) => format!(
                "a number is missing before '{}'",
                crate::text::printable(rest)
            ),
            None => "a number is missing".into(),
        },
        E::NumberOverflow => "it is too large, or finer than a nanosecond".into(),
        E::Empty => "empty duration".into(),
    }
}

/// Parses an RFC 3339 time such as `2026-01-15T08:05:00Z` or `2026-01-15T08:05:00+07:00`.
pub fn parse_time(s: &str) -> Result<SystemTime, String> {
    let s = s.trim();
    let bad = || format!("'{s}' is not an RFC 3339 time such as 2026-01-15T08:05:00+07:00");
    // humantime reads UTC times only; an offset is applied here.
    let (utc, offset_secs) = match s
        .len()
        .checked_sub(6)
        .and_then(|i| s.get(i..).map(|o| (i, o)))
    {
        Some((i, off))
            if (off.starts_with('+') || off.starts_with('-')) && off.as_bytes()[3] == b':' =>
        {
            let hours: i64 = off[1..3].parse().map_err(|_| bad())?;
            let minutes: i64 = off[4..6].parse().map_err(|_| bad())?;
            if hours > 23 || minutes > 59 {
                return Err(bad());
            }
            let sign = if off.starts_with('-') { -1 } else { 1 };
            (
                format!("{}Z", &s[..i]),
                sign * (hours * 3600 + minutes * 60),
            )
        }
        _ => (s.to_string(), 0),
    };
    let time =
        humantime::parse_rfc3339_weak(utc.trim_end_matches(['Z', 'z'])).map_err(|_| bad())?;
    let shift = Duration::from_secs(offset_secs.unsigned_abs());
    let shifted = if offset_secs >= 0 {
        time.checked_sub(shift)
    } else {
        time.checked_add(shift)
    };
    shifted.ok_or_else(bad)
}

/// Formats a duration as `retry` writes every duration it prints (the log, the dry run, errors),
/// in a form `retry` reads back: `412ms`, `1.204s`, `4m40.123s`, `2m05s`, `1h`, `1h00m05s`,
/// `3d04h`. It is rounded to the millisecond (below one, whole microseconds: `7µs`), and
/// milliseconds are kept at any length, so that the rows of a table add up. From a minute on,
/// the leading unit stands alone and the ones after it take two digits; units of zero at the end
/// are left out, so `-m 2m` reads back as `2m`. Days start at 48 hours.
pub fn hms(d: Duration) -> String {
    const MS: u128 = 1_000_000;
    let ms = (d.as_nanos() + MS / 2) / MS;
    if ms == 0 {
        return match d.as_micros() {
            0 if d.is_zero() => "0s".into(),
            0 => format!("{}ns", d.as_nanos()),
            us => format!("{us}µs"),
        };
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (total, ms) = (ms / 1000, ms % 1000);
    let s = total % 60;
    let mut units = units_above_seconds(total);
    let seconds_shown = s > 0 || ms > 0 || units.is_empty();
    if !seconds_shown {
        // Units of zero at the end are left out; the leading one always stays.
        while units.len() > 1 && units.last().is_some_and(|&(v, _)| v == 0) {
            units.pop();
        }
    }
    let mut out = String::new();
    for (i, (value, unit)) in units.iter().enumerate() {
        if i == 0 {
            out += &format!("{value}{unit}");
        } else {
            out += &format!("{value:02}{unit}");
        }
    }
    if seconds_shown {
        out += &seconds(s, ms, out.is_empty());
    }
    out
}

/// The units above seconds that `total` seconds are written in, each with its value: days,
/// hours and minutes from 48 hours on, hours and minutes from one hour, minutes from one.
fn units_above_seconds(total: u128) -> Vec<(u128, &'static str)> {
    let (days, h, m) = (total / 86400, total / 3600 % 24, total / 60 % 60);
    if total >= 48 * 3600 {
        vec![(days, "d"), (h, "h"), (m, "m")]
    } else if total >= 3600 {
        vec![(total / 3600, "h"), (m, "m")]
    } else if total >= 60 {
        vec![(m, "m")]
    } else {
        Vec::new()
    }
}

/// The seconds and milliseconds part: `5s`, `4.2s`; two digits of seconds after a larger unit
/// (`2m05s`), as many as there are when they `lead`.
fn seconds(s: u128, ms: u128, lead: bool) -> String {
    let fraction = format!("{ms:03}");
    let fraction = fraction.trim_end_matches('0');
    let secs = if lead {
        s.to_string()
    } else {
        format!("{s:02}")
    };
    if fraction.is_empty() {
        format!("{secs}s")
    } else {
        format!("{secs}.{fraction}s")
    }
}

/// Whole milliseconds, saturating, for JSON fields.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_humantime_forms_and_bare_seconds() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.000"), Ok(Duration::ZERO));
    }

    #[test]
    fn a_positive_duration_too_small_for_the_clock_rounds_up_not_to_zero() {
        assert_eq!(parse_duration("0.0000000001"), Ok(Duration::from_nanos(1)));
        assert_eq!(
            parse_duration("0.000000000000000000001"),
            Ok(Duration::from_nanos(1))
        );
        assert_eq!(parse_duration("0.0000000015"), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn rejects_negative_and_unparsable_durations() {
        for s in [
            "-1s", "-1", "abc", "", "1.2.3", ".", "1e3", "NaN", "inf", "1x",
        ] {
            assert!(parse_duration(s).is_err(), "{s}");
        }
        assert!(parse_duration("99999999999999999999999").is_err());
    }

    #[test]
    fn parses_rfc3339_with_offsets() {
        let utc = parse_time("2026-01-15T01:05:00Z").unwrap();
        assert_eq!(parse_time("2026-01-15T08:05:00+07:00"), Ok(utc));
        assert_eq!(parse_time("2026-01-14T20:05:00-05:00"), Ok(utc));
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2026-01-15T08:05:00+99:00").is_err());
        assert!(parse_time("2026-13-15T08:05:00Z").is_err());
    }

    #[test]
    fn formats_long_times_in_hours_minutes_and_seconds() {
        let ms = Duration::from_millis;
        assert_eq!(hms(ms(412)), "412ms");
        assert_eq!(hms(Duration::from_micros(7)), "7µs");
        assert_eq!(hms(ms(1204)), "1.204s");
        assert_eq!(hms(ms(59_999)), "59.999s");
        assert_eq!(hms(ms(60_000)), "1m");
        assert_eq!(hms(ms(122_000)), "2m02s");
        assert_eq!(hms(ms(280_123)), "4m40.123s");
        assert_eq!(hms(ms(280_500)), "4m40.5s");
        assert_eq!(hms(ms(600_000)), "10m");
        assert_eq!(hms(ms(3_600_000)), "1h");
        assert_eq!(hms(ms(3_720_000)), "1h02m");
        assert_eq!(hms(ms(3_605_000)), "1h00m05s");
        assert_eq!(hms(ms(3_600_001)), "1h00m00.001s");
        assert_eq!(hms(ms(47 * 3_600_000 + 59_000)), "47h00m59s");
        assert_eq!(hms(ms(48 * 3_600_000)), "2d");
        assert_eq!(hms(ms((3 * 24 + 4) * 3_600_000)), "3d04h");
        assert_eq!(hms(ms(86_400_000 * 2 + 1)), "2d00h00m00.001s");
        assert_eq!(hms(Duration::ZERO), "0s");
        assert!(hms(Duration::MAX).starts_with(&format!("{}d", u64::MAX / 86400)));
        // Rounded to the millisecond, the same way at every length.
        assert_eq!(hms(Duration::from_micros(151_600)), "152ms");
        assert_eq!(hms(Duration::from_micros(30_151_600)), "30.152s");
        assert_eq!(hms(Duration::from_micros(147_775_600)), "2m27.776s");
        assert_eq!(hms(Duration::from_micros(59_999_600)), "1m");
        assert_eq!(hms(Duration::from_micros(999_600)), "1s");
        assert_eq!(hms(Duration::from_micros(400)), "400µs");
        assert_eq!(hms(Duration::from_nanos(1)), "1ns");
    }

    #[test]
    fn what_is_written_reads_back_as_the_same_duration() {
        for d in [
            Duration::from_nanos(1),
            Duration::from_micros(7),
            Duration::from_millis(1204),
            Duration::from_secs(60),
            Duration::from_millis(280_123),
            Duration::from_secs(3_605),
            Duration::from_secs(3 * 86_400 + 4 * 3_600),
        ] {
            assert_eq!(parse_duration(&hms(d)), Ok(d), "{}", hms(d));
        }
    }
}
