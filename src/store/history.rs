//! The history file (docs/flaky.md#history-and-statistics): one JSON line for every run of `retry`,
//! whatever its end, which `retry --stats` reads back to show which commands flake. The lines are
//! appended as dead letters are (`record::append`: one write under an exclusive lock, a write
//! cut short cut back) to a file opened by the rules of docs/files.md#files-that-outlive-a-run;
//! this module holds the line's format, its writer and its reader.
//!
//! A line, its fields in this order:
//!
//! `{"event":"run","id":..,"ts":..,"label":..,"command":[..],"tries":..,"outcome":..,
//! "reason":..,"exit_code":..,"flaky":..,"duration_ms":..,"try_outcomes":[..]}`
//!
//! - `ts`: when the run ended, RFC 3339 in UTC with milliseconds;
//! - `label`: its `--label`, or `null`;
//! - `command`: its words as dead letters write them (a string when UTF-8, else
//!   `{"base64":".."}`);
//! - `outcome`: `success`, `gave_up`, `interrupted`, or `repeat` for a run of `--repeat`;
//! - `reason`: why it gave up (`permanent`, `tries`, `budget`, `quota`, `input`,
//!   `interrupted`), `null` when it did not;
//! - `exit_code`: the run's own exit status (128+N for a signal);
//! - `flaky`: whether it succeeded after at least one failed try;
//! - `try_outcomes`: how each try ended, as the JSON log's `outcome` field writes it
//!   (`{"exit":3}`, `{"signal":"KILL"}`, `{"timeout":true}`, `{"not_found":true}`,
//!   `{"not_executable":true}`, `{"no_resources":true}`), and `{"held":true}` for a try that
//!   `--throttle` held back;
//! - `failed`: the number of its tries that ran and failed (lines written before it was added
//!   have it only for `repeat`).
//!
//! A `repeat` line has `flaky` false and `reason` null. Fields are added over time, never
//! renamed: the reader ignores the fields it does not know.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use nix::fcntl::{self, FlockArg, OFlag};
use nix::sys::stat::Mode;

use crate::json::{self, Obj, Value};
use crate::policy::{Outcome, Signal};
use crate::store::deadletter::{Damaged, MAX_FILE};
use crate::store::lines::{Line, Lines, MAX_LINE};
use crate::store::lock::flock_within;
use crate::store::open::check_type;
use crate::store::record::{LOCK_WAIT, run_head};

/// How a run ended, as its history line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// A try succeeded.
    Success,
    /// The run gave up; its `reason` says why.
    GaveUp,
    /// A signal to `retry` (Ctrl-C) ended it.
    Interrupted,
    /// A run of `--repeat`, which tries again to reproduce a flake rather than to succeed.
    Repeat,
    /// `--once`'s key was done: the command did not run.
    DoneBefore,
}

impl Ending {
    /// The word of the `outcome` field.
    pub fn word(self) -> &'static str {
        match self {
            Ending::Success => "success",
            Ending::GaveUp => "gave_up",
            Ending::Interrupted => "interrupted",
            Ending::Repeat => "repeat",
            Ending::DoneBefore => "done_before",
        }
    }

    /// The ending that the `outcome` field's word names.
    pub fn from_word(word: &str) -> Option<Ending> {
        [
            Ending::Success,
            Ending::GaveUp,
            Ending::Interrupted,
            Ending::Repeat,
            Ending::DoneBefore,
        ]
        .into_iter()
        .find(|e| e.word() == word)
    }
}

/// One run, as its history line records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The run's id (`RETRY_RUN_ID`).
    pub id: String,
    /// When the run ended, RFC 3339 in UTC with milliseconds (`record::ts`).
    pub ts: String,
    pub label: Option<String>,
    pub command: Vec<OsString>,
    pub tries: u64,
    /// How it ended: the `outcome` field.
    pub ending: Ending,
    /// Why it gave up (`permanent`, `tries`, `budget`, `quota`, `input`, `interrupted`);
    /// `None` for a run that did not.
    pub reason: Option<String>,
    /// The run's own exit status (128+N for a signal).
    pub exit_code: u64,
    /// Whether it succeeded after at least one failed try.
    pub flaky: bool,
    pub duration_ms: u64,
    /// How each of its tries ended, in order; `None` for a try that `--throttle` held back.
    pub try_outcomes: Vec<Option<Outcome>>,
    /// How many of its tries ran and failed: on every line `retry` writes now, and read from a
    /// `--repeat` line (older lines of other runs may lack it).
    pub failed: Option<u64>,
    /// The machine it ran on, when the history is a fleet's on Redis (not in the line: the
    /// stream keeps it beside it).
    pub host: Option<String>,
}

impl Entry {
    /// Its line in the file, without the line break.
    pub fn line(&self) -> String {
        let obj = run_head("run", &self.id, &self.ts, self.label.as_deref())
            .words("command", self.command.iter().map(OsString::as_os_str))
            .num("tries", self.tries)
            .str("outcome", self.ending.word());
        let obj = match &self.reason {
            Some(reason) => obj.str("reason", reason),
            None => obj.raw("reason", "null"),
        };
        let obj = obj
            .num("exit_code", self.exit_code)
            .bool("flaky", self.flaky)
            .num("duration_ms", self.duration_ms)
            .raw("try_outcomes", &outcomes_json(&self.try_outcomes));
        match self.failed {
            Some(failed) => obj.num("failed", failed),
            None => obj,
        }
        .finish()
    }
}

/// The try outcomes as a JSON array, each as the JSON log writes a try's `outcome`.
fn outcomes_json(outcomes: &[Option<Outcome>]) -> String {
    let objects: Vec<String> = outcomes
        .iter()
        .map(|&o| match o {
            Some(o) => outcome_obj(o).finish(),
            None => Obj::new().bool("held", true).finish(),
        })
        .collect();
    format!("[{}]", objects.join(","))
}

/// One try's outcome as the JSON log's `outcome` field writes it (docs/json-log.md#the-json-log),
/// and the history's `try_outcomes`: the log writes it with this too.
pub fn outcome_obj(outcome: Outcome) -> Obj {
    match outcome {
        Outcome::Exit(code) => Obj::new().num("exit", code),
        Outcome::Signal(s) => Obj::new().str("signal", &s.name()),
        Outcome::Timeout => Obj::new().bool("timeout", true),
        Outcome::NotFound => Obj::new().bool("not_found", true),
        Outcome::NotExecutable => Obj::new().bool("not_executable", true),
        Outcome::NoResources => Obj::new().bool("no_resources", true),
    }
}

/// The outcomes that are written as a flag, `{"timeout":true}`, with their key.
const FLAGS: [(&str, Outcome); 4] = [
    ("timeout", Outcome::Timeout),
    ("not_found", Outcome::NotFound),
    ("not_executable", Outcome::NotExecutable),
    ("no_resources", Outcome::NoResources),
];

/// A try's outcome read back from its object; a signal by its name, or by its number for one
/// without a name. Fields it does not know are ignored.
fn outcome_of(value: &Value) -> Option<Outcome> {
    if let Some(code) = value.get("exit") {
        return code
            .as_u64()
            .and_then(|c| u8::try_from(c).ok())
            .map(Outcome::Exit);
    }
    if let Some(name) = value.get("signal") {
        return name.as_str()?.parse::<Signal>().ok().map(Outcome::Signal);
    }
    FLAGS
        .into_iter()
        .find(|(key, _)| value.get(key) == Some(&Value::Bool(true)))
        .map(|(_, outcome)| outcome)
}

/// What a history file holds: its runs in the order they were written, and the lines that are
/// not runs `retry` wrote, which were skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub entries: Vec<Entry>,
    /// Each damaged line's number (from 1) and what is wrong with it, in order.
    pub damaged: Vec<Damaged>,
}

/// The runs of what `input` reads, in one pass and time linear in its size. Blank lines are
/// skipped. A line that is not a run's line as `retry` writes it (not UTF-8, not JSON, cut
/// short, not an object with `"event":"run"`, a field missing or of the wrong type, a time
/// that is not RFC 3339) is damaged: named in `damaged` and skipped, never fatal. A line over
/// [`MAX_LINE`] bytes is damaged too, and is skipped without being kept in memory. Only a
/// failure to read is an error.
pub fn read_from(input: impl BufRead) -> io::Result<Reading> {
    let mut reading = Reading::default();
    let mut lines = Lines::new(input);
    while let Some((line, text)) = lines.next_line()? {
        let read = match text {
            Line::Blank => continue,
            Line::Text(text) => read_line(text),
            Line::CutShort => Err(CUT_SHORT.into()),
            Line::NotUtf8 => Err("it is not UTF-8".into()),
            Line::TooLong => Err(format!(
                "it is longer than {} MiB: no run's line is",
                MAX_LINE >> 20
            )),
        };
        match read {
            Ok(entry) => reading.entries.push(entry),
            Err(why) => reading.damaged.push(Damaged { line, why }),
        }
    }
    Ok(reading)
}

/// The run that one line of text (without its line break) records, or what is wrong with it.
fn read_line(text: &str) -> Result<Entry, String> {
    let value = match json::parse_line(text) {
        Ok(value) => value,
        Err(json::Unparsed::EndsTooSoon) => return Err(CUT_SHORT.into()),
        Err(json::Unparsed::Wrong(e)) => return Err(format!("not JSON: {e}")),
    };
    if !matches!(value, Value::Object(_)) {
        return Err("not a JSON object".into());
    }
    match value.get("event") {
        None => return Err("no \"event\" field".into()),
        Some(Value::String(event)) if event == "run" => {}
        Some(Value::String(event)) => return Err(format!("the event is \"{event}\", not \"run\"")),
        Some(_) => return Err("\"event\" is not a string".into()),
    }
    read_entry(&value)
}

/// Why a line that stops too soon is damaged.
const CUT_SHORT: &str = "it was cut short (its write did not finish)";

/// The fields of one run's object, looked up by name.
struct Fields<'a>(&'a Value);

impl<'a> Fields<'a> {
    /// The field `key`, which must be there.
    fn field(&self, key: &str) -> Result<&'a Value, String> {
        self.0.get(key).ok_or_else(|| format!("no \"{key}\" field"))
    }

    /// A whole number from 0 to 2^64 - 1.
    fn number(&self, key: &str) -> Result<u64, String> {
        self.field(key)?
            .as_u64()
            .ok_or_else(|| format!("\"{key}\" is not a whole number"))
    }

    /// A string.
    fn text(&self, key: &str) -> Result<String, String> {
        self.field(key)?
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("\"{key}\" is not a string"))
    }

    /// A string, or `None` for `null`.
    fn text_or_null(&self, key: &str) -> Result<Option<String>, String> {
        match self.field(key)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            _ => Err(format!("\"{key}\" is neither a string nor null")),
        }
    }

    /// `true` or `false`.
    fn flag(&self, key: &str) -> Result<bool, String> {
        match self.field(key)? {
            Value::Bool(b) => Ok(*b),
            _ => Err(format!("\"{key}\" is not true or false")),
        }
    }

    /// An array, its items of any type.
    fn array(&self, key: &str) -> Result<&'a [Value], String> {
        match self.field(key)? {
            Value::Array(items) => Ok(items),
            _ => Err(format!("\"{key}\" is not an array")),
        }
    }
}

/// The run a line's object records.
fn read_entry(value: &Value) -> Result<Entry, String> {
    let fields = Fields(value);
    let ts = fields.text("ts")?;
    if crate::duration::parse_time(&ts).is_err() {
        return Err(format!("\"ts\" is not an RFC 3339 time: \"{ts}\""));
    }
    let command = fields
        .array("command")?
        .iter()
        .map(|w| w.as_word().ok_or("\"command\" is not an array of words"))
        .collect::<Result<Vec<OsString>, _>>()?;
    if command.is_empty() {
        return Err("\"command\" is empty".into());
    }
    let try_outcomes = fields
        .array("try_outcomes")?
        .iter()
        .map(|o| match o.get("held") == Some(&Value::Bool(true)) {
            true => Ok(None),
            false => outcome_of(o)
                .map(Some)
                .ok_or("\"try_outcomes\" holds what is not a try's outcome"),
        })
        .collect::<Result<Vec<Option<Outcome>>, _>>()?;
    let outcome = fields.text("outcome")?;
    let ending = Ending::from_word(&outcome)
        .ok_or_else(|| format!("\"outcome\" is \"{outcome}\", which no run ends with"))?;
    let failed = match ending {
        Ending::Repeat => Some(fields.number("failed")?),
        _ if value.get("failed").is_some() => Some(fields.number("failed")?),
        _ => None,
    };
    Ok(Entry {
        id: fields.text("id")?,
        ts,
        label: fields.text_or_null("label")?,
        command,
        tries: fields.number("tries")?,
        ending,
        reason: fields.text_or_null("reason")?,
        exit_code: fields.number("exit_code")?,
        flaky: fields.flag("flaky")?,
        duration_ms: fields.number("duration_ms")?,
        try_outcomes,
        failed,
        host: None,
    })
}

/// The run one line records (as a fleet's stream keeps it), or what is wrong with it.
pub fn entry_of_line(text: &str) -> Result<Entry, String> {
    read_line(text)
}

/// Opens a history file for `--stats`, which only reads it and so may read any file it can
/// open (docs/files.md#files-that-outlive-a-run): a FIFO, a device, a directory or a socket is
/// refused before anything could block on it (looked at, then opened without blocking and looked at
/// again), and so is a file over [`MAX_FILE`]. The error says why, for the caller to print after
/// the file's name.
pub fn open_for_stats(path: &Path) -> Result<File, String> {
    let cannot_open = |e: io::Error| format!("cannot open it: {e}");
    // Looked at before it is opened: opening a device may act on it.
    let meta = std::fs::metadata(path).map_err(cannot_open)?;
    check_type(&meta).map_err(|r| r.to_string())?;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = fcntl::open(path, flags, Mode::empty()).map_err(|e| cannot_open(e.into()))?;
    let file = File::from(fd);
    // Looked at again: it may have been replaced in between.
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    check_type(&meta).map_err(|r| r.to_string())?;
    if meta.len() > MAX_FILE {
        return Err(format!(
            "it holds {} bytes, more than the {} GiB a history file may hold",
            meta.len(),
            MAX_FILE >> 30
        ));
    }
    Ok(file)
}

/// Reads a history file for `--stats` ([`open_for_stats`], then [`read_from`]) up to the length
/// it had under a shared lock: records are appended whole under an exclusive lock, so that
/// length ends with a whole line, and the lock is let go before the read, which on a large
/// file takes seconds that a run ending meanwhile would spend waiting to append its line. The
/// lock is waited for at most [`LOCK_WAIT`]: past that (a writer stopped while it had it) or
/// where the file cannot be locked, the length is taken all the same, at worst with its last
/// line damaged. The error says why the file cannot be read, for the caller to print after
/// its name.
pub fn read_for_stats(path: &Path) -> Result<Reading, String> {
    let file = open_for_stats(path)?;
    let cannot_read = |e: io::Error| format!("cannot read it: {e}");
    let length = length_under_lock(&file).map_err(cannot_read)?;
    read_from(BufReader::with_capacity(1 << 16, (&file).take(length))).map_err(cannot_read)
}

/// The length of `file` (at most [`MAX_FILE`]) as a shared lock sees it, the lock let go.
fn length_under_lock(file: &File) -> io::Result<u64> {
    let locked = flock_within(
        file,
        FlockArg::LockSharedNonblock,
        LOCK_WAIT,
        std::time::Duration::from_millis(10),
    )
    .is_ok();
    let length = file.metadata().map(|m| m.len().min(MAX_FILE));
    if locked {
        let _ = flock_within(
            file,
            FlockArg::Unlock,
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
        );
    }
    length
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn entry(id: &str) -> Entry {
        Entry {
            id: id.into(),
            ts: "2026-01-15T08:05:00.123Z".into(),
            label: Some("deploy".into()),
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
            tries: 3,
            ending: Ending::Success,
            reason: None,
            exit_code: 0,
            flaky: true,
            duration_ms: 1234,
            try_outcomes: vec![
                Some(Outcome::Exit(3)),
                Some(Outcome::Exit(3)),
                Some(Outcome::Exit(0)),
            ],
            failed: None,
            host: None,
        }
    }

    fn read(text: &[u8]) -> Reading {
        read_from(text).unwrap()
    }

    fn lines(lines: &[String]) -> Vec<u8> {
        let mut out = lines.join("\n").into_bytes();
        out.push(b'\n');
        out
    }

    #[test]
    fn a_line_has_its_fields_in_the_documented_order() {
        let mut e = entry("r-1");
        e.label = None;
        assert_eq!(
            e.line(),
            r#"{"event":"run","id":"r-1","ts":"2026-01-15T08:05:00.123Z","label":null,"command":["sh","-c","exit 3"],"tries":3,"outcome":"success","reason":null,"exit_code":0,"flaky":true,"duration_ms":1234,"try_outcomes":[{"exit":3},{"exit":3},{"exit":0}]}"#
        );
    }

    #[test]
    fn every_field_reads_back_as_it_was_written() {
        let mut odd = entry("a");
        odd.label = None;
        odd.command
            .push(OsString::from_vec(b"\xff\xfe 'quote'\n\"x\"".to_vec()));
        odd.ending = Ending::GaveUp;
        odd.reason = Some("tries".into());
        odd.exit_code = 137;
        odd.flaky = false;
        odd.try_outcomes = vec![
            Some(Outcome::Exit(255)),
            Some(Outcome::Signal(Signal::KILL)),
            Some(Outcome::Timeout),
            Some(Outcome::NotFound),
            Some(Outcome::NotExecutable),
            None,
            Some(Outcome::NoResources),
        ];
        odd.failed = Some(6);
        odd.tries = 7;
        let mut interrupted = entry("b");
        interrupted.ending = Ending::Interrupted;
        interrupted.reason = Some("interrupted".into());
        interrupted.try_outcomes = vec![Some(Outcome::Signal(Signal::INT))];
        let mut repeat = entry("c");
        repeat.ending = Ending::Repeat;
        repeat.flaky = false;
        repeat.failed = Some(2);
        let written = [entry("z"), odd, interrupted, repeat];
        let text: Vec<String> = written.iter().map(Entry::line).collect();
        assert!(text.iter().all(|l| !l.contains('\n')));
        assert!(text[3].ends_with(r#","failed":2}"#), "{}", text[3]);
        let reading = read(&lines(&text));
        assert_eq!(reading.damaged, []);
        assert_eq!(reading.entries, written);
    }

    #[test]
    fn damaged_lines_are_counted_with_their_numbers_and_reading_goes_on() {
        let good = entry("a").line();
        let cut = good[..good.len() / 2].to_string();
        let no_tries = good.replace(r#""tries":3,"#, "");
        let bad_ts = good.replace("2026-01-15T08:05:00.123Z", "yesterday");
        let other = good.replace(r#""event":"run""#, r#""event":"dead_letter""#);
        let text = [
            good.clone(),
            "garbage".into(),
            String::new(),
            cut,
            no_tries,
            "[1,2]".into(),
            bad_ts,
            other,
            good.clone(),
        ];
        let reading = read(&lines(&text));
        assert_eq!(reading.entries.len(), 2);
        let damaged: Vec<(usize, &str)> = reading
            .damaged
            .iter()
            .map(|d| (d.line, d.why.as_str()))
            .collect();
        assert_eq!(
            damaged,
            [
                (2, "not JSON: expected a JSON value at column 1"),
                (4, CUT_SHORT),
                (5, "no \"tries\" field"),
                (6, "not a JSON object"),
                (7, "\"ts\" is not an RFC 3339 time: \"yesterday\""),
                (8, "the event is \"dead_letter\", not \"run\""),
            ]
        );
    }

    #[test]
    fn a_last_line_cut_short_without_its_line_break_is_damaged() {
        let good = entry("a").line();
        let mut text = lines(std::slice::from_ref(&good));
        text.extend_from_slice(&good.as_bytes()[..good.len() - 1]);
        let reading = read(&text);
        assert_eq!(reading.entries.len(), 1);
        assert_eq!(reading.damaged[0].line, 2);
        // A character cut in two at the end is a line cut short too.
        let reading = read(
            "{\"event\":\"run\",\"label\":\"é"
                .as_bytes()
                .split_last()
                .unwrap()
                .1,
        );
        assert_eq!(reading.damaged[0].why, CUT_SHORT);
        assert_eq!(read(b"\xff\xfe\n").damaged[0].why, "it is not UTF-8");
    }

    #[test]
    fn a_line_over_a_mebibyte_is_damaged_and_the_next_one_read() {
        let good = entry("a").line();
        let mut text = lines(std::slice::from_ref(&good));
        text.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        text.push(b'\n');
        text.extend(lines(std::slice::from_ref(&good)));
        // Just at the limit is no damage.
        let long = good.replace("exit 3", &"y".repeat(MAX_LINE - good.len() + 6));
        assert_eq!(long.len(), MAX_LINE);
        text.extend(lines(&[long]));
        let reading = read(&text);
        assert_eq!(reading.entries.len(), 3);
        assert_eq!(reading.damaged.len(), 1);
        assert_eq!(reading.damaged[0].line, 2);
        assert!(reading.damaged[0].why.contains("longer than 1 MiB"));
    }

    #[test]
    fn fields_a_newer_retry_adds_are_ignored() {
        let good = entry("a").line();
        let newer = good
            .replacen('{', r#"{"host":"ci-7","#, 1)
            .replace(r#"{"exit":3}"#, r#"{"exit":3,"core":false}"#);
        let newer = format!(
            "{},\"extra\":{{\"nested\":[1,2]}}}}",
            &newer[..newer.len() - 1]
        );
        let reading = read(&lines(&[newer]));
        assert_eq!(reading.damaged, []);
        assert_eq!(reading.entries, [entry("a")]);
    }

    #[test]
    fn a_repeat_line_without_its_failed_count_is_damaged() {
        let mut repeat = entry("a");
        repeat.ending = Ending::Repeat;
        let reading = read(&lines(&[repeat.line()]));
        assert_eq!(reading.damaged[0].why, "no \"failed\" field");
    }

    #[test]
    fn stats_refuses_what_is_no_regular_file_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("retry-history-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let why = open_for_stats(&dir).unwrap_err();
        assert_eq!(why, "it is a directory, not a regular file");
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::S_IRWXU).unwrap();
        assert_eq!(
            open_for_stats(&fifo).unwrap_err(),
            "it is a FIFO, not a regular file"
        );
        let missing = open_for_stats(&dir.join("missing")).unwrap_err();
        assert!(missing.starts_with("cannot open it: "), "{missing}");
        let file = dir.join("history.jsonl");
        std::fs::write(&file, lines(&[entry("a").line()])).unwrap();
        assert_eq!(read_for_stats(&file).unwrap().entries, [entry("a")]);
        assert_eq!(
            open_for_stats(Path::new("/dev/null")).unwrap_err(),
            "it is a character device, not a regular file"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
