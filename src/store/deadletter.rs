//! The dead-letter file (docs/dead-letters.md#dead-letters-and-replay): one JSON line per run that
//! gave up, and the lines a replay appends after them. The file is only ever appended to, each line
//! in one write(2) under an exclusive `flock`, so that runs giving up together never mix their
//! lines, and a process killed at any moment leaves every line before its own whole. A write cut
//! short is cut back to the length the file had, under the same lock. The file is opened by the
//! rules of docs/files.md#files-that-outlive-a-run (`store::open::open_record_file`): the file
//! decides what a replay runs, often as root.
//!
//! The lines, each a JSON object:
//!
//! - a run that gave up: `{"event":"dead_letter","id":..,"ts":..,"label":..,"cwd":..,
//!   "command":[..],"options":[..],"exit_code":..,"reason":..,"tries":..,"duration_ms":..}`;
//! - a replay of it that succeeded: `{"event":"resolved","id":..,"ts":..,"tries":..}`;
//! - a replay of it that did not: `{"event":"attempt","id":..,"ts":..,"reason":..}`, with the
//!   `exit_code` and `tries` of the replayed run, or the `error` that kept it from running;
//! - an operator's `--forget` of it: `{"event":"forgotten","id":..,"ts":..}`.
//!
//! A word (`cwd`, each word of `command` and `options`) is a JSON string when it is UTF-8, and
//! otherwise `{"base64":"..."}`, its bytes in standard base64, as in the JSON log: every byte
//! comes back as it was. A run is pending until a `resolved` or `forgotten` line names its id.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{self, FlockArg};

use crate::json::{self, Value};
use crate::store::lines::{self, Lines};
use crate::store::open::{Access, open_record_file};
use crate::store::record::{append, head, lock, lock_wait, prepare_for, run_head, ts};
use crate::store::written::{Fnv, WrittenRecord, record_as_written, resolved_as_written, words};

/// The largest file read: far more than any dead-letter file grows to, far less than would
/// take a run's memory.
pub const MAX_FILE: u64 = 1 << 30;

pub use crate::store::lines::MAX_LINE;

/// A run that gave up, as its line records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The run's id (`RETRY_RUN_ID`); a replay runs it with the same id.
    pub id: String,
    /// When it gave up, RFC 3339 in UTC.
    pub ts: String,
    pub label: Option<String>,
    /// Its working directory; `None` when it could not be read (it had been removed).
    pub cwd: Option<OsString>,
    pub command: Vec<OsString>,
    /// Its options, as given but for a Redis password (`argv::recorded_options`).
    pub options: Vec<OsString>,
    pub exit_code: u64,
    /// Why it gave up: `permanent`, `tries`, `budget` or `quota`.
    pub reason: String,
    pub tries: u64,
    pub duration_ms: u64,
}

impl Record {
    /// Its line in the file, without the line break.
    pub fn line(&self) -> String {
        let obj = run_head("dead_letter", &self.id, &self.ts, self.label.as_deref());
        let obj = match &self.cwd {
            Some(cwd) => obj.word("cwd", cwd),
            None => obj.raw("cwd", "null"),
        };
        obj.words("command", self.command.iter().map(OsString::as_os_str))
            .words("options", self.options.iter().map(OsString::as_os_str))
            .num("exit_code", self.exit_code)
            .str("reason", &self.reason)
            .num("tries", self.tries)
            .num("duration_ms", self.duration_ms)
            .finish()
    }
}

/// Where a run is recorded if it gives up (`--dead-letter`), with what is known of it from
/// its start.
#[derive(Clone, Debug)]
pub struct DeadLetter {
    /// The file, or the store on Redis as the log names it.
    pub path: PathBuf,
    /// The fleet's store on Redis, when the record goes there rather than to the file.
    pub fleet: Option<crate::redis_url::RedisAddress>,
    /// The record, its end (`ts`, `exit_code`, `reason`, `tries`, `duration_ms`) to be filled.
    pub run: Record,
}

impl DeadLetter {
    /// Appends the run, which gave up now; `left` is what its budget has left, if it has one,
    /// which bounds the wait for the lock.
    pub fn append(
        &self,
        exit_code: u64,
        reason: &str,
        tries: u64,
        took: Duration,
        left: Option<Duration>,
    ) -> io::Result<()> {
        let record = self.ended(exit_code, reason, tries, took);
        append(&self.path, &record.line(), lock_wait(left))
    }

    /// The record of the run, which gave up now.
    pub fn ended(&self, exit_code: u64, reason: &str, tries: u64, took: Duration) -> Record {
        Record {
            ts: ts(SystemTime::now()),
            exit_code,
            reason: reason.to_string(),
            tries,
            duration_ms: crate::duration::millis(took),
            ..self.run.clone()
        }
    }
}

/// What a replay of a run came to, as the line it appends says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replayed {
    /// It succeeded after this many tries.
    Resolved { tries: u64 },
    /// It failed again: its exit status, why (`permanent`, `tries`, ..., `interrupted`,
    /// `error`), and its tries.
    Failed {
        exit_code: u64,
        reason: String,
        tries: u64,
    },
    /// It could not run at all (its directory is gone): why.
    NotRun { reason: String, error: String },
}

/// The line that a replay of the run `id` appends.
pub fn replayed_line(id: &str, replayed: &Replayed) -> String {
    let event = match replayed {
        Replayed::Resolved { .. } => "resolved",
        _ => "attempt",
    };
    let obj = head(event, id, &ts(SystemTime::now()));
    match replayed {
        Replayed::Resolved { tries } => obj.num("tries", *tries),
        Replayed::Failed {
            exit_code,
            reason,
            tries,
        } => obj
            .num("exit_code", *exit_code)
            .str("reason", reason)
            .num("tries", *tries),
        Replayed::NotRun { reason, error } => obj.str("reason", reason).str("error", error),
    }
    .finish()
}

/// The line an operator's `--forget` appends for the run `id`: never replayed, no longer pending.
pub fn forgotten_line(id: &str) -> String {
    head("forgotten", id, &ts(SystemTime::now())).finish()
}

/// Where a recorded run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No later line settled it: a replay runs it.
    Pending,
    /// A replay of it succeeded.
    Resolved,
    /// An operator forgot it.
    Forgotten,
}

impl State {
    pub fn word(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Resolved => "resolved",
            State::Forgotten => "forgotten",
        }
    }
}

/// A recorded run: one that no `resolved` or `forgotten` line has named yet, unless the listing
/// was asked for every run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The line of its record, from 1.
    pub line: usize,
    pub record: Record,
    /// How many replays of it failed.
    pub attempts: u64,
    pub state: State,
}

/// A line that is not one that `retry` writes: its number (from 1) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    pub line: usize,
    pub why: String,
}

/// What a dead-letter file holds: its pending runs, and the lines cut short that were skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub pending: Vec<Pending>,
    /// The numbers of the lines whose write was cut short (by a crash, or by a full disk under
    /// an older `retry`): they hold no whole record, and were skipped.
    pub cut_short: Vec<usize>,
}

/// Why a dead-letter file could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Damaged(Damaged),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Damaged(d) => write!(f, "line {}: {}", d.line, d.why),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// One line of the file, read.
enum Line<'a> {
    /// A record that `retry` wrote, checked whole but not yet read into a [`Record`]: its id.
    Written(&'a str),
    Record(Record),
    Resolved(String),
    Attempt(String),
    Forgotten(String),
}

/// The pending runs of a dead-letter file's contents, in the order they were recorded.
pub fn pending(contents: &[u8]) -> Result<Listing, Damaged> {
    match pending_from(contents) {
        Ok(listing) => Ok(listing),
        Err(ReadError::Damaged(d)) => Err(d),
        // Reading from memory cannot fail.
        Err(ReadError::Io(e)) => Err(Damaged {
            line: 0,
            why: e.to_string(),
        }),
    }
}

/// The pending runs of what `input` reads, in the order they were recorded, in one pass and
/// time linear in its size. Blank lines are allowed; a line cut short (the start of a line
/// whose write did not finish) is skipped and named in `cut_short`; any other line that is not
/// one `retry` writes is an error, never skipped, and so is a line over [`MAX_LINE`] bytes.
pub fn pending_from(input: impl BufRead) -> Result<Listing, ReadError> {
    pending_sized(input, 0, false)
}

/// [`pending_from`] for input of about `size` bytes: room for its runs is made at once rather
/// than grown (a file of many runs spent a tenth of its reading growing the table of ids).
/// With `all`, the runs resolved or forgotten are listed too, each with its state.
fn pending_sized(input: impl BufRead, size: u64, all: bool) -> Result<Listing, ReadError> {
    let (runs, cut_short) = read_runs(input, size)?;
    Ok(Listing {
        pending: runs.listed(all),
        cut_short,
    })
}

/// A run recorded in a dead-letter file, as a prune weighs it: its id, `ts` as written, state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Weighed {
    pub id: String,
    pub ts: String,
    pub state: State,
}

/// Every run that `input` records and the lines cut short, read exactly as a replay reads the
/// file, without making a [`Record`] of each run.
pub fn weigh_from(input: impl BufRead, size: u64) -> Result<(Vec<Weighed>, Vec<usize>), ReadError> {
    let (runs, cut_short) = read_runs(input, size)?;
    Ok((runs.weighed(), cut_short))
}

/// The runs of what `input` reads, and the numbers of the lines cut short; see [`pending_from`].
fn read_runs(input: impl BufRead, size: u64) -> Result<(Runs, Vec<usize>), ReadError> {
    // A record and its `resolved` line take about 400 bytes as `retry` writes them; a guess
    // too small only grows the table as before.
    let mut runs = Runs::with_room(usize::try_from(size / 512).unwrap_or(0));
    let mut cut_short = Vec::new();
    let mut lines = Lines::new(input);
    while let Some((line, text)) = lines.next_line()? {
        let damaged = |why: String| ReadError::Damaged(Damaged { line, why });
        match text {
            lines::Line::Blank => {}
            lines::Line::CutShort => cut_short.push(line),
            lines::Line::NotUtf8 => return Err(damaged("it is not UTF-8".into())),
            lines::Line::TooLong => {
                let why = format!("it is longer than {} MiB: no record is", MAX_LINE >> 20);
                return Err(damaged(why));
            }
            lines::Line::Text(text) => match read_line(text) {
                Ok(read) => runs.add(line, text, read).map_err(damaged)?,
                Err(None) => cut_short.push(line),
                Err(Some(why)) => return Err(damaged(why)),
            },
        }
    }
    Ok((runs, cut_short))
}

impl WrittenRecord<'_> {
    /// The record, as the parser would read it from the same line.
    fn record(&self) -> Record {
        Record {
            id: self.id.to_string(),
            ts: self.ts.to_string(),
            label: self.label.map(str::to_string),
            cwd: self.cwd.map(OsString::from),
            command: words(self.command),
            options: words(self.options),
            exit_code: self.exit_code,
            reason: self.reason.to_string(),
            tries: self.tries,
            duration_ms: self.duration_ms,
        }
    }
}

type ById<V> = HashMap<String, V, std::hash::BuildHasherDefault<Fnv>>;

/// A run recorded in the file, as the reading keeps it until the end says whether a later line
/// resolved it.
struct Run {
    line: usize,
    record: Kept,
    attempts: u64,
    state: State,
}

/// A run's record: most are lines that `retry` wrote, kept as their text and read into a
/// [`Record`] only if the run is still pending at the end (a long file is mostly runs that a
/// replay resolved since, whose words would be made only to be dropped); any other was read.
enum Kept {
    /// Where its line is in [`Runs::texts`].
    Written(std::ops::Range<usize>),
    Read(Box<Record>),
}

/// The runs recorded so far, in order, with their tries since, and which were resolved.
struct Runs {
    runs: Vec<Run>,
    by_id: ById<usize>,
    /// The lines of the records kept as written, one after another.
    texts: String,
}

impl Runs {
    /// No runs yet, with room for about `runs` of them.
    fn with_room(runs: usize) -> Runs {
        Runs {
            runs: Vec::with_capacity(runs),
            by_id: ById::with_capacity_and_hasher(runs, Default::default()),
            texts: String::new(),
        }
    }

    /// Takes in the line numbered `line`, whose text is `text`; a run recorded twice is an
    /// error.
    fn add(&mut self, line: usize, text: &str, read: Line<'_>) -> Result<(), String> {
        let (id, record) = match read {
            Line::Written(id) => {
                let at = self.texts.len();
                self.texts.push_str(text);
                (id.to_string(), Kept::Written(at..self.texts.len()))
            }
            Line::Record(record) => (record.id.clone(), Kept::Read(Box::new(record))),
            // A line about a run recorded nowhere above (the file was edited) changes nothing.
            Line::Resolved(id) => {
                self.settle(&id, State::Resolved);
                return Ok(());
            }
            Line::Forgotten(id) => {
                self.settle(&id, State::Forgotten);
                return Ok(());
            }
            Line::Attempt(id) => {
                if let Some(&k) = self.by_id.get(&id) {
                    self.runs[k].attempts += 1;
                }
                return Ok(());
            }
        };
        if let Some(&k) = self.by_id.get(&id) {
            let first = self.runs[k].line;
            return Err(format!("the run {id} is already recorded on line {first}"));
        }
        self.by_id.insert(id, self.runs.len());
        self.runs.push(Run {
            line,
            record,
            attempts: 0,
            state: State::Pending,
        });
        Ok(())
    }

    /// The run `id` is settled as `state`, if it is still pending: a run resolved and then
    /// forgotten (or the other way round) stays as it was first settled.
    fn settle(&mut self, id: &str, state: State) {
        if let Some(&k) = self.by_id.get(id) {
            let run = &mut self.runs[k];
            if run.state == State::Pending {
                run.state = state;
            }
        }
    }

    /// Every run, with when it gave up as its line says, in the order they were recorded.
    fn weighed(self) -> Vec<Weighed> {
        let texts = self.texts;
        let weigh = |run: Run| {
            let (id, ts) = match run.record {
                Kept::Read(record) => (record.id, record.ts),
                Kept::Written(at) => match record_as_written(&texts[at]) {
                    Some(w) => (w.id.to_string(), w.ts.to_string()),
                    None => unreachable!("a line kept as written reads as written"),
                },
            };
            let state = run.state;
            Weighed { id, ts, state }
        };
        self.runs.into_iter().map(weigh).collect()
    }

    /// The runs still pending (with `all`, every run), in the order they were recorded.
    fn listed(self, all: bool) -> Vec<Pending> {
        let texts = self.texts;
        self.runs
            .into_iter()
            .filter(|run| all || run.state == State::Pending)
            .map(|run| Pending {
                line: run.line,
                record: match run.record {
                    Kept::Read(record) => *record,
                    Kept::Written(at) => record_as_written(&texts[at])
                        .expect("a line kept as written reads as written")
                        .record(),
                },
                attempts: run.attempts,
                state: run.state,
            })
            .collect()
    }
}

/// What a line says, or why it says nothing: `None` when it was cut short. Most lines of a
/// long file say that a run was resolved, as `retry` writes them: those are read without the
/// parser. Any other line is parsed once, which also tells a line that only stops too soon.
fn read_line(text: &str) -> Result<Line<'_>, Option<String>> {
    if let Some(id) = resolved_as_written(text) {
        return Ok(Line::Resolved(id.to_string()));
    }
    if let Some(written) = record_as_written(text) {
        return Ok(Line::Written(written.id));
    }
    match json::parse_line(text) {
        Ok(value) => read_value(&value).map_err(Some),
        Err(json::Unparsed::EndsTooSoon) => Err(None),
        Err(json::Unparsed::Wrong(e)) => Err(Some(format!("not JSON: {e}"))),
    }
}

/// What a whole line of a dead-letter file says about a run, as a replay reads it: it records
/// the run that gave up, counts a failed replay of it, or says it was resolved or forgotten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum About {
    Record(String),
    Attempt(String),
    Settled(String),
}

/// What `text` says about which run, read as a replay reads it: `Ok(None)` when it was cut
/// short (a replay skips it), `Err` with what is wrong when a replay would refuse it.
pub fn about(text: &str) -> Result<Option<About>, String> {
    match read_line(text) {
        Ok(Line::Written(id)) => Ok(Some(About::Record(id.to_string()))),
        Ok(Line::Record(record)) => Ok(Some(About::Record(record.id))),
        Ok(Line::Attempt(id)) => Ok(Some(About::Attempt(id))),
        Ok(Line::Resolved(id) | Line::Forgotten(id)) => Ok(Some(About::Settled(id))),
        Err(None) => Ok(None),
        Err(Some(why)) => Err(why),
    }
}

fn read_value(value: &Value) -> Result<Line<'static>, String> {
    if !matches!(value, Value::Object(_)) {
        return Err("not a JSON object".into());
    }
    let event = value
        .get("event")
        .ok_or("no \"event\" field")?
        .as_str()
        .ok_or("\"event\" is not a string")?;
    let id = || -> Result<String, String> {
        match value.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err("no run \"id\"".into()),
        }
    };
    match event {
        "dead_letter" => read_record(value, id()?).map(Line::Record),
        "resolved" => Ok(Line::Resolved(id()?)),
        "attempt" => Ok(Line::Attempt(id()?)),
        "forgotten" => Ok(Line::Forgotten(id()?)),
        other => Err(format!("unknown event \"{other}\"")),
    }
}

fn read_record(value: &Value, id: String) -> Result<Record, String> {
    let words = |key: &str| -> Result<Vec<OsString>, String> {
        let bad = || format!("\"{key}\" is not an array of words");
        match value.get(key) {
            Some(Value::Array(items)) => {
                items.iter().map(|w| w.as_word().ok_or_else(bad)).collect()
            }
            _ => Err(bad()),
        }
    };
    let number = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("\"{key}\" is not a whole number"))
    };
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("\"{key}\" is not a string"))
    };
    let command = words("command")?;
    if command.is_empty() {
        return Err("\"command\" is empty".into());
    }
    let cwd = match value.get("cwd") {
        Some(Value::Null) => None,
        Some(word) => Some(word.as_word().ok_or("\"cwd\" is not a word")?),
        None => return Err("no \"cwd\" field".into()),
    };
    let label = match value.get("label") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("\"label\" is not a string".into()),
    };
    Ok(Record {
        id,
        ts: text("ts")?,
        label,
        cwd,
        command,
        options: words("options")?,
        exit_code: number("exit_code")?,
        reason: text("reason")?,
        tries: number("tries")?,
        duration_ms: number("duration_ms")?,
    })
}

/// The record a `dead_letter` line holds (as a stream on Redis keeps it), or what is wrong with
/// the line.
pub fn record_of_line(text: &str) -> Result<Record, String> {
    match read_line(text) {
        Ok(Line::Written(_)) => Ok(record_as_written(text)
            .expect("a line read as written reads as written")
            .record()),
        Ok(Line::Record(record)) => Ok(record),
        Ok(_) => Err("it is not a record of a run that gave up".into()),
        Err(None) => Err("it is cut short".into()),
        Err(Some(why)) => Err(why),
    }
}

/// Opens the file as a run that may append to it would, creating it (0600) and its directory
/// (0700) if they are missing, so that a path that cannot be written, or a file `retry` must
/// not trust (docs/files.md#files-that-outlive-a-run), is found when the run starts, not when it
/// gives up.
pub fn prepare(path: &Path) -> io::Result<()> {
    prepare_for(path, "dead_letter")
}

/// Why a replay cannot take the file: another replay holds it, `retry` must not trust it
/// (docs/files.md#files-that-outlive-a-run), or it cannot be appended to.
#[derive(Debug)]
pub enum Hold {
    Busy,
    Refused(crate::store::Refusal),
    Io(io::Error),
}

impl From<io::Error> for Hold {
    fn from(e: io::Error) -> Hold {
        match crate::store::refusal(&e) {
            Some(r) => Hold::Refused(r),
            None => Hold::Io(e),
        }
    }
}

/// Opens the file for a replay, locked until the returned file is dropped (or the process
/// ends): a replay must be able to append what became of each run before it runs any, and two
/// replays of one file at once would run every pending run twice. The hold is a lock on a
/// byte far past any line (an open file description's lock, which the `flock` of the runs
/// appending meanwhile does not meet). A replay takes it before it reads the file.
pub fn hold_for_replay(path: &Path) -> Result<File, Hold> {
    let file = open_record_file(path, Access::Append)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: zero bytes are a valid `flock` (integers only).
        let mut range: nix::libc::flock = unsafe { std::mem::zeroed() };
        range.l_type = nix::libc::F_WRLCK as _;
        range.l_whence = nix::libc::SEEK_SET as _;
        range.l_start = i64::MAX - 1;
        range.l_len = 1;
        match fcntl::fcntl(&file, fcntl::FcntlArg::F_OFD_SETLK(&range)) {
            Ok(_) => {}
            Err(Errno::EAGAIN | Errno::EACCES) => return Err(Hold::Busy),
            Err(e) => return Err(Hold::Io(e.into())),
        }
    }
    Ok(file)
}

/// Reads the file's pending runs under a shared lock (never half of a line being appended),
/// waited for at most `wait`; a file over [`MAX_FILE`] is refused unread. With `locked` (the
/// file a replay holds), the file read must be that one.
pub fn read(path: &Path, locked: Option<&File>, wait: Duration) -> Result<Listing, ReadError> {
    read_listing(path, locked, wait, false)
}

/// [`read`], listing with `all` the runs resolved or forgotten too.
pub fn read_listing(
    path: &Path,
    locked: Option<&File>,
    wait: Duration,
    all: bool,
) -> Result<Listing, ReadError> {
    use std::os::unix::fs::MetadataExt;
    let file = open_record_file(path, Access::Read)?;
    let meta = file.metadata()?;
    if let Some(locked) = locked {
        let kept = locked.metadata()?;
        if (kept.dev(), kept.ino()) != (meta.dev(), meta.ino()) {
            return Err(io::Error::other("it was replaced while the replay opened it").into());
        }
    }
    lock(&file, FlockArg::LockSharedNonblock, wait)?;
    let size = file.metadata()?.len();
    if size > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it holds {size} bytes, more than the {} GiB a dead-letter file may hold",
                MAX_FILE >> 30
            ),
        )
        .into());
    }
    pending_sized(
        BufReader::with_capacity(1 << 16, (&file).take(MAX_FILE)),
        size,
        all,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::record::LOCK_WAIT;
    use std::os::unix::ffi::OsStringExt;

    fn record(id: &str) -> Record {
        Record {
            id: id.into(),
            ts: "2026-01-15T08:05:00.123Z".into(),
            label: None,
            cwd: Some("/srv/app".into()),
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
            options: vec!["-n".into(), "1".into()],
            exit_code: 3,
            reason: "tries".into(),
            tries: 1,
            duration_ms: 12,
        }
    }

    fn file(lines: &[String]) -> Vec<u8> {
        let mut out = lines.join("\n").into_bytes();
        out.push(b'\n');
        out
    }

    #[test]
    fn a_record_reads_back_byte_for_byte() {
        let mut r = record("a");
        r.label = Some("nightly \"sync\"".into());
        r.cwd = Some(OsString::from_vec(b"/tmp/\xff dir".to_vec()));
        r.command
            .push(OsString::from_vec(b"\xff\xfe a 'quote'\n\"x\"".to_vec()));
        r.options = vec![OsString::from_vec(b"--log-file=\xfe".to_vec())];
        let line = r.line();
        assert!(!line.contains('\n'), "{line}");
        let runs = pending(&file(&[line])).unwrap().pending;
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].record, r);
        assert_eq!((runs[0].line, runs[0].attempts), (1, 0));
        let mut r = record("b");
        r.cwd = None;
        assert_eq!(pending(&file(&[r.line()])).unwrap().pending[0].record, r);
    }

    #[test]
    fn a_run_stays_pending_until_a_resolved_line_names_it() {
        let failed = Replayed::Failed {
            exit_code: 3,
            reason: "tries".into(),
            tries: 1,
        };
        let gone = Replayed::NotRun {
            reason: "cwd".into(),
            error: "No such file or directory".into(),
        };
        let lines = [
            record("a").line(),
            record("b").line(),
            String::new(),
            replayed_line("a", &failed),
            replayed_line("b", &Replayed::Resolved { tries: 2 }),
            replayed_line("a", &gone),
            record("c").line(),
            replayed_line("unknown", &Replayed::Resolved { tries: 1 }),
        ];
        let runs = pending(&file(&lines)).unwrap().pending;
        let seen: Vec<(&str, usize, u64)> = runs
            .iter()
            .map(|p| (p.record.id.as_str(), p.line, p.attempts))
            .collect();
        assert_eq!(seen, [("a", 1, 2), ("c", 7, 0)]);
    }

    #[test]
    fn a_damaged_line_is_named_never_skipped() {
        let good = record("a").line();
        let negative = good.replace("\"tries\":1", "\"tries\":-1");
        let cases: [(&[u8], usize, &str); 8] = [
            (b"{\"event\":\"dead_letter\"]", 2, "not JSON"),
            (b"[1,2]", 2, "not a JSON object"),
            (b"{\"id\":\"x\"}", 2, "no \"event\""),
            (
                b"{\"event\":\"gone\",\"id\":\"x\"}",
                2,
                "unknown event \"gone\"",
            ),
            (b"{\"event\":\"resolved\"}", 2, "no run \"id\""),
            (b"\xff\xfe", 2, "not UTF-8"),
            (good.as_bytes(), 2, "already recorded on line 1"),
            (negative.as_bytes(), 2, "\"tries\" is not a whole number"),
        ];
        for (bad, line, why) in cases {
            let mut contents = file(std::slice::from_ref(&good));
            contents.extend_from_slice(bad);
            contents.push(b'\n');
            let err = pending(&contents).unwrap_err();
            assert_eq!(err.line, line, "{}", String::from_utf8_lossy(bad));
            assert!(err.why.contains(why), "{why}: {}", err.why);
        }
        for (field, why) in [
            (
                "\"command\":[\"sh\",\"-c\",\"exit 3\"]",
                "\"command\" is not an array",
            ),
            ("\"cwd\":\"/srv/app\"", "no \"cwd\""),
        ] {
            let broken = good.replace(
                field,
                if why.contains("command") {
                    "\"command\":[1]"
                } else {
                    "\"pwd\":\"/\""
                },
            );
            let err = pending(broken.as_bytes()).unwrap_err();
            assert!(err.why.contains(why), "{}", err.why);
        }
    }

    #[test]
    fn a_line_cut_short_anywhere_is_skipped_and_named() {
        let whole = record("a").line();
        let cut = &whole[..whole.len() / 2];
        for (contents, at) in [
            // The last line, without its line break.
            (format!("{whole}\n{cut}"), 2),
            // Ended by the line break of the next append.
            (format!("{cut}\n{}\n", record("b").line()), 1),
        ] {
            let listing = pending(contents.as_bytes()).unwrap();
            assert_eq!(listing.cut_short, [at], "{contents}");
            assert_eq!(listing.pending.len(), 1);
        }
        // A character cut in two is a line cut short too.
        let mut bytes = file(std::slice::from_ref(&whole));
        bytes.extend_from_slice("{\"event\":\"dead_letter\",\"label\":\"é".as_bytes());
        bytes.pop();
        assert_eq!(pending(&bytes).unwrap().cut_short, [2]);
    }

    #[test]
    fn thousands_of_resolved_runs_read_in_one_pass() {
        // Each line is looked at once, and each resolved run found by its id and its index in
        // a hash: no search of a list per run (BENCHMARKS.md has the figures). Kept small: the
        // unoptimised parse of a line takes tens of microseconds.
        let mut text = String::new();
        let n = 5_000;
        for k in 0..n {
            let mut r = record(&format!("r{k}"));
            r.command = vec!["true".into()];
            text.push_str(&r.line());
            text.push('\n');
        }
        for k in 0..n - 1 {
            text.push_str(&replayed_line(
                &format!("r{k}"),
                &Replayed::Resolved { tries: 1 },
            ));
            text.push('\n');
        }
        let listing = pending(text.as_bytes()).unwrap();
        assert_eq!(listing.pending.len(), 1);
        assert_eq!(listing.pending[0].record.id, format!("r{}", n - 1));
    }

    #[test]
    fn a_resolved_line_as_written_is_read_as_the_parser_reads_it() {
        let written = replayed_line("r-1", &Replayed::Resolved { tries: 12 });
        assert_eq!(resolved_as_written(&written), Some("r-1"));
        assert!(matches!(read_line(&written), Ok(Line::Resolved(id)) if id == "r-1"));
        // Anything else is left to the parser, which reads the same or names what is wrong.
        for other in [
            r#"{"event":"resolved","id":"a"b","ts":"t","tries":1}"#,
            r#"{"event":"resolved","id":"a","ts":"t","tries":01}"#,
            r#"{"event":"resolved","id":"a","ts":"t","tries":1} "#,
            r#"{"event":"resolved","id":"","ts":"t","tries":1}"#,
            r#"{"event":"resolved", "id":"a","ts":"t","tries":1}"#,
            "{\"event\":\"resolved\",\"id\":\"a\u{7}\",\"ts\":\"t\",\"tries\":1}",
            r#"{"event":"resolved","id":"a","ts":"t","tries":}"#,
        ] {
            assert_eq!(resolved_as_written(other), None, "{other}");
        }
        assert!(matches!(
            read_line(r#"{"event":"resolved", "id":"a","ts":"t","tries":1}"#),
            Ok(Line::Resolved(id)) if id == "a"
        ));
        assert!(matches!(
            read_line(r#"{"event":"resolved","id":"a","ts":"t","tries":01}"#),
            Err(Some(_))
        ));
        assert!(matches!(
            read_line(r#"{"event":"resolved","id":"a","#),
            Err(None)
        ));
    }

    #[test]
    fn a_record_as_written_is_read_as_the_parser_reads_it() {
        let parsed = |line: &str| match json::parse_line(line) {
            Ok(value) => read_value(&value).ok().and_then(|l| match l {
                Line::Record(r) => Some(r),
                _ => None,
            }),
            Err(_) => None,
        };
        let mut labelled = record("a");
        labelled.label = Some("nightly".into());
        labelled.cwd = None;
        labelled.options = Vec::new();
        labelled.command = vec!["true".into(), "".into(), "é x".into()];
        let mut big = record("b");
        (big.exit_code, big.tries, big.duration_ms) = (0, u64::MAX, 10);
        for r in [record("r-1"), labelled, big] {
            let line = r.line();
            let written = record_as_written(&line).expect(&line).record();
            assert_eq!(written, r, "{line}");
            assert_eq!(parsed(&line), Some(r), "{line}");
        }
        // Anything else is left to the parser, which reads the same or names what is wrong.
        let good = record("a").line();
        let mut escaped = record("a");
        escaped.command = vec!["say \"hi\"".into()];
        let mut bytes = record("a");
        bytes.cwd = Some(OsString::from_vec(b"/\xff".to_vec()));
        for other in [
            escaped.line(),
            bytes.line(),
            good.replace(",\"ts\"", ", \"ts\""),
            good.replace("\"tries\":1", "\"tries\":01"),
            good.replace("\"tries\":1", "\"tries\":18446744073709551616"),
            good.replace("\"tries\":1", "\"tries\":1.0"),
            good.replace("\"command\":[\"sh\",\"-c\",\"exit 3\"]", "\"command\":[]"),
            good.replace("\"command\":[\"sh\"", "\"command\":[1"),
            good.replace("\"id\":\"a\"", "\"id\":\"\""),
            good.replace("\"label\":null", "\"label\":1"),
            format!("{good} "),
            good[..good.len() - 1].to_string(),
        ] {
            assert!(record_as_written(&other).is_none(), "{other}");
        }
        assert!(matches!(read_line(&good), Ok(Line::Written("a"))));
        assert!(matches!(read_line(&escaped.line()), Ok(Line::Record(r)) if r == escaped));
        let cut = &good[..good.len() - 1];
        assert!(matches!(read_line(cut), Err(None)));
    }

    #[test]
    fn a_line_over_a_mebibyte_is_refused_with_its_number_unread() {
        let mut text = file(&[record("a").line()]);
        text.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        text.push(b'\n');
        let err = pending(&text).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.why.contains("longer than 1 MiB"), "{}", err.why);
    }

    #[test]
    fn appends_whole_lines_to_a_file_only_its_owner_may_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("retry-dl-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("dead.jsonl");
        prepare(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.join("sub")), 0o700);
        // A line a killed writer left without its line break is ended before the next one,
        // and skipped as cut short.
        std::fs::write(&path, b"{\"event\":\"dead_le").unwrap();
        append(&path, &record("a").line(), LOCK_WAIT).unwrap();
        let listing = read(&path, None, LOCK_WAIT).unwrap();
        assert_eq!(listing.cut_short, [1]);
        assert_eq!(listing.pending.len(), 1);
        assert_eq!(listing.pending[0].line, 2);
        let contents = std::fs::read(&path).unwrap();
        let second = contents.split(|&b| b == b'\n').nth(1).unwrap();
        assert_eq!(second, record("a").line().as_bytes());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
