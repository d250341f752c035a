//! HTTP-dates (docs/herd.md#pushback): the moments that `Retry-After` and `Date:` name, in the
//! three forms HTTP accepts, IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and the obsolete
//! RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms;
//! and the wait until such a moment, by the clock it is measured against.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A moment an HTTP-date names, to the second: seconds since 1970-01-01 00:00:00 UTC (negative
/// before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HttpDate(i64);

/// What a wait until an HTTP-date was measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// The `Date:` line of the same output: the clock of the server that answered.
    Server,
    /// The clock of the machine `retry` runs on.
    Local,
}

impl TimeSource {
    /// The `clock` field of the JSON log.
    pub fn word(self) -> &'static str {
        match self {
            TimeSource::Server => "server",
            TimeSource::Local => "local",
        }
    }
}

/// Why a text is no HTTP-date.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DateError {
    /// It does not begin as an HTTP-date does, with the name of a day of the week.
    NotADate,
    /// It begins as one, but is not one: why, on one line.
    Malformed(String),
}

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

const IMF_FIXDATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const RFC_850: &str = "Sunday, 06-Nov-94 08:49:37 GMT";
const ASCTIME: &str = "Sun Nov  6 08:49:37 1994";

const DAY_SECS: i64 = 86_400;

/// A date as written: its fields before they are checked against each other.
struct Fields {
    weekday: usize,
    day: u32,
    /// 1 to 12.
    month: u32,
    year: Year,
    hour: u32,
    minute: u32,
    second: u32,
}

enum Year {
    Full(i64),
    /// RFC 850's two digits: the century is to be chosen.
    TwoDigits(i64),
}

/// The text still to be read, and the reading of its parts, all or nothing.
struct Cursor<'a>(&'a str);

impl Cursor<'_> {
    /// Takes `word` if the text goes on with it (case counts, as in HTTP).
    fn word(&mut self, word: &str) -> Option<()> {
        self.0 = self.0.strip_prefix(word)?;
        Some(())
    }

    /// Takes the first of `words` that the text goes on with: its index.
    fn one_of(&mut self, words: &[&str]) -> Option<usize> {
        let i = words.iter().position(|w| self.0.starts_with(w))?;
        self.0 = &self.0[words[i].len()..];
        Some(i)
    }

    /// Takes exactly `n` ASCII digits.
    fn digits(&mut self, n: usize) -> Option<u32> {
        let head = self.0.get(..n)?;
        if !head.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        self.0 = &self.0[n..];
        head.parse().ok()
    }

    /// `hh:mm:ss`.
    fn time(&mut self) -> Option<(u32, u32, u32)> {
        let hour = self.digits(2)?;
        self.word(":")?;
        let minute = self.digits(2)?;
        self.word(":")?;
        Some((hour, minute, self.digits(2)?))
    }

    fn done(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`, after the day's name.
fn imf_fixdate(c: &mut Cursor<'_>, weekday: usize) -> Option<Fields> {
    day_first(c, weekday, " ", 4)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`, after the day's name.
fn rfc850(c: &mut Cursor<'_>, weekday: usize) -> Option<Fields> {
    day_first(c, weekday, "-", 2)
}

/// The two forms that give the day before the month: `, DD` `sep` `Mon` `sep` a year of
/// `year_digits` digits, then the time and `GMT`.
fn day_first(c: &mut Cursor<'_>, weekday: usize, sep: &str, year_digits: usize) -> Option<Fields> {
    c.word(", ")?;
    let day = c.digits(2)?;
    c.word(sep)?;
    let month = c.one_of(&MONTHS)?;
    c.word(sep)?;
    let year = i64::from(c.digits(year_digits)?);
    c.word(" ")?;
    let (hour, minute, second) = c.time()?;
    c.word(" GMT")?;
    c.done()?;
    Some(Fields {
        weekday,
        day,
        month: month as u32 + 1,
        year: match year_digits {
            2 => Year::TwoDigits(year),
            _ => Year::Full(year),
        },
        hour,
        minute,
        second,
    })
}

/// `Sun Nov  6 08:49:37 1994` (or `Nov 16`), after the day's name.
fn asctime(c: &mut Cursor<'_>, weekday: usize) -> Option<Fields> {
    c.word(" ")?;
    let month = c.one_of(&MONTHS)?;
    c.word(" ")?;
    let day = match c.word(" ") {
        Some(()) => c.digits(1)?,
        None => c.digits(2)?,
    };
    c.word(" ")?;
    let (hour, minute, second) = c.time()?;
    c.word(" ")?;
    let year = c.digits(4)?;
    c.done()?;
    Some(Fields {
        weekday,
        day,
        month: month as u32 + 1,
        year: Year::Full(i64::from(year)),
        hour,
        minute,
        second,
    })
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a day of the proleptic Gregorian calendar (month 1 to 12).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Years counted from March, so that the leap day ends a year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = i64::from(month);
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The day (year, month 1 to 12, day) that is `days` after 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day of the week of a day `days` after 1970-01-01, a Thursday: 0 for Monday.
fn weekday(days: i64) -> usize {
    (days + 3).rem_euclid(7) as usize
}

/// RFC 850's two-digit year, read as HTTP says (RFC 9110, section 5.6.7): a date that would be
/// more than 50 years after `now` is in the century before. So the year is the latest one
/// with these two digits that puts the date at most 50 years ahead.
fn full_year(two_digits: i64, f: &Fields, now: HttpDate) -> i64 {
    let now_days = now.0.div_euclid(DAY_SECS);
    let (now_year, now_month, now_day) = civil_from_days(now_days);
    let limit = now_year + 50;
    let year = limit - (limit - two_digits).rem_euclid(100);
    let when = (f.month, f.day, f.hour, f.minute, f.second);
    let now_secs = now.0.rem_euclid(DAY_SECS);
    let now_time = (now_secs / 3600, now_secs / 60 % 60, now_secs % 60);
    let at_limit = (
        now_month,
        now_day,
        now_time.0 as u32,
        now_time.1 as u32,
        now_time.2 as u32,
    );
    if year == limit && when > at_limit {
        year - 100
    } else {
        year
    }
}

/// Checks the fields against each other and the calendar: the moment they name.
fn moment(f: &Fields, now: HttpDate) -> Result<HttpDate, String> {
    let year = match f.year {
        Year::Full(year) => year,
        Year::TwoDigits(yy) => full_year(yy, f, now),
    };
    if f.hour > 23 || f.minute > 59 || f.second > 60 {
        return Err(format!(
            "the time {:02}:{:02}:{:02} is out of range",
            f.hour, f.minute, f.second
        ));
    }
    // A leap second ends a day only; it is the next day's first second.
    if f.second == 60 && (f.hour, f.minute) != (23, 59) {
        return Err(format!(
            "a leap second ends a day, not {:02}:{:02}",
            f.hour, f.minute
        ));
    }
    let month = MONTHS[f.month as usize - 1];
    if f.day == 0 || f.day > days_in_month(year, f.month) {
        return Err(format!("{month} {year} has no day {}", f.day));
    }
    let days = days_from_civil(year, f.month, f.day);
    if weekday(days) != f.weekday {
        return Err(format!(
            "{:02} {month} {year} is a {}, not a {}",
            f.day,
            LONG_DAYS[weekday(days)],
            LONG_DAYS[f.weekday]
        ));
    }
    let secs =
        days * DAY_SECS + i64::from(f.hour) * 3600 + i64::from(f.minute) * 60 + i64::from(f.second);
    Ok(HttpDate(secs))
}

impl HttpDate {
    /// Reads an HTTP-date in any of its three forms, exactly as HTTP writes them (names in
    /// their case, `GMT`, the spaces where they go). `now` places RFC 850's two-digit year.
    /// The day of the week must be the date's: a date whose day name disagrees with it is
    /// refused, as a sign of a broken writer rather than a moment to wait for.
    pub fn parse(text: &str, now: HttpDate) -> Result<HttpDate, DateError> {
        let mut c = Cursor(text);
        let (fields, form) = if let Some(weekday) = c.one_of(&LONG_DAYS) {
            (rfc850(&mut c, weekday), RFC_850)
        } else if let Some(weekday) = c.one_of(&DAYS) {
            if c.0.starts_with(',') {
                (imf_fixdate(&mut c, weekday), IMF_FIXDATE)
            } else {
                (asctime(&mut c, weekday), ASCTIME)
            }
        } else {
            return Err(DateError::NotADate);
        };
        let fields =
            fields.ok_or_else(|| DateError::Malformed(format!("not laid out as {form}")))?;
        moment(&fields, now).map_err(DateError::Malformed)
    }

    /// The moment `at` is, to the second (rounded down).
    pub fn from_system(at: SystemTime) -> HttpDate {
        let secs = match at.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            Err(before) => {
                let d = before.duration();
                let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                // Rounded down: 0.5 s before the epoch is in the second before it.
                -whole - i64::from(d.subsec_nanos() > 0)
            }
        };
        HttpDate(secs)
    }

    /// The wait from `earlier` until this moment; none when it is not later.
    pub fn since(self, earlier: HttpDate) -> Duration {
        let secs = self.0.saturating_sub(earlier.0);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// The wait from `now`, by the local clock, until this moment; none when it has passed.
    pub fn after(self, now: SystemTime) -> Duration {
        let magnitude = Duration::from_secs(self.0.unsigned_abs());
        let at = if self.0 >= 0 {
            UNIX_EPOCH.checked_add(magnitude)
        } else {
            UNIX_EPOCH.checked_sub(magnitude)
        };
        // A moment the system's time cannot hold is past any wait worth having.
        match at {
            Some(at) => at.duration_since(now).unwrap_or(Duration::ZERO),
            None if self.0 > 0 => Duration::MAX,
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2025-06-15 12:00:00 UTC, a Sunday.
    const NOW: HttpDate = HttpDate(1_749_988_800);

    fn parse(text: &str) -> Result<HttpDate, DateError> {
        HttpDate::parse(text, NOW)
    }

    fn why(text: &str) -> String {
        match parse(text) {
            Err(DateError::Malformed(why)) => why,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    /// The example of RFC 9110: 1994-11-06 08:49:37 UTC.
    const EXAMPLE: HttpDate = HttpDate(784_111_777);

    #[test]
    fn the_three_forms_name_the_same_moment() {
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Ok(EXAMPLE));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), Ok(EXAMPLE));
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), Ok(EXAMPLE));
        assert_eq!(
            parse("Thu Nov 17 08:49:37 1994"),
            Ok(HttpDate(EXAMPLE.0 + 11 * DAY_SECS))
        );
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), Ok(HttpDate(0)));
        assert_eq!(parse("Wed, 31 Dec 1969 23:59:59 GMT"), Ok(HttpDate(-1)));
        assert_eq!(
            parse("Wed, 21 Oct 2015 07:28:00 GMT"),
            Ok(HttpDate(1_445_412_480))
        );
    }

    #[test]
    fn the_calendar_round_trips_over_centuries() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(weekday(0), 3, "1970-01-01 was a Thursday");
    }

    #[test]
    fn leap_years_have_a_29th_of_february_and_others_do_not() {
        assert!(parse("Thu, 29 Feb 2024 00:00:00 GMT").is_ok());
        assert!(
            parse("Tue, 29 Feb 2000 00:00:00 GMT").is_ok(),
            "divisible by 400"
        );
        assert_eq!(
            why("Thu, 29 Feb 2100 00:00:00 GMT"),
            "Feb 2100 has no day 29",
            "divisible by 100, not by 400"
        );
        assert_eq!(
            why("Sat, 29 Feb 2025 00:00:00 GMT"),
            "Feb 2025 has no day 29"
        );
        assert_eq!(
            parse("Sat, 01 Mar 2025 00:00:00 GMT")
                .unwrap()
                .since(parse("Fri, 28 Feb 2025 00:00:00 GMT").unwrap()),
            Duration::from_secs(86_400)
        );
    }

    #[test]
    fn fields_out_of_range_are_refused() {
        assert_eq!(
            why("Sun, 31 Nov 1994 08:49:37 GMT"),
            "Nov 1994 has no day 31"
        );
        assert_eq!(
            why("Sun, 00 Nov 1994 08:49:37 GMT"),
            "Nov 1994 has no day 0"
        );
        assert!(why("Sun, 06 Nov 1994 24:00:00 GMT").contains("out of range"));
        assert!(why("Sun, 06 Nov 1994 08:60:00 GMT").contains("out of range"));
        assert!(why("Sun, 06 Nov 1994 08:49:61 GMT").contains("out of range"));
        assert!(why("Sun, 06 Nov 1994 08:49:60 GMT").contains("leap second"));
        // 23:59:60 is the next day's first second.
        assert_eq!(
            parse("Wed, 31 Dec 2008 23:59:60 GMT"),
            parse("Thu, 01 Jan 2009 00:00:00 GMT")
        );
        assert!(why("Sun, 06 Foo 1994 08:49:37 GMT").contains("not laid out"));
    }

    #[test]
    fn a_day_name_that_disagrees_with_the_date_is_refused() {
        assert_eq!(
            why("Mon, 06 Nov 1994 08:49:37 GMT"),
            "06 Nov 1994 is a Sunday, not a Monday"
        );
        assert!(why("Monday, 06-Nov-94 08:49:37 GMT").contains("is a Sunday"));
        assert!(why("Sat Nov  6 08:49:37 1994").contains("not a Saturday"));
    }

    #[test]
    fn bad_day_names_and_garbage_are_no_date() {
        for text in [
            "",
            "30",
            "soon",
            "Sonntag, 06 Nov 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "06 Nov 1994 08:49:37 GMT",
            "1994-11-06T08:49:37Z",
        ] {
            assert_eq!(parse(text), Err(DateError::NotADate), "{text:?}");
        }
        for text in [
            "Sun",
            "Sun,",
            "Sunday",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 GMT and more",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sunday, 06 Nov 1994 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov 06 08:49:37 1994 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{e9}",
            "Sun, ０６ Nov 1994 08:49:37 GMT",
        ] {
            assert!(why(text).starts_with("not laid out as "), "{text:?}");
        }
        assert!(why("Sun Nov 6").contains(ASCTIME));
        assert!(why("Sunday, 06 Nov").contains(RFC_850));
        assert!(why("Sun, 06-Nov-94").contains(IMF_FIXDATE));
    }

    #[test]
    fn asctime_takes_a_day_of_two_digits_too() {
        assert_eq!(parse("Sun Nov 06 08:49:37 1994"), Ok(EXAMPLE));
    }

    #[test]
    fn a_two_digit_year_more_than_50_years_ahead_is_in_the_century_before() {
        let year = |text: &str| {
            let at = parse(text).unwrap();
            civil_from_days(at.0.div_euclid(DAY_SECS)).0
        };
        // Now is 2025-06-15 12:00:00.
        assert_eq!(year("Sunday, 06-Nov-94 08:49:37 GMT"), 1994);
        assert_eq!(year("Sunday, 15-Jun-25 12:00:00 GMT"), 2025);
        assert_eq!(year("Saturday, 01-Jan-00 00:00:00 GMT"), 2000);
        assert_eq!(
            year("Saturday, 15-Jun-75 12:00:00 GMT"),
            2075,
            "50 years ahead"
        );
        assert_eq!(
            year("Sunday, 15-Jun-75 12:00:01 GMT"),
            1975,
            "a second more than 50 years ahead"
        );
        assert_eq!(year("Thursday, 01-Jan-76 00:00:00 GMT"), 1976);
        assert_eq!(year("Wednesday, 01-Jan-70 00:00:00 GMT"), 2070);
        // The day of the week is checked in the century chosen: 1970-01-01 was a Thursday.
        assert!(why("Thursday, 01-Jan-70 00:00:00 GMT").contains("is a Wednesday"));
        // Seen from 2090, `10` is 2110, not 2010.
        let later = parse("Sun, 15 Jan 2090 00:00:00 GMT").unwrap();
        let at = HttpDate::parse("Wednesday, 01-Jan-10 00:00:00 GMT", later).unwrap();
        assert_eq!(civil_from_days(at.0.div_euclid(DAY_SECS)).0, 2110);
    }

    #[test]
    fn waits_until_a_moment_by_either_clock() {
        let date = parse("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let server = parse("Sun, 06 Nov 1994 08:49:07 GMT").unwrap();
        assert_eq!(date.since(server), Duration::from_secs(30));
        assert_eq!(server.since(date), Duration::ZERO, "a moment past");
        let now = UNIX_EPOCH + Duration::from_millis(784_111_775_250);
        assert_eq!(date.after(now), Duration::from_millis(1750));
        assert_eq!(
            date.after(now + Duration::from_secs(10)),
            Duration::ZERO,
            "a moment past"
        );
        assert_eq!(HttpDate::from_system(now), HttpDate(784_111_775));
        assert_eq!(
            HttpDate::from_system(UNIX_EPOCH - Duration::from_millis(500)),
            HttpDate(-1)
        );
        assert_eq!(HttpDate(-5).after(UNIX_EPOCH), Duration::ZERO);
        assert_eq!(HttpDate(i64::MIN).after(UNIX_EPOCH), Duration::ZERO);
        assert_eq!(
            HttpDate(i64::MAX).since(HttpDate(i64::MIN)),
            Duration::from_secs(u64::MAX / 2)
        );
    }
}
