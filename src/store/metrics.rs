//! The `--metrics` file (docs/dashboards.md#metrics): the series of every job that writes to
//! it, in the text format node_exporter's textfile collector reads. A run merges its own into
//! it under the lock of a file beside it (`FILE.lock`): it reads the file back, adds its run, writes
//! the whole to a new file in the same directory, syncs it and renames it over the file, so
//! that a reader never sees half of one. The way to it and the file are checked as a record
//! file's (docs/files.md#files-that-outlive-a-run), but a system account may own a directory
//! on the way (node_exporter's directory under `/var/lib/prometheus`), and the file is left
//! readable by others (mode 0644): the collector runs as its own account, and the file holds
//! counts, never a command line.

pub mod text;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use nix::fcntl::{FlockArg, renameat};
use nix::sys::stat::{Mode, fchmod};
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::store::open::{Access, create_new_in, open_in, open_shared_way};
use crate::store::record::lock;
use crate::store::refusal::Refusal;
use text::{Metrics, RunMetrics};

/// The largest file read back: far more than thousands of jobs' series.
pub const MAX_FILE: u64 = 16 << 20;

/// Merges `run` into the file at `path`, waiting at most `wait` for its lock.
pub fn merge(path: &Path, run: &RunMetrics, wait: Duration) -> io::Result<()> {
    let (dir, name) = directory(path)?;
    let dir = open_shared_way(dir)?;
    let mut lock_name = name.to_os_string();
    lock_name.push(".lock");
    // Its refusal names it: the warning names FILE, which may not even be there.
    let locked = open_in(&dir, &lock_name, Access::Create).map_err(|e| {
        let shown = crate::text::printable(&lock_name.to_string_lossy());
        io::Error::new(e.kind(), format!("its lock file '{shown}': {e}"))
    })?;
    lock(&locked, FlockArg::LockExclusiveNonblock, wait)?;
    remove_left_behind(&dir, name);
    let mut metrics = read(&dir, name)?;
    metrics.add(run);
    replace(&dir, name, metrics.render().as_bytes())
    // Closing `locked` releases the lock, once the new file has its name.
}

/// The directory of `path` and the name of the file in it.
fn directory(path: &Path) -> io::Result<(&Path, &OsStr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let ends_as_dir = bytes.ends_with(b"/") || bytes.ends_with(b"/.") || bytes == b".";
    let name = path
        .file_name()
        .filter(|_| !ends_as_dir)
        .ok_or(Refusal::NotRegular("a directory"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// What the file holds now: nothing when it is missing; an error when it is not `retry`'s.
fn read(dir: &File, name: &OsStr) -> io::Result<Metrics> {
    let file = match open_in(dir, name, Access::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Metrics::default()),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it holds more than the {} MiB retry reads back",
                MAX_FILE >> 20
            ),
        ));
    }
    let not_ours = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it holds something other than retry's metrics ({why}); it is left as it is"),
        )
    };
    let text = String::from_utf8(bytes).map_err(|_| not_ours("bytes that are not UTF-8".into()))?;
    Metrics::parse(&text).map_err(|damaged| not_ours(damaged.to_string()))
}

/// Replaces `name` in `dir` with `bytes`: a new file beside it, written, synced, made readable
/// by the collector, renamed over it. On any failure the new file is removed and the old one
/// stays.
fn replace(dir: &File, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
    let (temp, mut file) = create_beside(dir, name)?;
    let readable = Mode::S_IRUSR | Mode::S_IWUSR | Mode::S_IRGRP | Mode::S_IROTH;
    let done = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| fchmod(&file, readable).map_err(io::Error::from))
        .and_then(|()| renameat(dir, temp.as_os_str(), dir, name).map_err(io::Error::from));
    if done.is_err() {
        let _ = unlinkat(dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    done
}

/// Removes the new files of `name` that runs killed while they wrote left behind: each is
/// made only under the lock, which the caller holds, so none is being written now. Only the
/// names [`create_beside`] gives are looked at; a directory that cannot be listed is left as
/// it is.
fn remove_left_behind(dir: &File, name: &OsStr) {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(name.as_bytes());
    prefix.push(b'.');
    for entry in entries.flatten() {
        let found = entry.file_name();
        let left = found
            .as_bytes()
            .strip_prefix(prefix.as_slice())
            .and_then(|rest| rest.strip_suffix(b".tmp"))
            .and_then(|rest| {
                let dash = rest.iter().position(|&b| b == b'-')?;
                let (pid, k) = (&rest[..dash], &rest[dash + 1..]);
                let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
                (digits(pid) && digits(k)).then_some(())
            });
        if left.is_some() {
            let _ = unlinkat(dir, found.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
}

/// A new file beside `name` that no other process has opened, named so that the textfile
/// collector (which reads `*.prom`) passes it over, and its name.
fn create_beside(dir: &File, name: &OsStr) -> io::Result<(OsString, File)> {
    let pid = std::process::id();
    let mut k = 0;
    loop {
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(".{pid}-{k}.tmp"));
        match create_new_in(dir, &temp) {
            Ok(file) => return Ok((temp, file)),
            // Left by a process of the same pid that was killed while it wrote.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && k < 100 => k += 1,
            Err(e) => return Err(e),
        }
    }
}
