//! `retry --stats FILE` (docs/flaky.md#history-and-statistics): what a history file says about each
//! step a team runs under `retry`, flakiest first, so that they see at a glance which steps to fix.
//!
//! One row per label, and one per command line for the runs that had no `--label`: its runs,
//! the share that succeeded on the first try, the share that was flaky (succeeded after a
//! failed try), the share that gave up, the mean tries, the median and 95th-percentile
//! duration, when it last failed, and a bar of its flaky share. Runs of `--repeat` reproduce a
//! flake rather than retry a command: they are counted apart, in no row. The aggregation
//! ([`summarise`]) is pure, over the entries read and a given `now`; [`print`] renders it as a
//! table sized to the terminal, or as JSON lines.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::duration::{hms, parse_time};
use crate::report::charset::{ascii_json, ascii_text};
use crate::report::json::Obj;
use crate::report::{layout, printable};
use crate::store::deadletter::Damaged;
use crate::store::history::{Ending, Entry, Reading};
use crate::text::{self, Charset, Mean, Share};

/// The cells of a row's bar of its flaky share.
const BAR_CELLS: u64 = 10;
/// The fewest columns the output is sized to, however narrow the terminal.
const MIN_WIDTH: usize = 40;
/// The fewest characters a name is cut to, however little room the other columns leave.
const MIN_NAME: usize = 16;
/// The damaged lines whose numbers the footer names.
const DAMAGED_NAMED: usize = 10;
/// The damaged lines whose numbers the JSON end names.
const DAMAGED_LISTED: usize = 100;

/// How `--stats` prints: `--since`, `--log-format json`, ASCII only, and the terminal's width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Only the runs that ended this long before `now`, or since.
    pub since: Option<Duration>,
    /// JSON lines (`--log-format json`) rather than the table.
    pub json: bool,
    /// ASCII only, for a locale that is not UTF-8: `#` and `.` for the bars, `...` for `…`.
    pub ascii: bool,
    /// The columns the table is sized to (at least 40).
    pub width: usize,
}

/// What a row gathers: the runs of one label, or of one command line run without a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum By {
    /// The runs given this `--label`.
    Label,
    /// The runs of this command line that had no label.
    Command,
}

impl By {
    /// The word of the JSON `by` field.
    pub fn word(self) -> &'static str {
        match self {
            By::Label => "label",
            By::Command => "command",
        }
    }
}

/// One row: the runs of one label or command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsRow {
    /// The label, or the command line quoted as a shell reads it back.
    pub name: String,
    pub by: By,
    pub runs: u64,
    /// Runs that succeeded on their first try.
    pub first_try: u64,
    /// Runs that succeeded after at least one failed try.
    pub flaky: u64,
    pub gave_up: u64,
    /// Runs that a signal to `retry` ended: counted in `runs`, in none of the shares.
    pub interrupted: u64,
    /// The tries of all its runs.
    pub tries: u64,
    /// The median and the 95th percentile of its runs' durations (nearest rank).
    pub median_ms: u64,
    pub p95_ms: u64,
    /// The `ts` of the latest run that had a failed try, if any did.
    pub last_failure: Option<String>,
    /// The machine its runs ran on, for a fleet's history on Redis: a row per label (or command
    /// line) and host.
    pub host: Option<String>,
}

impl StatsRow {
    /// `n` of its runs.
    fn share(&self, n: u64) -> Share {
        Share::new(n, self.runs)
    }

    /// The mean tries of its runs, to two decimals.
    pub fn mean_tries(&self) -> Mean {
        Mean::new(self.tries, self.runs, 2)
    }
}

/// What a history file says, over the runs kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Flakiest first.
    pub rows: Vec<StatsRow>,
    /// The runs in the rows.
    pub runs: u64,
    /// The runs of `--repeat` that were left out of the rows.
    pub repeat_runs: u64,
    /// The runs that `--lock` turned away, which ran nothing: left out of the rows.
    pub turned_away: u64,
    /// The runs whose `--once` key was done, which ran nothing: left out of the rows.
    pub done_before: u64,
    /// The runs that gave up before any try ran (the lock's Redis out of reach, a `--once`
    /// key bound to another command): left out of the rows, as they ran nothing.
    pub not_started: u64,
    /// When the earliest and the latest run in the rows ended.
    pub first: Option<SystemTime>,
    pub last: Option<SystemTime>,
    /// The earliest end kept, with `--since`.
    pub cutoff: Option<SystemTime>,
    /// When the summary was made: the `now` it was made as of.
    pub made: Option<SystemTime>,
}

impl Summary {
    /// Since when the runs it covers ended: the `--since` cutoff, or the earliest run's end.
    pub fn since(&self) -> Option<SystemTime> {
        self.cutoff.or(self.first)
    }
}

/// Summarises `entries` as of `now`: with `since`, only the runs whose `ts` is at or after
/// `now - since`. An entry whose `ts` is not an RFC 3339 time is left out (the reader counts
/// such a line as damaged, so none reaches here from a file).
pub fn summarise(entries: &[Entry], since: Option<Duration>, now: SystemTime) -> Summary {
    let cutoff = since.map(|s| now.checked_sub(s).unwrap_or(UNIX_EPOCH));
    let mut tally = Gathered::default();
    for entry in entries {
        let Ok(at) = parse_time(&entry.ts) else {
            continue;
        };
        if cutoff.is_some_and(|c| at < c) {
            continue;
        }
        tally.add(entry, at);
    }
    Summary {
        made: Some(now),
        ..tally.finish(cutoff)
    }
}

/// The runs gathered so far, by label and by command line.
#[derive(Default)]
struct Gathered<'a> {
    labels: HashMap<(&'a str, Option<&'a str>), Group<'a>>,
    commands: HashMap<(String, Option<&'a str>), Group<'a>>,
    repeat_runs: u64,
    turned_away: u64,
    done_before: u64,
    not_started: u64,
    first: Option<SystemTime>,
    last: Option<SystemTime>,
}

impl<'a> Gathered<'a> {
    /// Takes in a run that ended `at`.
    fn add(&mut self, entry: &'a Entry, at: SystemTime) {
        if entry.ending == Ending::Repeat {
            self.repeat_runs += 1;
            return;
        }
        if entry.ending == Ending::GaveUp && entry.reason.as_deref() == Some("locked") {
            self.turned_away += 1;
            return;
        }
        if entry.ending == Ending::DoneBefore {
            self.done_before += 1;
            return;
        }
        // No try ran, and none was held back: the run stopped before its command.
        if entry.ending == Ending::GaveUp && entry.try_outcomes.is_empty() && entry.tries == 0 {
            self.not_started += 1;
            return;
        }
        self.first = Some(self.first.map_or(at, |t| t.min(at)));
        self.last = Some(self.last.map_or(at, |t| t.max(at)));
        let host = entry.host.as_deref();
        let group = match &entry.label {
            Some(label) => self.labels.entry((label, host)).or_default(),
            None => {
                let line = text::command_line(&entry.command, Charset::Utf8);
                self.commands.entry((line, host)).or_default()
            }
        };
        group.add(entry, at);
    }

    /// The rows, flakiest first.
    fn finish(self, cutoff: Option<SystemTime>) -> Summary {
        let labels = self
            .labels
            .into_iter()
            .map(|((name, host), g)| g.row(name.to_string(), By::Label, host));
        let commands = self
            .commands
            .into_iter()
            .map(|((name, host), g)| g.row(name, By::Command, host));
        let mut rows: Vec<StatsRow> = labels.chain(commands).collect();
        rows.sort_by(flakiest_first);
        Summary {
            runs: rows.iter().map(|r| r.runs).sum(),
            rows,
            repeat_runs: self.repeat_runs,
            turned_away: self.turned_away,
            done_before: self.done_before,
            not_started: self.not_started,
            first: self.first,
            last: self.last,
            cutoff,
            made: None,
        }
    }
}

/// The runs of one row, gathered.
#[derive(Default)]
struct Group<'a> {
    runs: u64,
    first_try: u64,
    flaky: u64,
    gave_up: u64,
    interrupted: u64,
    tries: u64,
    durations: Vec<u64>,
    /// When the latest run with a failed try ended, and its `ts`.
    last_failure: Option<(SystemTime, &'a str)>,
}

impl<'a> Group<'a> {
    /// Takes in a run that ended `at`.
    fn add(&mut self, entry: &'a Entry, at: SystemTime) {
        self.runs += 1;
        match entry.ending {
            Ending::Success if entry.flaky => self.flaky += 1,
            // No try failed (a --consecutive streak that never broke has several tries);
            // a line written before `failed` was on every line: one try.
            Ending::Success if entry.failed.map_or(entry.tries == 1, |f| f == 0) => {
                self.first_try += 1
            }
            Ending::Success | Ending::Repeat | Ending::DoneBefore => {}
            Ending::GaveUp => self.gave_up += 1,
            Ending::Interrupted => self.interrupted += 1,
        }
        self.tries = self.tries.saturating_add(entry.tries);
        self.durations.push(entry.duration_ms);
        let later = self.last_failure.is_none_or(|(t, _)| at >= t);
        if failed_a_try(entry) && later {
            self.last_failure = Some((at, &entry.ts));
        }
    }

    /// The row of these runs, named `name`.
    fn row(mut self, name: String, by: By, host: Option<&str>) -> StatsRow {
        self.durations.sort_unstable();
        StatsRow {
            name,
            by,
            runs: self.runs,
            first_try: self.first_try,
            flaky: self.flaky,
            gave_up: self.gave_up,
            interrupted: self.interrupted,
            tries: self.tries,
            median_ms: nearest_rank(&self.durations, 50),
            p95_ms: nearest_rank(&self.durations, 95),
            last_failure: self.last_failure.map(|(_, ts)| ts.to_string()),
            host: host.map(str::to_string),
        }
    }
}

/// Whether a run had a try that failed: it was flaky, or it gave up after a try, or it was
/// interrupted after one (every try before the last of a run that did not succeed failed).
fn failed_a_try(entry: &Entry) -> bool {
    match entry.ending {
        Ending::Success => entry.flaky,
        Ending::GaveUp => entry.tries > 0,
        // Every try before the last failed, when the line does not count them.
        Ending::Interrupted => entry.failed.map_or(entry.tries > 1, |f| f > 0),
        Ending::Repeat | Ending::DoneBefore => false,
    }
}

/// The `percent`th percentile of `sorted` by nearest rank: the smallest value that at least
/// that share of the values are at or below; 0 of no values.
fn nearest_rank(sorted: &[u64], percent: usize) -> u64 {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(0)
}

/// The flakiest first: by flaky share, then gave-up share, then runs, all descending, then by
/// name. Shares are compared exactly, as products of whole numbers.
fn flakiest_first(a: &StatsRow, b: &StatsRow) -> Ordering {
    let by_share = |n: fn(&StatsRow) -> u64| {
        let (an, bn) = (u128::from(n(a)), u128::from(n(b)));
        (bn * u128::from(a.runs)).cmp(&(an * u128::from(b.runs)))
    };
    by_share(|r| r.flaky)
        .then_with(|| by_share(|r| r.gave_up))
        .then_with(|| b.runs.cmp(&a.runs))
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.host.cmp(&b.host))
        .then_with(|| a.by.cmp(&b.by))
}

/// Prints what `reading`, read from `file`, says as of `now`: the table, or JSON lines.
pub fn print(
    file: &Path,
    reading: &Reading,
    options: &Options,
    now: SystemTime,
    out: &mut dyn Write,
) -> io::Result<()> {
    let summary = summarise(&reading.entries, options.since, now);
    let lines = if options.json {
        json_lines(file, &summary, &reading.damaged, options.ascii)
    } else {
        human_lines(file, &summary, &reading.damaged, options)
    };
    lines.iter().try_for_each(|line| writeln!(out, "{line}"))
}

/// The human output: the header, the table and the footer, or one line when no run is kept.
/// ASCII only when `options.ascii`.
fn human_lines(
    file: &Path,
    summary: &Summary,
    damaged: &[Damaged],
    options: &Options,
) -> Vec<String> {
    let charset = Charset::ascii_if(options.ascii);
    let shown = text::quote(file.as_os_str(), charset);
    let mut lines = Vec::new();
    if summary.runs == 0 {
        lines.push(nothing_line(&shown, summary, options.since));
    } else {
        lines.extend(header(&shown, summary, options.since));
        lines.push(String::new());
        lines.extend(table(&summary.rows, options));
    }
    lines.extend(damaged_line(damaged));
    if options.ascii {
        return lines.iter().map(|l| ascii_text(l)).collect();
    }
    lines
}

/// `812 runs since 2026-02-22 17:42 (the last 7d) until 2026-03-01 17:40 UTC; made
/// 2026-03-01 17:42 UTC`: the runs kept, which ones, and when this was made.
fn runs_kept(summary: &Summary, since: Option<Duration>) -> String {
    let runs = match summary.runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let window = match (summary.since(), since) {
        (Some(from), Some(since)) => format!(" since {} (the last {})", minute(from), hms(since)),
        (Some(from), None) => format!(" since {}", minute(from)),
        _ => String::new(),
    };
    let until = summary
        .last
        .map(|last| format!(" until {} UTC", minute(last)))
        .unwrap_or_default();
    format!("{runs}{window}{until}{}", made(summary))
}

/// `; made 2026-03-01 17:42 UTC`: when the summary was made, if it says.
fn made(summary: &Summary) -> String {
    summary
        .made
        .map(|t| format!("; made {} UTC", minute(t)))
        .unwrap_or_default()
}

/// The header: the file, the runs kept and when they ended, when it was made; the runs of
/// `--repeat` left out; what `$` marks.
fn header(shown: &str, summary: &Summary, since: Option<Duration>) -> Vec<String> {
    let mut lines = vec![format!(
        "retry: stats of {shown}: {}",
        runs_kept(summary, since)
    )];
    lines.extend(left_out_notes(summary).map(|note| format!("  {note}")));
    if summary.rows.iter().any(|r| r.by == By::Command) {
        lines.push("  $ marks a command line: the runs that had no --label".into());
    }
    lines
}

/// What `n` runs left out of the rows were, if there were any: `what` names them, and `why`
/// says why, in the singular and the plural.
fn left_out_note(n: u64, what: &str, why: (&str, &str)) -> Option<String> {
    match n {
        0 => None,
        1 => Some(format!("1 run {what} left out: {}", why.0)),
        n => Some(format!("{n} runs {what} left out: {}", why.1)),
    }
}

/// What the runs left out of the rows were, one note for each kind there is: what they are, and
/// why they are left out.
fn left_out_notes(summary: &Summary) -> impl Iterator<Item = String> {
    [
        (
            summary.repeat_runs,
            "of --repeat",
            (
                "it reproduces a flake, it retries nothing",
                "they reproduce a flake, they retry nothing",
            ),
        ),
        (
            summary.turned_away,
            "turned away by --lock or --once",
            (
                "another run held the lock or key, it ran nothing",
                "another run held the lock or key, they ran nothing",
            ),
        ),
        (
            summary.done_before,
            "of --once",
            (
                "its key was done before, it ran nothing",
                "the key was done before, they ran nothing",
            ),
        ),
        (
            summary.not_started,
            "that gave up before a try",
            (
                "its lock could not be taken or retry failed, it ran nothing",
                "their lock could not be taken or retry failed, they ran nothing",
            ),
        ),
    ]
    .into_iter()
    .filter_map(|(n, what, why)| left_out_note(n, what, why))
}

/// The one line for a file, or a window, with no run in it.
fn nothing_line(shown: &str, summary: &Summary, since: Option<Duration>) -> String {
    let window = match (summary.cutoff, since) {
        (Some(cutoff), Some(since)) => {
            format!(" since {} (the last {})", minute(cutoff), hms(since))
        }
        _ => String::new(),
    };
    let repeats = left_out_notes(summary)
        .map(|note| format!("; {note}"))
        .collect::<String>();
    format!(
        "retry: stats of {shown}: no runs{window}{}{repeats}",
        made(summary)
    )
}

/// `3 damaged lines skipped: 12, 40, 41 (line 12: not JSON: ...)`, or `1 damaged line skipped:
/// line 12: not JSON: ...`, when there are any.
fn damaged_line(damaged: &[Damaged]) -> Option<String> {
    let first = damaged.first()?;
    let count = match damaged.len() {
        1 => {
            let why = format!("1 damaged line skipped: line {}: {}", first.line, first.why);
            return Some(printable(&why));
        }
        n => format!("{n} damaged lines"),
    };
    let mut numbers: Vec<String> = damaged
        .iter()
        .take(DAMAGED_NAMED)
        .map(|d| d.line.to_string())
        .collect();
    if damaged.len() > DAMAGED_NAMED {
        numbers.push("…".into());
    }
    Some(printable(&format!(
        "{count} skipped: {} (line {}: {})",
        numbers.join(", "),
        first.line,
        first.why
    )))
}

/// When, to the minute in UTC: `2026-03-01 17:42`. Times past what RFC 3339 writes are shown
/// as its first or last minute.
fn minute(t: SystemTime) -> String {
    let latest = UNIX_EPOCH + Duration::from_secs(253_402_300_799);
    let text = humantime::format_rfc3339_seconds(t.clamp(UNIX_EPOCH, latest)).to_string();
    text.get(..16).unwrap_or(&text).replacen('T', " ", 1)
}

/// When a run that ended at `ts` ended, to the minute; the text itself if it is no time.
fn minute_of(ts: &str) -> String {
    parse_time(ts).map_or_else(|_| ts.to_string(), minute)
}

/// The table's columns but the first, the name.
const COLUMNS: [&str; 9] = [
    "runs",
    "1st try",
    "flaky",
    "",
    "gave up",
    "tries",
    "median",
    "p95",
    "last failed",
];

/// The table: a row per label or command line, the names cut to what `options.width` leaves.
fn table(rows: &[StatsRow], options: &Options) -> Vec<String> {
    let cells: Vec<Vec<String>> = rows.iter().map(|r| cells(r, options.ascii)).collect();
    let others: usize = (0..COLUMNS.len())
        .map(|i| {
            let widest = cells.iter().map(|c| c[i].chars().count()).max();
            widest.unwrap_or(0).max(COLUMNS[i].chars().count()) + 2
        })
        .sum();
    let room = options
        .width
        .max(MIN_WIDTH)
        .saturating_sub(others)
        .max(MIN_NAME);
    let mut header = vec!["label or command"];
    header.extend(COLUMNS);
    let named: Vec<Vec<String>> = rows
        .iter()
        .zip(cells)
        .map(|(row, cells)| {
            let name = cut(&shown_name(row, options.ascii), room, options.ascii);
            std::iter::once(name).chain(cells).collect()
        })
        .collect();
    let lines = layout::table(&header, &named, 1);
    lines
        .into_iter()
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// A row's cells after its name.
fn cells(row: &StatsRow, ascii: bool) -> Vec<String> {
    vec![
        row.runs.to_string(),
        row.share(row.first_try).percent(),
        row.share(row.flaky).percent(),
        bar(row.share(row.flaky), ascii),
        row.share(row.gave_up).percent(),
        row.mean_tries().text(),
        duration(row.median_ms),
        duration(row.p95_ms),
        row.last_failure
            .as_deref()
            .map_or_else(|| "never".to_string(), minute_of),
    ]
}

/// The name as the table shows it: a label as it is, a command line after `$ `, either made
/// safe for a terminal (and ASCII when `ascii`).
fn shown_name(row: &StatsRow, ascii: bool) -> String {
    let mut name = match row.by {
        By::Label => printable(&row.name),
        By::Command => format!("$ {}", row.name),
    };
    if let Some(host) = &row.host {
        name = format!("{}: {name}", printable(host));
    }
    if ascii { ascii_text(&name) } else { name }
}

/// `name` cut to `room` characters, an ellipsis (`...` in ASCII) in place of what is cut, never
/// inside an escape.
fn cut(name: &str, room: usize, ascii: bool) -> String {
    text::cut(name, room, if ascii { "..." } else { "…" })
}

/// A duration as the table shows it: milliseconds below a second, tenths of a second below a
/// minute, whole seconds from there (`412ms`, `12.3s`, `2m05s`).
fn duration(ms: u64) -> String {
    let rounded = match ms {
        0..1_000 => ms,
        1_000..60_000 => (ms + 50) / 100 * 100,
        _ => ms.saturating_add(500) / 1000 * 1000,
    };
    hms(Duration::from_millis(rounded))
}

/// The bar of a flaky share: ten cells, as many full as the share fills (rounded; full or
/// empty only when all or none of the runs were flaky); `#` and `.` in ASCII.
fn bar(flaky: Share, ascii: bool) -> String {
    let full = flaky.cells(BAR_CELLS);
    let (on, off) = if ascii { ('#', '.') } else { ('█', '░') };
    let on = std::iter::repeat_n(on, full as usize);
    on.chain(std::iter::repeat_n(off, (BAR_CELLS - full) as usize))
        .collect()
}

/// The JSON lines: a `stats_row` per row, flakiest first, then `stats_end`.
fn json_lines(file: &Path, summary: &Summary, damaged: &[Damaged], ascii: bool) -> Vec<String> {
    let rows = summary.rows.iter().map(row_json);
    let lines = rows.chain([end_json(file, summary, damaged)]);
    lines
        .map(|obj| {
            let line = obj.finish();
            if ascii { ascii_json(&line) } else { line }
        })
        .collect()
}

/// The `stats_row` object of a row.
fn row_json(row: &StatsRow) -> Obj {
    let obj = Obj::new()
        .str("event", "stats_row")
        .str("name", &row.name)
        .str("by", row.by.word());
    let obj = match &row.host {
        Some(host) => obj.str("host", host),
        None => obj,
    };
    let obj = obj
        .num("runs", row.runs)
        .raw("first_try_pct", &row.share(row.first_try).json())
        .raw("flaky_pct", &row.share(row.flaky).json())
        .raw("gave_up_pct", &row.share(row.gave_up).json())
        .num("interrupted", row.interrupted)
        .raw("mean_tries", &row.mean_tries().json())
        .num("median_ms", row.median_ms)
        .num("p95_ms", row.p95_ms);
    match &row.last_failure {
        Some(ts) => obj.str("last_failure", ts),
        None => obj.raw("last_failure", "null"),
    }
}

/// A time as JSON: RFC 3339 in UTC with milliseconds, as a history's `ts`; `null` for none.
fn time_json(t: Option<SystemTime>) -> String {
    let latest = UNIX_EPOCH + Duration::from_secs(253_402_300_799);
    t.map_or_else(
        || "null".into(),
        |t| {
            format!(
                "\"{}\"",
                humantime::format_rfc3339_millis(t.clamp(UNIX_EPOCH, latest))
            )
        },
    )
}

/// The `stats_end` object: the file, the counts, and the first damaged lines' numbers.
fn end_json(file: &Path, summary: &Summary, damaged: &[Damaged]) -> Obj {
    let numbers: Vec<String> = damaged
        .iter()
        .take(DAMAGED_LISTED)
        .map(|d| d.line.to_string())
        .collect();
    Obj::new()
        .str("event", "stats_end")
        .word("file", file.as_os_str())
        .num("runs", summary.runs)
        .num("rows", summary.rows.len() as u64)
        .num("repeat_runs", summary.repeat_runs)
        .num("turned_away", summary.turned_away)
        .num("done_before", summary.done_before)
        .num("not_started", summary.not_started)
        .num("damaged", damaged.len() as u64)
        .raw("damaged_lines", &format!("[{}]", numbers.join(",")))
        .raw("since", &time_json(summary.since()))
        .raw("until", &time_json(summary.last))
        .raw("made", &time_json(summary.made))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Outcome;

    const NOW: &str = "2026-03-01T12:00:00Z";

    #[test]
    fn a_note_of_one_run_or_one_damaged_line_is_in_the_singular() {
        let summary = Summary {
            done_before: 1,
            repeat_runs: 3,
            ..Summary::default()
        };
        let notes: Vec<String> = left_out_notes(&summary).collect();
        assert_eq!(
            notes,
            [
                "3 runs of --repeat left out: they reproduce a flake, they retry nothing",
                "1 run of --once left out: its key was done before, it ran nothing",
            ]
        );
        let damaged = |line| Damaged {
            line,
            why: "not JSON".into(),
        };
        assert_eq!(
            damaged_line(&[damaged(4)]).unwrap(),
            "1 damaged line skipped: line 4: not JSON"
        );
        assert_eq!(
            damaged_line(&[damaged(4), damaged(7)]).unwrap(),
            "2 damaged lines skipped: 4, 7 (line 4: not JSON)"
        );
    }

    fn now() -> SystemTime {
        parse_time(NOW).unwrap()
    }

    /// A run of `label` (its command when `None`) that ended `ago` before [`NOW`].
    fn run(label: Option<&str>, ending: Ending, tries: u64, ms: u64, ago: Duration) -> Entry {
        let ts = humantime::format_rfc3339_millis(now() - ago).to_string();
        let flaky = ending == Ending::Success && tries > 1;
        let mut outcomes = vec![Outcome::Exit(1); tries as usize];
        if ending == Ending::Success {
            outcomes[tries as usize - 1] = Outcome::Exit(0);
        }
        Entry {
            id: format!("r{ms}"),
            ts,
            label: label.map(str::to_string),
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
            tries,
            ending,
            reason: (ending == Ending::GaveUp).then(|| "tries".into()),
            exit_code: u64::from(ending != Ending::Success),
            flaky,
            duration_ms: ms,
            try_outcomes: outcomes.into_iter().map(Some).collect(),
            failed: (ending == Ending::Repeat).then_some(0),
            host: None,
        }
    }

    fn hour(n: u64) -> Duration {
        Duration::from_secs(3600 * n)
    }

    fn ok(label: &str, tries: u64) -> Entry {
        run(Some(label), Ending::Success, tries, 1000, hour(1))
    }

    fn gave_up(label: &str) -> Entry {
        run(Some(label), Ending::GaveUp, 3, 1000, hour(1))
    }

    fn names(summary: &Summary) -> Vec<&str> {
        summary.rows.iter().map(|r| r.name.as_str()).collect()
    }

    fn options() -> Options {
        Options {
            since: None,
            json: false,
            ascii: false,
            width: 120,
        }
    }

    fn output(reading: &Reading, options: &Options) -> Vec<String> {
        let mut out = Vec::new();
        print(Path::new("h.jsonl"), reading, options, now(), &mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn reading(entries: Vec<Entry>) -> Reading {
        Reading {
            entries,
            damaged: Vec::new(),
        }
    }

    #[test]
    fn rows_are_flakiest_first_then_by_gave_up_share_then_by_runs() {
        let entries = vec![
            // a: 1 flaky of 4; b: 1 of 2; c: none flaky, 1 of 2 gave up; d, e: all fine.
            ok("a", 2),
            ok("a", 1),
            ok("a", 1),
            ok("a", 1),
            ok("b", 3),
            ok("b", 1),
            ok("c", 1),
            gave_up("c"),
            ok("d", 1),
            ok("d", 1),
            ok("e", 1),
            ok("d2", 1),
            ok("d2", 1),
        ];
        let summary = summarise(&entries, None, now());
        assert_eq!(names(&summary), ["b", "a", "c", "d", "d2", "e"]);
        assert_eq!(summary.runs, 13);
    }

    #[test]
    fn each_run_counts_in_one_share_and_an_interrupted_one_in_none() {
        let entries = vec![
            ok("x", 1),
            ok("x", 1),
            ok("x", 2),
            gave_up("x"),
            run(Some("x"), Ending::Interrupted, 1, 10, hour(1)),
            ok("x", 1),
        ];
        let summary = summarise(&entries, None, now());
        let row = &summary.rows[0];
        assert_eq!(
            (
                row.runs,
                row.first_try,
                row.flaky,
                row.gave_up,
                row.interrupted
            ),
            (6, 3, 1, 1, 1)
        );
        assert_eq!(row.tries, 9);
        let json = row_json(row).finish();
        assert_eq!(
            json,
            r#"{"event":"stats_row","name":"x","by":"label","runs":6,"first_try_pct":50,"flaky_pct":16.7,"gave_up_pct":16.7,"interrupted":1,"mean_tries":1.5,"median_ms":1000,"p95_ms":1000,"last_failure":"2026-03-01T11:00:00.000Z"}"#
        );
        let cells = cells(row, false);
        assert_eq!(&cells[1..3], ["50%", "16.7%"]);
    }

    #[test]
    fn median_and_95th_percentile_are_by_nearest_rank() {
        let entries: Vec<Entry> = (1..=20)
            .map(|k| run(Some("x"), Ending::Success, 1, k * 100, hour(1)))
            .collect();
        let row = &summarise(&entries, None, now()).rows[0];
        assert_eq!((row.median_ms, row.p95_ms), (1000, 1900));
        assert_eq!(nearest_rank(&[7], 95), 7);
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50), 2);
        assert_eq!(nearest_rank(&[], 50), 0);
        assert_eq!(duration(412), "412ms");
        assert_eq!(duration(12_345), "12.3s");
        assert_eq!(duration(125_400), "2m05s");
    }

    #[test]
    fn since_keeps_the_runs_that_ended_in_the_window_only() {
        let at = |ago| run(Some("x"), Ending::Success, 1, 10, ago);
        let entries = vec![
            at(hour(1)),
            at(hour(48)),
            at(hour(7 * 24)),
            at(hour(8 * 24)),
        ];
        let summary = summarise(&entries, Some(hour(7 * 24)), now());
        assert_eq!(summary.runs, 3);
        assert_eq!(summary.cutoff, Some(now() - hour(7 * 24)));
        assert_eq!(summarise(&entries, None, now()).runs, 4);
        let lines = output(
            &reading(entries),
            &Options {
                since: Some(hour(7 * 24)),
                ..options()
            },
        );
        assert_eq!(
            lines[0],
            "retry: stats of h.jsonl: 3 runs since 2026-02-22 12:00 (the last 7d) \
             until 2026-03-01 11:00 UTC; made 2026-03-01 12:00 UTC"
        );
    }

    #[test]
    fn runs_without_a_label_are_grouped_by_their_command_line() {
        let mut other = run(None, Ending::Success, 1, 10, hour(1));
        other.command = vec!["make".into(), "test".into()];
        let entries = vec![
            run(None, Ending::Success, 2, 10, hour(1)),
            run(None, Ending::Success, 1, 10, hour(2)),
            other,
            run(Some("sh -c 'exit 3'"), Ending::Success, 1, 10, hour(1)),
        ];
        let summary = summarise(&entries, None, now());
        let rows: Vec<(&str, By, u64)> = summary
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.by, r.runs))
            .collect();
        assert_eq!(
            rows,
            [
                ("sh -c 'exit 3'", By::Command, 2),
                ("make test", By::Command, 1),
                ("sh -c 'exit 3'", By::Label, 1),
            ]
        );
        let lines = output(&reading(entries), &options());
        assert_eq!(
            lines[1],
            "  $ marks a command line: the runs that had no --label"
        );
        assert!(lines[4].starts_with("$ sh -c 'exit 3'  "), "{lines:#?}");
        assert!(lines[6].starts_with("sh -c 'exit 3'    "), "{lines:#?}");
    }

    #[test]
    fn the_table_reads_as_a_table() {
        let entries = vec![
            run(Some("integration"), Ending::Success, 2, 12_345, hour(3)),
            run(Some("integration"), Ending::Success, 1, 2_000, hour(2)),
            run(Some("unit"), Ending::Success, 1, 412, hour(1)),
        ];
        assert_eq!(
            output(&reading(entries), &options()),
            [
                "retry: stats of h.jsonl: 3 runs since 2026-03-01 09:00 until 2026-03-01 11:00 UTC; made \
                 2026-03-01 12:00 UTC",
                "",
                "label or command  runs  1st try  flaky              gave up  tries  median    p95       last failed",
                "integration          2      50%    50%  █████░░░░░       0%   1.50      2s  12.3s  2026-03-01 09:00",
                "unit                 1     100%     0%  ░░░░░░░░░░       0%   1.00   412ms  412ms             never",
            ]
        );
    }

    #[test]
    fn damaged_lines_are_counted_and_named() {
        let mut r = reading(vec![ok("x", 1)]);
        r.damaged = [12, 40, 41]
            .into_iter()
            .map(|line| Damaged {
                line,
                why: "not JSON".into(),
            })
            .collect();
        let lines = output(&r, &options());
        assert_eq!(
            lines.last().unwrap(),
            "3 damaged lines skipped: 12, 40, 41 (line 12: not JSON)"
        );
        let json = output(
            &r,
            &Options {
                json: true,
                ..options()
            },
        );
        assert_eq!(
            json.last().unwrap(),
            r#"{"event":"stats_end","file":"h.jsonl","runs":1,"rows":1,"repeat_runs":0,"turned_away":0,"done_before":0,"not_started":0,"damaged":3,"damaged_lines":[12,40,41],"since":"2026-03-01T11:00:00.000Z","until":"2026-03-01T11:00:00.000Z","made":"2026-03-01T12:00:00.000Z"}"#
        );
        r.damaged = (1..=12)
            .map(|line| Damaged {
                line,
                why: "x\u{1b}[2J".into(),
            })
            .collect();
        let lines = output(&r, &options());
        assert_eq!(
            lines.last().unwrap(),
            "12 damaged lines skipped: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, … (line 1: x\\e[2J)"
        );
    }

    #[test]
    fn runs_that_gave_up_before_any_try_are_left_out_of_the_rows_and_counted() {
        let mut unreachable = run(Some("x"), Ending::GaveUp, 0, 0, hour(1));
        unreachable.reason = Some("lock_unreachable".into());
        unreachable.try_outcomes.clear();
        let entries = vec![ok("x", 1), unreachable];
        let summary = summarise(&entries, None, now());
        assert_eq!((summary.runs, summary.not_started), (1, 1));
        assert_eq!(summary.rows[0].gave_up, 0);
        let lines = output(&reading(entries), &options());
        assert_eq!(
            lines[1],
            "  1 run that gave up before a try left out: its lock could not be taken or retry \
             failed, it ran nothing"
        );
    }

    #[test]
    fn runs_turned_away_by_the_lock_are_left_out_of_the_rows_and_counted() {
        let mut turned_away = run(Some("x"), Ending::GaveUp, 0, 0, hour(1));
        turned_away.reason = Some("locked".into());
        let entries = vec![ok("x", 1), turned_away.clone(), turned_away];
        let summary = summarise(&entries, None, now());
        assert_eq!((summary.runs, summary.turned_away), (1, 2));
        assert_eq!(summary.rows[0].gave_up, 0);
        let lines = output(&reading(entries), &options());
        assert_eq!(
            lines[1],
            "  2 runs turned away by --lock or --once left out: another run held the lock or key, they ran nothing"
        );
    }

    #[test]
    fn repeat_runs_are_left_out_of_the_rows_and_counted() {
        let entries = vec![
            ok("x", 1),
            run(Some("x"), Ending::Repeat, 200, 10, hour(1)),
            run(Some("y"), Ending::Repeat, 5, 10, hour(1)),
        ];
        let summary = summarise(&entries, None, now());
        assert_eq!((summary.runs, summary.repeat_runs), (1, 2));
        assert_eq!(names(&summary), ["x"]);
        let lines = output(&reading(entries.clone()), &options());
        assert_eq!(
            lines[1],
            "  2 runs of --repeat left out: they reproduce a flake, they retry nothing"
        );
        let only_repeats = output(&reading(entries[1..].to_vec()), &options());
        assert_eq!(
            only_repeats,
            [
                "retry: stats of h.jsonl: no runs; made 2026-03-01 12:00 UTC; 2 runs of --repeat \
                 left out: they reproduce a flake, they retry nothing"
            ]
        );
    }

    #[test]
    fn no_runs_at_all_is_one_line() {
        assert_eq!(
            output(&reading(Vec::new()), &options()),
            ["retry: stats of h.jsonl: no runs; made 2026-03-01 12:00 UTC"]
        );
        let json = Options {
            json: true,
            ..options()
        };
        assert_eq!(
            output(&reading(Vec::new()), &json),
            [
                r#"{"event":"stats_end","file":"h.jsonl","runs":0,"rows":0,"repeat_runs":0,"turned_away":0,"done_before":0,"not_started":0,"damaged":0,"damaged_lines":[],"since":null,"until":null,"made":"2026-03-01T12:00:00.000Z"}"#
            ]
        );
    }

    #[test]
    fn the_bar_fills_with_the_flaky_share_in_either_charset() {
        let bar = |n, of, ascii| bar(Share::new(n, of), ascii);
        assert_eq!(bar(1, 4, false), "███░░░░░░░");
        assert_eq!(bar(1, 4, true), "###.......");
        assert_eq!(bar(1, 1000, false), "█░░░░░░░░░");
        assert_eq!(bar(0, 5, true), "..........");
        assert_eq!(bar(5, 5, true), "##########");
        assert_eq!(bar(995, 1000, true), "#########.");
    }

    #[test]
    fn a_long_name_is_cut_to_the_width() {
        let long = "deploy ".repeat(30);
        let entries = vec![ok(&long, 2)];
        for ascii in [false, true] {
            let lines = output(&reading(entries.clone()), &Options { ascii, ..options() });
            let table = &lines[2..];
            assert!(table.iter().all(|l| l.chars().count() <= 120), "{table:#?}");
            let ellipsis = if ascii { "... " } else { "… " };
            assert!(table[1].contains(ellipsis), "{table:#?}");
            assert!(lines.iter().all(|l| !ascii || l.is_ascii()), "{lines:#?}");
        }
        // However narrow the terminal, a name keeps a few characters.
        let narrow = Options {
            width: 10,
            ..options()
        };
        let lines = output(&reading(entries), &narrow);
        assert!(lines[3].starts_with("deploy deploy d… "), "{lines:#?}");
    }

    /// A row of `label` in which `flaky` of `runs` were flaky, the others first-try successes.
    fn flaky_of(label: &str, flaky: u64, runs: u64) -> Vec<Entry> {
        let flaky_runs = (0..flaky).map(|_| ok(label, 2));
        flaky_runs
            .chain((flaky..runs).map(|_| ok(label, 1)))
            .collect()
    }

    #[test]
    fn a_share_near_none_or_all_is_never_shown_as_none_or_all() {
        let cases = [
            (
                "one in 10000",
                1,
                10_000,
                "<0.1%",
                ">99.9%",
                "0.01",
                "99.99",
            ),
            (
                "all but 1",
                9_999,
                10_000,
                ">99.9%",
                "<0.1%",
                "99.99",
                "0.01",
            ),
            ("one in 2000", 1, 2000, "<0.1%", ">99.9%", "0.05", "99.95"),
            (
                "all but 1 of 2000",
                1999,
                2000,
                ">99.9%",
                "<0.1%",
                "99.95",
                "0.05",
            ),
        ];
        for (label, flaky, runs, flaky_text, first_text, flaky_json, first_json) in cases {
            let summary = summarise(&flaky_of(label, flaky, runs), None, now());
            let row = &summary.rows[0];
            let cells = cells(row, true);
            assert_eq!(
                (cells[1].as_str(), cells[2].as_str()),
                (first_text, flaky_text)
            );
            let full = cells[3].matches('#').count();
            assert!((1..=9).contains(&full), "{label}: {}", cells[3]);
            let json: serde_json::Value = serde_json::from_str(&row_json(row).finish()).unwrap();
            assert_eq!(json["flaky_pct"].to_string(), flaky_json, "{label}");
            assert_eq!(json["first_try_pct"].to_string(), first_json, "{label}");
        }
    }

    #[test]
    fn every_figure_is_rounded_alike_in_the_table_and_in_json() {
        // 9 tries in 8 runs: 1.125 tries, 1.13 both ways; 1 flaky of 8: 12.5%.
        let mut entries = flaky_of("x", 1, 8);
        entries.push(ok("y", 1));
        entries.extend([ok("y", 2), ok("y", 1)]);
        let summary = summarise(&entries, None, now());
        for row in &summary.rows {
            let cells = cells(row, false);
            let json: serde_json::Value = serde_json::from_str(&row_json(row).finish()).unwrap();
            let shown = |cell: &str| cell.trim_end_matches('%').parse::<f64>().unwrap();
            assert_eq!(shown(&cells[1]), json["first_try_pct"].as_f64().unwrap());
            assert_eq!(shown(&cells[2]), json["flaky_pct"].as_f64().unwrap());
            assert_eq!(shown(&cells[4]), json["gave_up_pct"].as_f64().unwrap());
            assert_eq!(shown(&cells[5]), json["mean_tries"].as_f64().unwrap());
        }
        let x = summary.rows.iter().find(|r| r.name == "x").unwrap();
        assert_eq!(cells(x, false)[5], "1.13");
        assert_eq!(cells(x, false)[2], "12.5%");
        let y = summary.rows.iter().find(|r| r.name == "y").unwrap();
        assert_eq!(cells(y, false)[1..3], ["66.7%", "33.3%"]);
    }

    #[test]
    fn a_name_is_cut_whole_escapes_and_invisible_characters_are_escaped() {
        let narrow = Options {
            width: 10,
            ..options()
        };
        let entries = vec![ok("zero\u{200b}width and a long tail", 1)];
        let lines = output(&reading(entries), &narrow);
        assert!(lines[3].starts_with("zero…  "), "{lines:#?}");
        let entries = vec![ok("tag\u{e0041}\u{ad}", 1)];
        let lines = output(&reading(entries), &options());
        assert!(
            lines[3].starts_with(r"tag\xf3\xa0\x81\x81\xc2\xad "),
            "{lines:#?}"
        );
    }
}
