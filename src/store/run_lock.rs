//! The file of `--lock NAME` (docs/processes.md#one-run-at-a-time): `NAME.lock` in the user's
//! lock directory, `~/.local/state/retry/locks/` with the home directory from the password
//! database, made and checked as the quota's files are (`file::PrivateFile`); or, for a NAME
//! with a `/`, that file, opened by the rules of a record file (`open::open_record_file`).
//! Where a plain NAME's lock lives depends on nothing in the environment: a cron job and the
//! same command run from a login shell lock the same file (docs/decisions.md says why).
//!
//! A run holds the lock as a `flock` on its open file from before its first try to after its
//! records are written. The lock belongs to the open file: it goes when the file is closed,
//! which the kernel does whatever ends `retry`, SIGKILL included; the file is opened
//! close-on-exec, so no try or hook inherits it. The file is never removed: a run that had it
//! open, waiting, would lock a file nobody else sees.
//!
//! The holder writes who it is into the file (host, pid, run id, since when) and the fencing
//! token of its grant, one more than the last; a run turned away reads them back. The holder
//! cuts the file back to its token before it lets go, and a reader trusts the details only when
//! the kernel's table of locks names the pid they name: a lock file held by another program
//! (`flock FILE …`), or by a run killed before it let go, is not said to be held by a run that
//! ended.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{self, FlockArg};

use crate::policy::lock::{DoneBefore, LockHolder, LockRecord, LockSpec, RECORD_MAX, is_path};
use crate::store::file::{PrivateFile, StoreError};
use crate::store::open::{Access, euid, open_record_file, open_way};

/// The user's lock directory, below the home directory.
const LOCK_DIR: &str = ".local/state/retry/locks";

/// The user's directory of `--once` keys, below the home directory.
const ONCE_DIR: &str = ".local/state/retry/once";

/// What a user whose plain NAME cannot have its lock directory can do instead.
const GIVE_A_PATH: &str =
    "the path of a lock file in a directory of yours instead (a NAME with a '/')";

/// Where the lock of `--lock NAME` is.
#[derive(Clone, Debug)]
pub enum LockPlace {
    /// A plain NAME: `NAME.lock` in the user's lock directory.
    Home(PrivateFile),
    /// A NAME with a `/`: the lock file's path.
    Path(PathBuf),
    /// A plain NAME of a user with no usable home directory: the lock directory it would have
    /// had (`~/...` when the home is not known), and why.
    NoHome { dir: PathBuf, why: String },
}

/// The place of the lock `name` for the effective user: the file `name` names when it has a
/// `/`, else `name.lock` in the lock directory below the home directory that the password
/// database gives (never `$HOME`, which cron and `sudo` set otherwise than a login does).
pub fn place(name: &str) -> LockPlace {
    place_in(name, LOCK_DIR, "lock")
}

/// The place of `--lock`'s lock or of `--once`'s key, as `spec` is one or the other: a plain
/// KEY of `--once` is `KEY.once` in `~/.local/state/retry/once/`.
pub fn place_of(spec: &LockSpec) -> LockPlace {
    match spec.once {
        Some(_) => place_in(&spec.name, ONCE_DIR, "once"),
        None => place(&spec.name),
    }
}

fn place_in(name: &str, dir: &str, ext: &str) -> LockPlace {
    if is_path(name) {
        return LockPlace::Path(PathBuf::from(name));
    }
    match home() {
        Ok(home) => LockPlace::Home(PrivateFile::new(home.join(dir), format!("{name}.{ext}"))),
        Err((home, why)) => LockPlace::NoHome {
            dir: home.unwrap_or_else(|| PathBuf::from("~")).join(dir),
            why,
        },
    }
}

/// The effective user's home directory from the password database (`getpwuid_r`): an absolute
/// path to a directory; else the home it names, if any, and why it cannot be used.
fn home() -> Result<PathBuf, (Option<PathBuf>, String)> {
    let uid = euid();
    let user = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user,
        Ok(None) => {
            return Err((
                None,
                format!("uid {uid} has no entry in the password database"),
            ));
        }
        Err(e) => {
            return Err((
                None,
                format!("the password database cannot be read for uid {uid}: {e}"),
            ));
        }
    };
    let home = user.dir;
    let why = match std::fs::metadata(&home) {
        _ if !home.is_absolute() => "is not an absolute path".to_string(),
        Ok(meta) if meta.is_dir() => return Ok(home),
        Ok(_) => "is not a directory".to_string(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => "does not exist".to_string(),
        Err(e) => format!("cannot be used: {e}"),
    };
    let why = format!(
        "the home directory of uid {uid} in the password database, '{}', {why}",
        home.display()
    );
    Err((Some(home), why))
}

impl LockPlace {
    /// The lock's file.
    pub fn path(&self) -> PathBuf {
        match self {
            LockPlace::Home(file) => file.path(),
            LockPlace::Path(path) => path.clone(),
            LockPlace::NoHome { dir, .. } => dir.clone(),
        }
    }

    /// Opens the lock's file, made if missing with `create` (a plain NAME's directories too,
    /// 0700); `None` when it is not there and `create` is not set.
    fn open(&self, create: bool) -> Result<Option<File>, StoreError> {
        match self {
            LockPlace::Home(file) => {
                let ways = file.dir().parent().unwrap_or(Path::new("/"));
                if create {
                    open_way(ways, true).map_err(|e| no_dir(file.dir(), &e.to_string()))?;
                } else if std::fs::symlink_metadata(file.dir()).is_err() {
                    return Ok(None);
                }
                file.open(create)
            }
            LockPlace::Path(path) => {
                let access = if create { Access::Lock } else { Access::Read };
                // Not there: a file that a run would make, unless its directory is missing too,
                // which a run does not make (the dry run then fails as the run would).
                let dir_there = || {
                    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
                    std::fs::symlink_metadata(dir.unwrap_or(Path::new("."))).is_ok()
                };
                match open_record_file(path, access) {
                    Ok(file) => Ok(Some(file)),
                    Err(e) if !create && e.kind() == io::ErrorKind::NotFound && dir_there() => {
                        Ok(None)
                    }
                    Err(source) => Err(StoreError::Io {
                        action: "open",
                        path: path.clone(),
                        source,
                    }),
                }
            }
            LockPlace::NoHome { dir, why } => Err(no_dir(dir, why)),
        }
    }
}

/// The lock directory `dir` of a plain NAME cannot be made or opened, for the reason `why`.
fn no_dir(dir: &Path, why: &str) -> StoreError {
    StoreError::Io {
        action: "make the lock directory",
        path: dir.to_path_buf(),
        source: io::Error::other(format!(
            "{why}; give {} {GIVE_A_PATH}",
            match dir.ends_with(ONCE_DIR) {
                true => "--once",
                false => "--lock",
            }
        )),
    }
}

/// Why a lock file whose fencing token is not a number is not used.
const BAD_TOKEN: &str = "its fencing token is not a number; remove the file to count from 1 again";

/// Why a lock file whose fencing token is at its largest is not used.
const LAST_TOKEN: &str =
    "its fencing token is at its largest value; remove the file to count from 1 again";

/// What asking for a `--once` key's claim came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnceTaken {
    /// The claim is this process's, with this fencing token.
    Granted(u64),
    /// Another run holds it now.
    Held(LockHolder),
    /// A run marked the key done, recently enough.
    Done(DoneBefore),
    /// The key is bound to the command of this digest, not the one asked for.
    Other(String),
}

/// A lock's file, open; the lock is this process's from a grant of [`LockFile::try_take`] until
/// this is dropped.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    name: String,
    path: PathBuf,
    /// The fencing token of this process's grant, while it holds the lock.
    granted: Cell<Option<u64>>,
}

impl LockFile {
    /// Opens the lock `name` at `place`, made if missing.
    pub fn open(place: &LockPlace, name: &str) -> Result<LockFile, StoreError> {
        let missing = || StoreError::Io {
            action: "open",
            path: place.path(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        let file = place.open(true)?.ok_or_else(missing)?;
        Ok(LockFile {
            file,
            name: name.to_string(),
            path: place.path(),
            granted: Cell::new(None),
        })
    }

    /// Takes the lock without blocking: the grant's fencing token, one more than the last one
    /// the file holds, written with `me` into the file; `None` when another process holds it.
    pub fn try_take(&self, me: &LockHolder) -> Result<Option<u64>, StoreError> {
        if !self.try_flock()? {
            return Ok(None);
        }
        let last = self.record()?;
        self.grant(&last, me, "").map(Some)
    }

    /// Takes the claim on a `--once` key without blocking, for the command of digest
    /// `command`: granted (the lock is this process's, with its token) unless another
    /// process holds it, or the key was marked done at or after `since_ms`, or the key is
    /// bound to another command (held now, or done since then). Only a grant keeps the lock.
    pub fn try_take_once(
        &self,
        me: &LockHolder,
        command: &str,
        since_ms: u64,
    ) -> Result<OnceTaken, StoreError> {
        let taken = self.try_flock()?;
        let last = self.record()?;
        // Another run that holds the file of a key done may be only looking, as this one is.
        let done = last.done_since(since_ms);
        // A key given up, or done too long ago, is bound to no command any more.
        let kept = done.is_some() || !taken;
        let found = match (done, last.command.as_str()) {
            (_, theirs) if kept && !theirs.is_empty() && theirs != command => {
                OnceTaken::Other(theirs.to_string())
            }
            (Some(done), _) => OnceTaken::Done(done),
            (None, _) if !taken => OnceTaken::Held(last.holder),
            (None, _) => return self.grant(&last, me, command).map(OnceTaken::Granted),
        };
        if taken {
            self.unlock();
        }
        Ok(found)
    }

    /// Marks the `--once` key that this process holds with `token` done by `me` at `at_ms`.
    pub fn mark_done(
        &self,
        me: &LockHolder,
        token: u64,
        command: &str,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        self.write(&LockRecord {
            token,
            token_damaged: false,
            holder: me.clone(),
            command: command.to_string(),
            done_ms: Some(at_ms),
        })?;
        // The record of a key done stays whole when the claim goes: it says who did it.
        self.granted.set(None);
        Ok(())
    }

    /// Takes the `flock` without blocking: whether it is this process's now.
    fn try_flock(&self) -> Result<bool, StoreError> {
        loop {
            #[allow(deprecated)]
            match fcntl::flock(self.file.as_raw_fd(), FlockArg::LockExclusiveNonblock) {
                Ok(()) => return Ok(true),
                Err(Errno::EINTR) => continue,
                Err(Errno::EWOULDBLOCK) => return Ok(false),
                Err(e) => return Err(self.failed("lock", io::Error::from(e))),
            }
        }
    }

    /// Lets go of the `flock` taken but not granted.
    fn unlock(&self) {
        #[allow(deprecated)]
        let _ = fcntl::flock(self.file.as_raw_fd(), FlockArg::Unlock);
    }

    /// Grants the lock, held now, whose file read `last`, to `me` (for `command` under
    /// `--once`): the grant's token, written with them into the file.
    fn grant(&self, last: &LockRecord, me: &LockHolder, command: &str) -> Result<u64, StoreError> {
        // The file is whole here, under the lock: a token that is not a number, or is at its
        // largest, cannot give a grant a higher one than the last, and a resource that checks
        // tokens would take the next holder for a stale one, or a stale one for the next.
        let token = match (last.token_damaged, last.token.checked_add(1)) {
            (false, Some(token)) => token,
            (true, _) => return Err(self.failed("use", io::Error::other(BAD_TOKEN))),
            (false, None) => return Err(self.failed("use", io::Error::other(LAST_TOKEN))),
        };
        self.write(&LockRecord {
            token,
            token_damaged: false,
            holder: me.clone(),
            command: command.to_string(),
            done_ms: None,
        })?;
        self.granted.set(Some(token));
        Ok(token)
    }

    /// Writes `record` over the file's text, under the lock.
    fn write(&self, record: &LockRecord) -> Result<(), StoreError> {
        let text = record.encode();
        // One write at offset 0, then the rest cut: a reader sees whole lines of one record.
        match self.file.write_at(text.as_bytes(), 0) {
            Ok(n) if n == text.len() => {}
            Ok(_) => {
                let short = io::Error::new(io::ErrorKind::WriteZero, "part of the record written");
                return Err(self.failed("write", short));
            }
            Err(e) => return Err(self.failed("write", e)),
        }
        self.file
            .set_len(text.len() as u64)
            .map_err(|e| self.failed("truncate", e))
    }

    /// Who holds the lock, as the file says, when the kernel's table of locks says that the
    /// pid the file names holds it; else only the pid the table names (a process that is no
    /// run of `retry`, or one that has not written its details yet), or nothing when the
    /// table names none in this pid namespace. Where the table cannot be read, the file.
    pub fn holder(&self) -> LockHolder {
        let unknown = || LockHolder {
            name: self.name.clone(),
            ..LockHolder::default()
        };
        let written = self
            .record()
            .map(|r| r.holder)
            .unwrap_or_else(|_| unknown());
        let Some(pids) = self.flockers() else {
            return written;
        };
        match pids.first() {
            // Let go meanwhile: the file is all there is to say.
            None => written,
            Some(_) if written.pid.is_some_and(|pid| pids.contains(&pid)) => written,
            Some(&pid) => LockHolder {
                pid: (pid > 0).then_some(pid),
                ..unknown()
            },
        }
    }

    /// The pids that hold a `flock` on the lock's file, as `/proc/locks` lists them; `None`
    /// when it cannot be read.
    fn flockers(&self) -> Option<Vec<u32>> {
        let meta = self.file.metadata().ok()?;
        let table = std::fs::read_to_string("/proc/locks").ok()?;
        Some(flock_pids(&table, meta.dev(), meta.ino()))
    }

    /// The lock's file.
    pub fn path(&self) -> &PathBuf {
        &self.path
    }

    fn record(&self) -> Result<LockRecord, StoreError> {
        let mut buf = vec![0u8; RECORD_MAX];
        let mut len = 0;
        while len < buf.len() {
            match self.file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.failed("read", e)),
            }
        }
        let text = String::from_utf8_lossy(&buf[..len]);
        Ok(LockRecord::decode(&self.name, &text))
    }

    fn failed(&self, action: &'static str, source: io::Error) -> StoreError {
        StoreError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }
}

impl Drop for LockFile {
    /// Cuts the file back to its token line before the lock goes with the file: whoever holds
    /// the lock next without writing its details (another program) is not taken for this run.
    /// The token line is the record's first, so one truncation leaves it whole.
    fn drop(&mut self) {
        if let Some(token) = self.granted.take() {
            let _ = self.file.set_len(format!("token={token}\n").len() as u64);
        }
    }
}

/// Whether the lock `name` at `place` is taken now, for the dry run, without taking it or making
/// anything: `None` when it is free (or its file not made yet), else who holds it. Read from
/// `/proc/locks`; where that does not list it, a shared lock is tried for an instant. The kernel
/// writes the table a page at a time, and a line can be missed when locks listed before it go
/// between two pages: the table alone would call a held lock free.
pub fn peek(place: &LockPlace, name: &str) -> Result<Option<LockHolder>, StoreError> {
    let Some(file) = place.open(false)? else {
        return Ok(None);
    };
    let lock = LockFile {
        file,
        name: name.to_string(),
        path: place.path(),
        granted: Cell::new(None),
    };
    let meta = lock
        .file
        .metadata()
        .map_err(|e| lock.failed("inspect", e))?;
    let listed = std::fs::read_to_string("/proc/locks")
        .is_ok_and(|table| flocked_in(&table, meta.dev(), meta.ino()));
    #[allow(deprecated)]
    let taken = listed
        || match fcntl::flock(lock.file.as_raw_fd(), FlockArg::LockSharedNonblock) {
            Ok(()) => false,
            Err(Errno::EWOULDBLOCK) => true,
            Err(e) => return Err(lock.failed("lock", io::Error::from(e))),
        };
    Ok(taken.then(|| lock.holder()))
}

/// What a run of `--once`'s key `name` at `place` would find now, for the dry run, without
/// taking or making anything: the run that did it, when it was done at or after `since_ms`;
/// else who holds it, if anyone; and the digest of the command that the key is bound to while
/// it is done or held (empty when it is free).
pub fn peek_once(
    place: &LockPlace,
    name: &str,
    since_ms: u64,
) -> Result<(Option<LockHolder>, Option<DoneBefore>, String), StoreError> {
    let Some(file) = place.open(false)? else {
        return Ok((None, None, String::new()));
    };
    let lock = LockFile {
        file,
        name: name.to_string(),
        path: place.path(),
        granted: Cell::new(None),
    };
    let record = lock.record()?;
    if let Some(done) = record.done_since(since_ms) {
        return Ok((None, Some(done), record.command));
    }
    match peek(place, name)? {
        Some(holder) => Ok((Some(holder), None, record.command)),
        None => Ok((None, None, String::new())),
    }
}

/// Whether `/proc/locks` (`table`) lists a granted `flock` on the file of device `dev` and
/// inode `ino`.
fn flocked_in(table: &str, dev: u64, ino: u64) -> bool {
    !flock_pids(table, dev, ino).is_empty()
}

/// The pids of the granted `flock`s that `/proc/locks` (`table`) lists on the file of device
/// `dev` and inode `ino`. Its lines read `1: FLOCK  ADVISORY  WRITE 4242 00:1f:1234 0 EOF`,
/// with the device's major and minor numbers in hexadecimal; a waiter's line has `->` after
/// the number. A holder outside this pid namespace is listed with pid 0 (or -1).
fn flock_pids(table: &str, dev: u64, ino: u64) -> Vec<u32> {
    let want = format!(
        "{:02x}:{:02x}:{ino}",
        nix::libc::major(dev),
        nix::libc::minor(dev)
    );
    table
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let ours = fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&want.as_str());
            ours.then(|| {
                fields
                    .get(4)
                    .and_then(|p| p.parse::<u32>().ok())
                    .unwrap_or(0)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pid: u32) -> LockHolder {
        LockHolder {
            name: "job".into(),
            host: "here".into(),
            pid: Some(pid),
            run_id: format!("run-{pid}"),
            since: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn one_open_file_at_a_time_holds_the_lock_and_each_grant_has_a_higher_token() {
        let dir = std::env::temp_dir().join(format!("retry-lock-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let place = LockPlace::Home(PrivateFile::new(dir.join("retry"), "job.lock".into()));
        assert_eq!(peek(&place, "job").unwrap(), None);
        // The kernel's table of locks names this process as the holder: so must the file.
        let me = holder(std::process::id());
        let first = LockFile::open(&place, "job").unwrap();
        assert_eq!(first.try_take(&me).unwrap(), Some(1));
        let second = LockFile::open(&place, "job").unwrap();
        assert_eq!(second.try_take(&holder(2)).unwrap(), None);
        assert_eq!(second.holder(), me);
        assert_eq!(peek(&place, "job").unwrap(), Some(me));
        drop(first);
        // Let go, the file keeps the token only.
        assert_eq!(std::fs::read_to_string(place.path()).unwrap(), "token=1\n");
        // Other tests' threads fork children at any moment, and a child between its fork and
        // its exec holds a copy of every descriptor open then: the lock goes when the last
        // copy is closed, soon.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let token = loop {
            match second.try_take(&holder(2)).unwrap() {
                Some(token) => break token,
                None if std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                None => panic!("the lock was never let go"),
            }
        };
        assert_eq!(token, 2);
        let meta = std::fs::metadata(place.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let dir_meta = std::fs::metadata(dir.join("retry")).unwrap();
        assert_eq!(dir_meta.mode() & 0o777, 0o700);
        drop(second);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_once_key_is_granted_held_done_or_another_commands_and_free_once_given_up_or_expired() {
        let dir = std::env::temp_dir().join(format!("retry-once-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let place = LockPlace::Path(dir.join("job.once"));
        let first = LockFile::open(&place, "job").unwrap();
        assert_eq!(
            first.try_take_once(&holder(1), "aa", 0).unwrap(),
            OnceTaken::Granted(1)
        );
        let second = LockFile::open(&place, "job").unwrap();
        assert_eq!(
            second.try_take_once(&holder(2), "aa", 0).unwrap(),
            OnceTaken::Held(holder(1))
        );
        assert_eq!(
            second.try_take_once(&holder(2), "bb", 0).unwrap(),
            OnceTaken::Other("aa".into())
        );
        first.mark_done(&holder(1), 1, "aa", 5000).unwrap();
        // A key done is done to every run, the holder's lock let go yet or not.
        let by = DoneBefore {
            by: holder(1),
            at_ms: 5000,
        };
        assert_eq!(
            second.try_take_once(&holder(2), "aa", 5000).unwrap(),
            OnceTaken::Done(by)
        );
        assert_eq!(
            second.try_take_once(&holder(2), "bb", 5000).unwrap(),
            OnceTaken::Other("aa".into())
        );
        drop(first);
        // Done longer ago than the period: free, for any command, once the lock is let go (as
        // above, when the last copy of the descriptor is closed, soon). Until then the key is
        // still held by a run of "aa", and another command is told so.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let taken = loop {
            match second.try_take_once(&holder(2), "bb", 5001).unwrap() {
                OnceTaken::Held(_) | OnceTaken::Other(_) if std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                found => break found,
            }
        };
        assert_eq!(taken, OnceTaken::Granted(2));
        drop(second);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_token_that_is_not_a_number_or_is_at_its_largest_grants_nothing() {
        let dir = std::env::temp_dir().join(format!("retry-lock-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let place = LockPlace::Path(dir.join("job.lock"));
        let file = LockFile::open(&place, "job").unwrap();
        for text in ["token=abc\n", &format!("token={}\n", u64::MAX)] {
            std::fs::write(place.path(), text).unwrap();
            let refused = file.try_take(&holder(1));
            assert!(refused.is_err(), "{text}: {refused:?}");
        }
        std::fs::write(place.path(), "token=41\n").unwrap();
        assert_eq!(file.try_take(&holder(1)).unwrap(), Some(42));
        drop(file);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_granted_flock_is_found_in_the_kernels_table_and_a_waiter_is_not() {
        let dev = nix::libc::makedev(0, 0x1f);
        let table = "1: FLOCK  ADVISORY  WRITE 4242 00:1f:1234 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 4243 00:1f:99 0 EOF\n";
        assert!(flocked_in(table, dev, 1234));
        assert!(!flocked_in(table, dev, 99));
        assert!(!flocked_in(table, dev, 12));
        assert_eq!(flock_pids(table, dev, 1234), [4242]);
    }
}
