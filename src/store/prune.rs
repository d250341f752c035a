//! `retry --prune FILE --older-than DURATION` (docs/dead-letters.md#pruning): a record file
//! rewritten without what no one needs any more, while runs go on appending to it.
//!
//! - Of a dead-letter file it drops the runs resolved or forgotten, with every line about them,
//!   and the pending runs that gave up longer ago than DURATION; of a history, the runs that
//!   ended longer ago than that. A line it cannot date or place is kept: a prune never drops
//!   what it does not understand. Lines cut short (a write that never finished) go.
//! - The new file is written beside the old one, under a name no one else can have taken
//!   (0600), without the lock: runs append meanwhile. Then, holding the lock, it copies what
//!   was appended since it read, and renames the new file over the old one. The lock is kept
//!   only for that tail and the rename, so no run giving up waits on the prune for long.
//! - A run that opened the old file before the rename and takes its lock after it finds that
//!   the name now names another file, and opens it again (`record::append`): no line is
//!   written to a file no one will read.
//! - It holds the replay's hold on the file throughout: a replay meanwhile would append about
//!   runs the prune is dropping; the two refuse each other. Holding it, a prune knows that no
//!   other prune of the file is writing a new one, and removes those that killed prunes left.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use nix::fcntl::{self, FlockArg, OFlag};
use nix::sys::stat::Mode;

use crate::store::deadletter::{
    self, About, Damaged, Hold, MAX_FILE, ReadError, State, hold_for_replay,
};
use crate::store::lines::{self, Lines};
use crate::store::open::open_way;
use crate::store::record::{LOCK_WAIT, lock};

/// What a prune dropped and kept, counted in runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub kind: Kind,
    /// Runs a replay had resolved.
    pub resolved: u64,
    /// Runs an operator had forgotten.
    pub forgotten: u64,
    /// Pending runs (of a history: runs) older than the limit.
    pub old: u64,
    /// Runs kept; and those kept whose time could not be read (of a history: the lines kept
    /// that could not be dated), counted apart from them.
    pub kept: u64,
    pub kept_unread: u64,
    /// Lines cut short that were dropped.
    pub cut_short: u64,
    /// Bytes appended by others while the prune read, carried over.
    pub appended: u64,
    /// The runs among them (each counted in `kept` too).
    pub appended_runs: u64,
}

/// What a record file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    #[default]
    Empty,
    DeadLetters,
    History,
}

/// Why a file was not pruned.
#[derive(Debug)]
pub enum PruneError {
    Hold(Hold),
    Io(io::Error),
    /// A line of a dead-letter file that is not one `retry` writes: it is left as it is.
    Damaged(Damaged),
    /// The file holds neither dead letters nor a history.
    NotRecords,
    /// The new file could not be written, or put in the old one's place: the old one stands.
    Write(io::Error),
    /// The new file is in the old one's place, but the directory could not be synced.
    Unsynced(io::Error),
}

impl From<io::Error> for PruneError {
    fn from(e: io::Error) -> PruneError {
        PruneError::Io(e)
    }
}

/// Prunes `path`: drops what is settled, and what is older than `older_than` before `now`.
pub fn prune(path: &Path, older_than: Duration, now: SystemTime) -> Result<Pruned, PruneError> {
    let locked = hold_for_replay(path).map_err(PruneError::Hold)?;
    let meta = locked.metadata()?;
    // The pruned file replaces the name given: another name of the same file would keep the
    // old lines, and the two would go their own ways.
    if meta.nlink() > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the file has {} names (hard links), and a prune writes a new file under this one only: the others would keep every old line; remove them, or prune a copy",
                meta.nlink()
            ),
        )
        .into());
    }
    let size = meta.len();
    if size > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it holds {size} bytes, more than the {} GiB a record file may hold",
                MAX_FILE >> 30
            ),
        )
        .into());
    }
    let (dir, name) = place(path)?;
    // Holding the hold, no other prune of this file is writing a new one beside it: any such
    // file there was left by a prune that was killed.
    remove_stale(&dir, path, name);
    let whole = whole_lines(&locked, size)?;
    let kind = kind_of(&locked, whole)?;
    let cutoff = now
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut pruned = Pruned {
        kind,
        ..Pruned::default()
    };
    let keep = match kind {
        Kind::Empty => return Ok(pruned),
        Kind::DeadLetters => Keep::Letters(settled(&locked, whole, cutoff, &mut pruned)?),
        Kind::History => Keep::History(cutoff),
    };
    let temp = Temp::create(&dir, name).map_err(PruneError::Write)?;
    let result = rewrite(&locked, whole, &keep, &temp, &mut pruned)
        .map_err(|e| match e {
            Side::Old(e) => PruneError::Io(e),
            Side::New(e) => PruneError::Write(e),
        })
        .and_then(|()| swap(&locked, whole, &keep, &temp, &dir, name, &mut pruned));
    if result.is_err() {
        temp.remove();
    }
    result.map(|()| pruned)
}

/// The length of the file's whole lines among its first `size` bytes: a line being appended
/// as the prune reads is left for the copy under the lock.
fn whole_lines(file: &File, size: u64) -> io::Result<u64> {
    let mut end = size;
    let mut block = vec![0u8; 1 << 16];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let part = &mut block[..(end - start) as usize];
        file.read_exact_at(part, start)?;
        if let Some(at) = part.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// What the file holds, from its first line's event: read as `retry` writes it, or by the
/// parser (a line written by another tool, its members in another order).
fn kind_of(file: &File, whole: u64) -> Result<Kind, PruneError> {
    let mut lines = Lines::new(read_from(file, whole)?);
    let text = loop {
        match lines.next_line()? {
            None => return Ok(Kind::Empty),
            Some((_, lines::Line::Blank)) => continue,
            Some((_, lines::Line::Text(text))) => break text,
            Some(_) => return Err(PruneError::NotRecords),
        }
    };
    let event = if text.starts_with(r#"{"event":"dead_letter""#) {
        Some("dead_letter".to_string())
    } else if text.starts_with(r#"{"event":"run""#) {
        Some("run".to_string())
    } else {
        crate::json::parse_line(text)
            .ok()
            .and_then(|v| v.get("event")?.as_str().map(str::to_string))
    };
    match event.as_deref() {
        Some("dead_letter") => Ok(Kind::DeadLetters),
        Some("run") => Ok(Kind::History),
        _ => Err(PruneError::NotRecords),
    }
}

/// The file's first `len` bytes, read from its start.
fn read_from(mut file: &File, len: u64) -> io::Result<BufReader<io::Take<&File>>> {
    io::Seek::seek(&mut file, io::SeekFrom::Start(0))?;
    Ok(BufReader::with_capacity(1 << 16, file.take(len)))
}

/// Which lines go to the new file.
enum Keep {
    /// Of a dead-letter file: the runs kept (every line about another run goes).
    Letters(HashMap<String, ()>),
    /// Of a history: the runs that ended at this time or later.
    History(SystemTime),
}

/// The runs of a dead-letter file's first `whole` bytes to keep: pending, and recorded at
/// `cutoff` or later, or at a time that cannot be read (counted apart). Counts the others in
/// `pruned`. The file is read as a replay reads it: a line a replay would refuse is refused
/// here too, and the file is left as it is.
fn settled(
    file: &File,
    whole: u64,
    cutoff: SystemTime,
    pruned: &mut Pruned,
) -> Result<HashMap<String, ()>, PruneError> {
    let (runs, _) =
        deadletter::weigh_from(read_from(file, whole)?, whole).map_err(|e| match e {
            ReadError::Io(e) => PruneError::Io(e),
            ReadError::Damaged(d) => PruneError::Damaged(d),
        })?;
    let mut keep = HashMap::new();
    for run in runs {
        match run.state {
            State::Resolved => pruned.resolved += 1,
            State::Forgotten => pruned.forgotten += 1,
            State::Pending => {
                match humantime::parse_rfc3339(&run.ts) {
                    Ok(at) if at < cutoff => {
                        pruned.old += 1;
                        continue;
                    }
                    Ok(_) => pruned.kept += 1,
                    // A time that cannot be read: a prune never drops what it cannot date.
                    Err(_) => pruned.kept_unread += 1,
                }
                keep.insert(run.id, ());
            }
        }
    }
    Ok(keep)
}

/// When a history line says its run ended, as `retry` writes it (`{"event":"run","id":"..",
/// "ts":"..",...}`), or by the parser.
fn ended_at(text: &str) -> Option<SystemTime> {
    let fast = text
        .strip_prefix(r#"{"event":"run","id":""#)
        .and_then(|rest| rest.split_once(r#"","ts":""#))
        .filter(|(id, _)| !id.contains('"') && !id.contains('\\'))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(ts, _)| ts.to_string());
    let ts = match fast {
        Some(ts) => ts,
        None => {
            let value = crate::json::parse_line(text).ok()?;
            value.get("ts")?.as_str()?.to_string()
        }
    };
    humantime::parse_rfc3339(&ts).ok()
}

/// Writes the lines of the file's first `whole` bytes that `keep` keeps to `temp`.
fn rewrite(
    file: &File,
    whole: u64,
    keep: &Keep,
    temp: &Temp,
    pruned: &mut Pruned,
) -> Result<(), Side> {
    let mut out = BufWriter::with_capacity(1 << 16, &temp.file);
    let mut lines = Lines::new(read_from(file, whole).map_err(Side::Old)?);
    while let Some((_, text)) = lines.next_line().map_err(Side::Old)? {
        let text = match text {
            lines::Line::Text(text) => text,
            lines::Line::CutShort => {
                pruned.cut_short += 1;
                continue;
            }
            _ => continue,
        };
        let kept = match keep {
            Keep::Letters(runs) => match deadletter::about(text) {
                Ok(Some(About::Record(id) | About::Attempt(id))) => runs.contains_key(&id),
                Ok(Some(About::Settled(_))) => false,
                // Ended too soon: the start of a line whose write never finished.
                Ok(None) => {
                    pruned.cut_short += 1;
                    false
                }
                // Read once already as a replay reads it: none is left.
                Err(_) => true,
            },
            Keep::History(cutoff) => match ended_at(text) {
                Some(at) if at >= *cutoff => {
                    pruned.kept += 1;
                    true
                }
                Some(_) => {
                    pruned.old += 1;
                    false
                }
                None => {
                    pruned.kept_unread += 1;
                    true
                }
            },
        };
        if kept {
            out.write_all(text.as_bytes()).map_err(Side::New)?;
            out.write_all(b"\n").map_err(Side::New)?;
        }
    }
    out.flush().map_err(Side::New)?;
    drop(out);
    temp.file.sync_data().map_err(Side::New)
}

/// Which file an error of the rewrite was met on: the old one, read, or the new one, written.
enum Side {
    Old(io::Error),
    New(io::Error),
}

/// Under the file's lock: copies to `temp` what was appended after its first `whole` bytes,
/// and renames `temp` over it.
fn swap(
    file: &File,
    whole: u64,
    keep: &Keep,
    temp: &Temp,
    dir: &File,
    name: &std::ffi::OsStr,
    pruned: &mut Pruned,
) -> Result<(), PruneError> {
    lock(file, FlockArg::LockExclusiveNonblock, LOCK_WAIT)?;
    let end = file.metadata()?.len();
    let mut at = whole;
    let mut buf = vec![0u8; 1 << 16];
    while at < end {
        let n = file.read_at(&mut buf[..(end - at).min(1 << 16) as usize], at)?;
        if n == 0 {
            break;
        }
        (&temp.file)
            .write_all(&buf[..n])
            .map_err(PruneError::Write)?;
        at += n as u64;
    }
    pruned.appended = at - whole;
    let runs = runs_in(file, whole, at, keep)?;
    pruned.appended_runs = runs;
    pruned.kept += runs;
    temp.file.sync_data().map_err(PruneError::Write)?;
    fcntl::renameat(dir, &*temp.name, dir, name).map_err(|e| PruneError::Write(e.into()))?;
    // The rename on disk before the lock goes. The way's directory may be open only to be
    // searched (O_PATH), which cannot be synced: it is opened again to be read.
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    fcntl::openat(dir, ".", flags, Mode::empty())
        .map_err(io::Error::from)
        .and_then(|readable| File::from(readable).sync_all())
        .map_err(PruneError::Unsynced)
}

/// The runs recorded in the bytes of the file from `start` to `end`, which were appended while
/// the prune read and are kept as they are: of a dead-letter file its `dead_letter` lines, of a
/// history its lines that say when their run ended.
fn runs_in(mut file: &File, start: u64, end: u64, keep: &Keep) -> io::Result<u64> {
    if end == start {
        return Ok(0);
    }
    io::Seek::seek(&mut file, io::SeekFrom::Start(start))?;
    let mut lines = Lines::new(BufReader::with_capacity(1 << 16, file.take(end - start)));
    let mut runs = 0;
    while let Some((_, line)) = lines.next_line()? {
        let lines::Line::Text(text) = line else {
            continue;
        };
        let run = match keep {
            Keep::Letters(_) => matches!(deadletter::about(text), Ok(Some(About::Record(_)))),
            Keep::History(_) => ended_at(text).is_some(),
        };
        runs += u64::from(run);
    }
    Ok(runs)
}

/// The directory of `path`, opened as record files are (every directory checked), and the
/// file's name in it.
fn place(path: &Path) -> io::Result<(File, &std::ffi::OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("it names no file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((open_way(dir, false)?, name))
}

/// The name of a prune's new file for the file `name`, beside it: `.NAME.prune-` and 16 hex
/// digits.
fn temp_name(name: &std::ffi::OsStr, random: u64) -> std::ffi::OsString {
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(".prune-{random:016x}"));
    temp
}

/// Whether `entry` is the name of a prune's new file for the file `name`.
fn is_temp_of(entry: &std::ffi::OsStr, name: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let prefix = temp_name(name, 0);
    let prefix = &prefix.as_bytes()[..prefix.len() - 16];
    entry.as_bytes().strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == 16 && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Removes from `dir` the new files that prunes of the file `name` (at `path`) left when they
/// were killed (SIGKILL, a crash of the machine): full-size private copies that nothing else
/// would ever remove. Only the caller's own regular files of that exact name are removed, each
/// by its name in the directory the way checked; one that cannot be removed stays, unsaid.
fn remove_stale(dir: &File, path: &Path, name: &std::ffi::OsStr) {
    use nix::sys::stat::{FileStat, SFlag, fstatat};
    let listed = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => std::fs::read_dir(d),
        _ => std::fs::read_dir("."),
    };
    let Ok(listed) = listed else {
        return;
    };
    let me = crate::store::open::euid();
    let ours = |st: &FileStat| {
        SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG && st.st_uid == me
    };
    for entry in listed.flatten() {
        let entry = entry.file_name();
        if !is_temp_of(&entry, name) {
            continue;
        }
        let flags = fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
        if fstatat(dir, &*entry, flags).is_ok_and(|st| ours(&st)) {
            let _ = nix::unistd::unlinkat(dir, &*entry, nix::unistd::UnlinkatFlags::NoRemoveDir);
        }
    }
}

/// The new file, beside the old one under a name no other process can have taken.
struct Temp {
    file: File,
    dir: File,
    name: std::ffi::OsString,
}

impl Temp {
    fn create(dir: &File, name: &std::ffi::OsStr) -> io::Result<Temp> {
        for _ in 0..16 {
            let temp = temp_name(name, rand::random::<u64>());
            let flags = OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_RDWR
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            match fcntl::openat(dir, &*temp, flags, Mode::S_IRUSR | Mode::S_IWUSR) {
                Ok(fd) => {
                    return Ok(Temp {
                        file: File::from(fd),
                        dir: dir.try_clone()?,
                        name: temp,
                    });
                }
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::other("cannot create the new file beside it"))
    }

    /// Removes the new file: the prune failed, and the old file stands.
    fn remove(&self) {
        let _ = nix::unistd::unlinkat(
            &self.dir,
            &*self.name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
}
