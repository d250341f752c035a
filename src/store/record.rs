//! What every record file (the dead-letter file, the history) shares
//! (docs/files.md#files-that-outlive-a-run): a line appended whole under the file's lock, the
//! wait for that lock, the time as its lines write it, and the check that a file holds only
//! `retry`'s lines before a line is appended to it.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use nix::fcntl::FlockArg;

use crate::json::Obj;
use crate::store::lines::MAX_LINE;
use crate::store::open::{Access, open_record_file};

/// The longest an append or a read waits for the lock (docs/files.md#files-that-outlive-a-run: a
/// few seconds at most; a run waits less when its budget has less left). Others hold it for the
/// time of one write; a longer hold means a stopped process, which must not hang a run.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The least a run whose budget is spent waits for the lock all the same: the time of a few
/// writes by others, so that two runs giving up together both get their line in.
pub const LEAST_LOCK_WAIT: Duration = Duration::from_millis(100);

/// A time as the lines write it: RFC 3339 in UTC, with milliseconds.
pub fn ts(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// What every line of a record file starts with: its `event`, the run's `id`, and `ts`.
pub fn head(event: &str, id: &str, ts: &str) -> Obj {
    Obj::new().str("event", event).str("id", id).str("ts", ts)
}

/// What the line of a run (a dead letter, a history entry) starts with: [`head`], then the
/// run's `label`, `null` when it has none.
pub fn run_head(event: &str, id: &str, ts: &str, label: Option<&str>) -> Obj {
    let obj = head(event, id, ts);
    match label {
        Some(label) => obj.str("label", label),
        None => obj.raw("label", "null"),
    }
}

/// How long a run with `left` of its budget (if it has a budget) waits for the lock: what is
/// left, but at least [`LEAST_LOCK_WAIT`] and at most [`LOCK_WAIT`].
pub fn lock_wait(left: Option<Duration>) -> Duration {
    left.unwrap_or(LOCK_WAIT).clamp(LEAST_LOCK_WAIT, LOCK_WAIT)
}

/// Opens a record file as a run that may append to it would, creating it (0600) and its
/// directory (0700) if they are missing, for a file whose every line is an event, the first of them `first`: a file that
/// holds anything else (a typo that names `/etc/passwd`, a file of another program) is
/// refused, before a line of `retry`'s could be appended to it.
pub fn prepare_for(path: &Path, first: &str) -> io::Result<()> {
    let file = open_record_file(path, Access::Create)?;
    let start = format!("{{\"event\":\"{first}\"");
    let mut head = vec![0u8; start.len()];
    let mut read = 0;
    while read < head.len() {
        match file.read_at(&mut head[read..], read as u64)? {
            0 => break,
            n => read += n,
        }
    }
    // Empty, or begun by a write that never finished: both are the file's own.
    if read == 0 || start.as_bytes().starts_with(&head[..read]) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "it holds something other than retry's lines (its first line is not a {first} record)"
        ),
    ))
}

/// Appends `line` and a line break to the file, in one write under an exclusive lock waited
/// for at most `wait`. After a line that a killed process left without its line break, it
/// starts a new line first. A write cut short (a full disk, a file size limit) is cut back to
/// the length the file had, under the same lock, and is an error: the file holds whole lines.
/// A line that no reader would take (over [`MAX_LINE`]) is an error, and nothing is written.
pub fn append(path: &Path, line: &str, wait: Duration) -> io::Result<()> {
    fits_a_reader(line)?;
    let file = open_locked(path, wait)?;
    let had = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(line.len() + 2);
    if !ends_a_line(&file, had)? {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let mut written = 0;
    let mut failed = None;
    while written < bytes.len() {
        match (&file).write(&bytes[written..]) {
            Ok(0) => {
                failed = Some(io::Error::from(io::ErrorKind::WriteZero));
                break;
            }
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failed {
        if written == 0 {
            return Err(e);
        }
        let cut_short = CutShort {
            total: bytes.len(),
            written,
            had,
            not_cut_back: file.set_len(had).err(),
            error: e,
        };
        return Err(io::Error::new(cut_short.error.kind(), cut_short));
    }
    // On disk before the lock goes: a line that a crash of the machine could lose is a run
    // lost. Closing the file (here) releases the lock.
    file.sync_data()
}

/// An append whose write was cut short (a full disk, a file size limit): the error that cut
/// it, how much of it was written, and whether the file could be cut back to the length it
/// had. It is the payload of the `io::Error` that [`append`] returns then.
#[derive(Debug)]
pub struct CutShort {
    pub error: io::Error,
    pub written: usize,
    pub total: usize,
    /// The length the file had, and has again unless `not_cut_back` says why not.
    pub had: u64,
    pub not_cut_back: Option<io::Error>,
}

impl std::fmt::Display for CutShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (e, written, total, had) = (&self.error, self.written, self.total, self.had);
        match &self.not_cut_back {
            None => write!(
                f,
                "{e}, after {written} of the {total} bytes of the line; the file was cut back \
                 to its {had} bytes"
            ),
            Some(cut) => write!(
                f,
                "{e}, after {written} of the {total} bytes of the line, and the file could not \
                 be cut back ({cut}): its last line is cut short"
            ),
        }
    }
}

impl std::error::Error for CutShort {}

/// Opens the file and takes its exclusive lock, waited for at most `wait` each time. A
/// `--prune` renames a new file over the old one while holding the old one's lock: a run that
/// opened the old file before the rename and gets its lock after it would append to a file no
/// one reads, so once it holds the lock it checks that the path still names the file it holds,
/// and opens the path again if not.
fn open_locked(path: &Path, wait: Duration) -> io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..16 {
        let file = open_record_file(path, Access::Create)?;
        lock(&file, FlockArg::LockExclusiveNonblock, wait)?;
        let locked = file.metadata()?;
        match std::fs::symlink_metadata(path) {
            Ok(named) if (named.dev(), named.ino()) == (locked.dev(), locked.ino()) => {
                return Ok(file);
            }
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(
        "it was replaced each time the run opened it, sixteen times in a row",
    ))
}

/// Whether the file, `len` bytes long, is empty or ends with a line break.
fn ends_a_line(file: &File, len: u64) -> io::Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

/// An error for a line that no reader would take (over [`MAX_LINE`] with its line break): the
/// run's command line alone is that long.
pub(crate) fn fits_a_reader(line: &str) -> io::Result<()> {
    if line.len() < MAX_LINE {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "its line would hold {} bytes, more than the {} MiB a reader takes",
            line.len() + 1,
            MAX_LINE >> 20
        ),
    ))
}

/// Takes the lock, trying again after short sleeps for at most `wait` in all.
pub(crate) fn lock(file: &File, how: FlockArg, wait: Duration) -> io::Result<()> {
    match super::flock_within(file, how, wait, Duration::from_millis(10)) {
        Ok(()) => Ok(()),
        Err(super::LockError::Busy) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "another process held its lock for all of the {} the run could wait",
                crate::duration::hms(wait)
            ),
        )),
        Err(super::LockError::Os(e)) => Err(e.into()),
    }
}
