//! The dead-letter file (spec 17): one JSON line per run that gave up, and the lines a replay
//! appends after them. The file is only ever appended to, each line in one write(2) under an
//! exclusive `flock`, so that runs giving up together never mix their lines, and a process
//! killed at any moment leaves every line before its own whole.
//!
//! The lines, each a JSON object:
//!
//! - a run that gave up: `{"event":"dead_letter","id":..,"ts":..,"label":..,"cwd":..,
//!   "command":[..],"options":[..],"exit_code":..,"reason":..,"tries":..,"duration_ms":..}`;
//! - a replay of it that succeeded: `{"event":"resolved","id":..,"ts":..,"tries":..}`;
//! - a replay of it that did not: `{"event":"attempt","id":..,"ts":..,"reason":..}`, with the
//!   `exit_code` and `tries` of the replayed run, or the `error` that kept it from running.
//!
//! A word (`cwd`, each word of `command` and `options`) is a JSON string when it is UTF-8, and
//! otherwise `{"base64":"..."}`, its bytes in standard base64, as in the JSON log: every byte
//! comes back as it was. A run is pending until a `resolved` line names its id.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{self, FlockArg};

use crate::report::json::Obj;
use crate::store::json::{self, Value};

/// The longest an append or a read waits for the lock. Others hold it for the time of one
/// write; a longer hold means a stopped process, which must not hang a run for ever.
const LOCK_WAIT: Duration = Duration::from_secs(10);

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
        let obj = Obj::new()
            .str("event", "dead_letter")
            .str("id", &self.id)
            .str("ts", &self.ts);
        let obj = match &self.label {
            Some(label) => obj.str("label", label),
            None => obj.raw("label", "null"),
        };
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
    pub path: PathBuf,
    /// The record, its end (`ts`, `exit_code`, `reason`, `tries`, `duration_ms`) to be filled.
    pub run: Record,
}

impl DeadLetter {
    /// Appends the run, which gave up now.
    pub fn append(
        &self,
        exit_code: u64,
        reason: &str,
        tries: u64,
        took: Duration,
    ) -> io::Result<()> {
        let record = Record {
            ts: now(),
            exit_code,
            reason: reason.to_string(),
            tries,
            duration_ms: crate::duration::millis(took),
            ..self.run.clone()
        };
        append(&self.path, &record.line())
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
    let obj = Obj::new()
        .str("event", event)
        .str("id", id)
        .str("ts", &now());
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

/// The time now as the lines write it.
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// A run that no `resolved` line has named yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The line of its record, from 1.
    pub line: usize,
    pub record: Record,
    /// How many replays of it failed.
    pub attempts: u64,
}

/// A line that is not one that `retry` writes: its number (from 1) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    pub line: usize,
    pub why: String,
}

/// One line of the file, read.
enum Line {
    Record(Record),
    Resolved(String),
    Attempt(String),
}

/// The pending runs of a dead-letter file's contents, in the order they were recorded. Blank
/// lines are allowed; any other line that is not one `retry` writes is an error, never
/// skipped.
pub fn pending(contents: &[u8]) -> Result<Vec<Pending>, Damaged> {
    let mut runs: Vec<Pending> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut resolved = vec![];
    for (i, raw) in contents.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let damaged = |why: String| Damaged { line, why };
        let text = std::str::from_utf8(raw).map_err(|_| damaged("it is not UTF-8".into()))?;
        if text.trim().is_empty() {
            continue;
        }
        match read_line(text).map_err(damaged)? {
            Line::Record(record) => {
                if let Some(&k) = by_id.get(&record.id) {
                    let first = runs[k].line;
                    return Err(damaged(format!(
                        "the run {} is already recorded on line {first}",
                        record.id
                    )));
                }
                by_id.insert(record.id.clone(), runs.len());
                runs.push(Pending {
                    line,
                    record,
                    attempts: 0,
                });
            }
            // A line about a run recorded nowhere above (the file was edited) changes nothing.
            Line::Resolved(id) => resolved.extend(by_id.get(&id).copied()),
            Line::Attempt(id) => {
                if let Some(&k) = by_id.get(&id) {
                    runs[k].attempts += 1;
                }
            }
        }
    }
    Ok(runs
        .into_iter()
        .enumerate()
        .filter(|(k, _)| !resolved.contains(k))
        .map(|(_, run)| run)
        .collect())
}

fn read_line(text: &str) -> Result<Line, String> {
    let value = json::parse(text).map_err(|e| format!("not JSON: {e}"))?;
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
        "dead_letter" => read_record(&value, id()?).map(Line::Record),
        "resolved" => Ok(Line::Resolved(id()?)),
        "attempt" => Ok(Line::Attempt(id()?)),
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

/// Creates the file (0600) and its directory (0700) if they are missing, so that a path that
/// cannot be written is found when the run starts, not when it gives up.
pub fn prepare(path: &Path) -> io::Result<()> {
    open_for_append(path).map(drop)
}

/// Appends `line` and a line break to the file, in one write under an exclusive lock. After a
/// line that a killed process left without its line break, it starts a new line first.
pub fn append(path: &Path, line: &str) -> io::Result<()> {
    let file = open_for_append(path)?;
    lock(&file, FlockArg::LockExclusiveNonblock)?;
    let mut bytes = Vec::with_capacity(line.len() + 2);
    if !ends_a_line(&file)? {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    loop {
        match (&file).write(&bytes) {
            Ok(n) if n == bytes.len() => break,
            Ok(n) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!(
                        "only {n} of the {} bytes of the line were written",
                        bytes.len()
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // On disk before the lock goes: a line that a crash of the machine could lose is a run
    // lost. Closing the file (here) releases the lock. A pipe or a terminal (`/dev/stdout`)
    // cannot be synced, and needs not be.
    match file.sync_data() {
        Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => Ok(()),
        done => done,
    }
}

/// Why a replay cannot take the file: another replay holds it, or it cannot be appended to.
#[derive(Debug)]
pub enum Hold {
    Busy,
    Io(io::Error),
}

/// Opens the file for a replay, held until the returned file is dropped (or the process
/// ends): a replay must be able to append what became of each run before it runs any, and two
/// replays of one file at once would run every pending run twice. The hold is a lock on a
/// byte far past any line (an open file description's lock, which the `flock` of the runs
/// appending meanwhile does not meet).
pub fn hold_for_replay(path: &Path) -> Result<File, Hold> {
    let file = OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(Hold::Io)?;
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

/// Reads the whole file under a shared lock: never half of a line being appended.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    lock(&file, FlockArg::LockSharedNonblock)?;
    let mut contents = Vec::new();
    file.read_to_end(&mut contents)?;
    Ok(contents)
}

fn open_for_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
    }
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// Whether the file is empty or ends with a line break (anything but a regular file counts
/// as one: it cannot be read back).
fn ends_a_line(file: &File) -> io::Result<bool> {
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, meta.len() - 1)?;
    Ok(last[0] == b'\n')
}

/// Takes the lock, trying again after short sleeps for at most [`LOCK_WAIT`] in all.
fn lock(file: &File, how: FlockArg) -> io::Result<()> {
    match super::flock_within(file, how, LOCK_WAIT, Duration::from_millis(10)) {
        Ok(()) => Ok(()),
        Err(super::LockError::Busy) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "another process has held its lock for over {} s",
                LOCK_WAIT.as_secs()
            ),
        )),
        Err(super::LockError::Os(e)) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let runs = pending(&file(&[line])).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].record, r);
        assert_eq!((runs[0].line, runs[0].attempts), (1, 0));
        let mut r = record("b");
        r.cwd = None;
        assert_eq!(pending(&file(&[r.line()])).unwrap()[0].record, r);
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
        let runs = pending(&file(&lines)).unwrap();
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
            (b"{\"event\":\"dead_letter\"", 2, "not JSON"),
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
    fn appends_whole_lines_to_a_file_only_its_owner_may_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("retry-dl-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("dead.jsonl");
        prepare(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.join("sub")), 0o700);
        // A line a killed writer left without its line break is ended before the next one.
        std::fs::write(&path, b"{\"event\":\"dead_le").unwrap();
        append(&path, &record("a").line()).unwrap();
        let contents = read(&path).unwrap();
        let err = pending(&contents).unwrap_err();
        assert_eq!(err.line, 1);
        let second = contents.split(|&b| b == b'\n').nth(1).unwrap();
        assert_eq!(second, record("a").line().as_bytes());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
