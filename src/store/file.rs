//! The local quota store (docs/herd.md#shared-retry-quota): one file per quota, shared by every run
//! of one user on this machine, holding the bucket that `policy::quota` computes with.
//!
//! Each operation opens the file, locks it with `flock`, reads the record, writes the new one
//! with a single `pwrite` at offset 0 and closes the file. So:
//! - the lock belongs to the open file and goes when it is closed, also when the process is
//!   killed: a run killed while holding it stalls nobody;
//! - a record is replaced whole, never half (the bucket's record is 64 bytes at offset 0 of a
//!   file on a local file system, and with `--throttle` its figures' 160 bytes follow in the same
//!   write): a killed run leaves the old record or the new one;
//! - nothing waits long: the lock is tried without blocking for at most [`LOCK_WAIT`] in all,
//!   then the operation fails as busy, and the run falls back to its own limits.
//!
//! The directory is `$XDG_RUNTIME_DIR/retry/`, else `$TMPDIR/retry-UID/`, else
//! `/tmp/retry-UID/`, mode 0700; one that a symbolic link stands in for, that another user owns
//! or that others may enter is refused, and so is one whose way there another user could change
//! (`store::open::open_way`), so no other user can read, replace or hold a quota. The
//! file follows the rules of every file that outlives a run
//! (docs/files.md#files-that-outlive-a-run): 0600 whatever the umask, never a symbolic link, a
//! regular file (a FIFO is refused at once, never waited on), owned by the effective user and
//! writable by nobody else; a store that breaks them is not used.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{self, FlockArg, OFlag};
use nix::sys::stat::{self, Mode, SFlag};

use crate::policy::quota::{Bucket, QuotaParams, RECORD_LEN, check_name};
use crate::policy::throttle::{Admission, WINDOW_RECORD_LEN, Window};
use crate::store::lock::{LockError, flock_within};
use crate::store::open::{euid, open_way};
use crate::store::quota::{BucketStore, Exchange, Note, Op, Unanswered, Update, apply};

/// The length of a quota's file whose runs use `--throttle`: the bucket's record, then the
/// throttle's.
const FILE_LEN: usize = RECORD_LEN + WINDOW_RECORD_LEN;

/// The longest an operation tries to get the lock before it gives up as busy. A holder keeps
/// it for a few microseconds; a longer hold means a stopped process, and a run must not wait
/// on it.
pub const LOCK_WAIT: Duration = Duration::from_millis(20);

/// What [`LocalStore::lock`] waits. In the unit tests, other threads fork children (servers,
/// tries) at any moment, and a child between its fork and its exec holds a copy of every
/// descriptor open then, a quota file's lock among them, for as long as a loaded machine takes
/// to reach the exec. `retry` itself forks only from the thread that takes the lock.
#[cfg(not(test))]
const LOCKING_WAIT: Duration = LOCK_WAIT;
#[cfg(test)]
const LOCKING_WAIT: Duration = Duration::from_secs(5);

/// The quota named `name` in this user's store on this machine.
#[derive(Clone, Debug)]
pub struct LocalStore {
    at: PrivateFile,
    params: QuotaParams,
}

/// A private file in the store's directory, opened and checked by the rules of every file that
/// outlives a run: the quota's file, and the lock file of `--lock`.
#[derive(Clone, Debug)]
pub struct PrivateFile {
    dir: PathBuf,
    file: String,
}

/// Why the store could not be used. The run warns with it and goes on with its own limits.
#[derive(Debug)]
pub enum StoreError {
    /// The quota name cannot be a file name in the store.
    Name(String),
    /// Another process had the lock for longer than [`LOCK_WAIT`].
    Busy { path: PathBuf },
    /// The directory or the file is not one `retry` may trust.
    Unsafe { path: PathBuf, problem: Problem },
    /// A system call failed.
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// What makes a directory or a file untrustworthy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    Symlink,
    NotDirectory,
    NotRegularFile,
    Owner {
        uid: u32,
        expected: u32,
    },
    Mode {
        mode: u32,
    },
    /// The quota's file: another user owns it, or group or others may write it.
    Untrusted {
        uid: u32,
        mode: u32,
        expected: u32,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Name(e) => write!(f, "{e}"),
            StoreError::Busy { path } => write!(
                f,
                "the quota file '{}' is busy: another process held its lock for over {} ms",
                path.display(),
                LOCK_WAIT.as_millis()
            ),
            StoreError::Unsafe { path, problem } => {
                write!(f, "refusing '{}': ", path.display())?;
                match problem {
                    Problem::Symlink => write!(f, "it is a symbolic link"),
                    Problem::NotDirectory => write!(f, "it is not a directory"),
                    Problem::NotRegularFile => write!(f, "it is not a regular file"),
                    Problem::Owner { uid, expected } => {
                        write!(f, "it is owned by uid {uid}, not by uid {expected}")
                    }
                    Problem::Mode { mode } => write!(
                        f,
                        "its mode is {mode:04o}: group and others must have no access (0700)"
                    ),
                    Problem::Untrusted {
                        uid,
                        mode,
                        expected,
                    } => write!(
                        f,
                        "it is owned by uid {uid} with mode {mode:04o}: it must belong to uid \
                         {expected} and not be writable by group or others"
                    ),
                }
            }
            StoreError::Io {
                action,
                path,
                source,
            } => write!(f, "cannot {action} '{}': {source}", path.display()),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The store's directory for the user `uid`, from the environment that `var` reads:
/// `$XDG_RUNTIME_DIR/retry` when that is an absolute path to a directory the user owns (as the
/// XDG specification makes it), else `$TMPDIR/retry-UID` when TMPDIR is an absolute path to a
/// directory, else `/tmp/retry-UID`. Every run of the user must pick the same one, so the
/// choice depends on nothing but these.
pub fn store_dir(var: impl Fn(&str) -> Option<OsString>, uid: u32) -> PathBuf {
    let absolute_dir = |name| {
        var(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .and_then(|p| std::fs::metadata(&p).ok().map(|m| (p, m)))
            .filter(|(_, m)| m.is_dir())
    };
    if let Some((runtime, _)) = absolute_dir("XDG_RUNTIME_DIR").filter(|(_, m)| m.uid() == uid) {
        return runtime.join("retry");
    }
    let tmp = absolute_dir("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), |(p, _)| p);
    tmp.join(format!("retry-{uid}"))
}

impl LocalStore {
    /// The quota `name` with these parameters, in the directory that [`store_dir`] picks for
    /// the effective user. Nothing is created until the first operation.
    pub fn new(
        name: &str,
        params: QuotaParams,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<LocalStore, StoreError> {
        LocalStore::in_dir(store_dir(var, euid()), name, params)
    }

    /// The quota `name` in the directory `dir`, which the operations create and check as they
    /// would the usual one.
    pub fn in_dir(dir: PathBuf, name: &str, params: QuotaParams) -> Result<LocalStore, StoreError> {
        check_name(name).map_err(StoreError::Name)?;
        Ok(LocalStore {
            at: PrivateFile::new(dir, format!("{name}.quota")),
            params,
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        self.at.dir()
    }

    /// The quota's file.
    pub fn path(&self) -> PathBuf {
        self.at.path()
    }

    /// A first try: deposit the ratio. `granted` is true.
    pub fn deposit(&self, now_ms: u64) -> Result<Update, StoreError> {
        self.exchange(&Exchange::plain(Op::Deposit), now_ms)
    }

    /// A retry: take a token. `granted` false means that the run must give up (reason `quota`).
    pub fn take(&self, now_ms: u64) -> Result<Update, StoreError> {
        self.exchange(&Exchange::plain(Op::Take), now_ms)
    }

    /// The quota as it stands, for the dry run and the verbose log: the tokens there would be
    /// now, and in `granted` whether a retry would get one. It changes nothing and creates
    /// nothing: a quota not used yet reads as a full bucket.
    pub fn peek(&self, now_ms: u64) -> Result<Update, StoreError> {
        self.exchange(&Exchange::plain(Op::Peek), now_ms)
    }

    /// One exchange under the file's lock: the throttle's step on its figures (kept in a second
    /// record after the bucket's), then the bucket's operation unless the try was held back.
    pub fn exchange(&self, exchange: &Exchange, now_ms: u64) -> Result<Update, StoreError> {
        if exchange.op == Op::Peek {
            return self.read_only(exchange, now_ms);
        }
        let params = self.params;
        let throttled = exchange.throttle.is_some();
        self.update(now_ms, throttled, |bucket, window| {
            let applied = apply(exchange, &params, bucket, window, now_ms);
            (applied.granted, applied.admission)
        })
    }

    /// `Peek`: reads under a shared lock and writes nothing.
    fn read_only(&self, exchange: &Exchange, now_ms: u64) -> Result<Update, StoreError> {
        let seen = |stored: Option<Option<Bucket>>, window: Option<Window>| {
            let (mut bucket, note) = self.or_full(stored, now_ms);
            let mut window = window.unwrap_or_default();
            let applied = apply(exchange, &self.params, &mut bucket, &mut window, now_ms);
            Update {
                granted: applied.granted,
                tokens: applied.tokens,
                note,
                admission: applied.admission,
            }
        };
        // A quota not used yet reads as a full bucket.
        let Some(dir) = self.at.open_dir(false)? else {
            return Ok(seen(None, None));
        };
        let file = match self.at.open_file(&dir, false)? {
            Some(file) => file,
            None => return Ok(seen(None, None)),
        };
        self.lock(&file, FlockArg::LockSharedNonblock)?;
        let (stored, stored_window, _) = self.read(&file)?;
        Ok(seen(stored, stored_window))
    }

    /// Locks the quota's file, applies `apply` to its bucket and the throttle's window, and
    /// writes them back: the window too when `throttled` or when the file had one.
    fn update(
        &self,
        now_ms: u64,
        throttled: bool,
        apply: impl FnOnce(&mut Bucket, &mut Window) -> (bool, Option<Admission>),
    ) -> Result<Update, StoreError> {
        let dir = self.at.open_dir(true)?.ok_or_else(|| {
            self.at
                .io_error("open the directory", self.at.dir.clone(), Errno::ENOENT)
        })?;
        let file = self
            .at
            .open_file(&dir, true)?
            .ok_or_else(|| self.at.io_error("open", self.path(), Errno::ENOENT))?;
        drop(dir);
        self.lock(&file, FlockArg::LockExclusiveNonblock)?;
        let (stored, stored_window, len) = self.read(&file)?;
        let (mut bucket, note) = self.or_full(stored, now_ms);
        let keep_window = throttled || stored_window.is_some();
        // A damaged window counts nothing: the throttle holds nothing back on it.
        let mut window = stored_window.unwrap_or_default();
        let (granted, admission) = apply(&mut bucket, &mut window);
        // One write of the whole record (and the window's after it) at offset 0: never half.
        let mut record = [0u8; FILE_LEN];
        record[..RECORD_LEN].copy_from_slice(&bucket.encode());
        record[RECORD_LEN..].copy_from_slice(&window.encode());
        let written = if keep_window { FILE_LEN } else { RECORD_LEN };
        match file.write_at(&record[..written], 0) {
            Ok(n) if n == written => {}
            Ok(_) => {
                let short = io::Error::new(io::ErrorKind::WriteZero, "part of the record written");
                return Err(self.at.io_failed("write", self.path(), short));
            }
            Err(e) => return Err(self.at.io_failed("write", self.path(), e)),
        }
        // A damaged file longer than what was written would read as damaged again.
        if len > written {
            file.set_len(written as u64)
                .map_err(|e| self.at.io_failed("truncate", self.path(), e))?;
        }
        // Closing the file (at the end of this scope) releases the lock.
        Ok(Update {
            granted,
            tokens: bucket.tokens,
            note,
            admission,
        })
    }

    /// The stored bucket, or a full one: `None` (an empty file) is a new quota, damage is
    /// repaired with a note.
    fn or_full(&self, stored: Option<Option<Bucket>>, now_ms: u64) -> (Bucket, Option<Note>) {
        match stored {
            Some(Some(bucket)) => (bucket, None),
            None => (Bucket::full(&self.params, now_ms), None),
            Some(None) => (
                Bucket::full(&self.params, now_ms),
                Some(Note::Damaged { path: self.path() }),
            ),
        }
    }
}

impl PrivateFile {
    /// The file `file` in the directory `dir`: nothing is opened or created yet.
    pub fn new(dir: PathBuf, file: String) -> PrivateFile {
        PrivateFile { dir, file }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.file)
    }

    /// Opens the directory and the file in it, both checked; with `create`, makes what is
    /// missing (the directory 0700, the file 0600). `None` when either is missing and `create`
    /// is not set.
    pub fn open(&self, create: bool) -> Result<Option<File>, StoreError> {
        let Some(dir) = self.open_dir(create)? else {
            return Ok(None);
        };
        self.open_file(&dir, create)
    }
    /// Opens the directory, creating it (mode 0700) when `create` is set, and checks it:
    /// not a symbolic link, a directory, owned by the effective user, no access for others.
    /// `None` when it does not exist and `create` is not set.
    fn open_dir(&self, create: bool) -> Result<Option<File>, StoreError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let (parent, name) = self.open_parent()?;
        let mut created = false;
        let dir = loop {
            match fcntl::openat(&parent, name.as_os_str(), flags, Mode::empty()) {
                Ok(fd) => break File::from(fd),
                Err(Errno::ENOENT) if create && !created => {
                    self.create_dir(&parent, &name)?;
                    created = true;
                }
                Err(Errno::ENOENT) if !create => return Ok(None),
                Err(e) => return Err(self.dir_unopened(e)),
            }
        };
        self.check_dir(&dir)?;
        Ok(Some(dir))
    }

    /// The directory that holds the store's, opened by the way there (docs/decisions.md: every
    /// directory from `/` belongs to root or the user, and so on), and the store's name in it.
    fn open_parent(&self) -> Result<(File, OsString), StoreError> {
        let unopened = |source| self.io_failed("open the directory", self.dir.clone(), source);
        let (Some(parent), Some(name)) = (self.dir.parent(), self.dir.file_name()) else {
            return Err(unopened(io::Error::from(Errno::EINVAL)));
        };
        let parent = open_way(parent, false).map_err(unopened)?;
        Ok((parent, name.to_os_string()))
    }

    /// Creates the directory in `parent`, 0700 whatever the umask takes away; one created
    /// meanwhile by another run will do.
    fn create_dir(&self, parent: &File, name: &OsString) -> Result<(), StoreError> {
        match stat::mkdirat(parent, name.as_os_str(), Mode::S_IRWXU) {
            // In a directory of root's or ours, where nobody else may replace what we made.
            Ok(()) => stat::fchmodat(
                parent,
                name.as_os_str(),
                Mode::S_IRWXU,
                stat::FchmodatFlags::FollowSymlink,
            )
            .map_err(|e| self.io_error("create the directory", self.dir.clone(), e)),
            Err(Errno::EEXIST) => Ok(()),
            Err(e) => Err(self.io_error("create the directory", self.dir.clone(), e)),
        }
    }

    /// Why the directory did not open: a symbolic link or something else than a directory
    /// stands in its place, or the system call failed.
    fn dir_unopened(&self, e: Errno) -> StoreError {
        let problem = match e {
            Errno::ELOOP | Errno::ENOTDIR => match std::fs::symlink_metadata(&self.dir) {
                Ok(m) if m.file_type().is_symlink() => Problem::Symlink,
                Ok(_) => Problem::NotDirectory,
                Err(_) => return self.io_error("open the directory", self.dir.clone(), e),
            },
            e => return self.io_error("open the directory", self.dir.clone(), e),
        };
        StoreError::Unsafe {
            path: self.dir.clone(),
            problem,
        }
    }

    /// Checks the opened directory: owned by the effective user, no access for others.
    fn check_dir(&self, dir: &File) -> Result<(), StoreError> {
        let meta = dir
            .metadata()
            .map_err(|e| self.io_failed("inspect the directory", self.dir.clone(), e))?;
        let expected = euid();
        let problem = if meta.uid() != expected {
            Problem::Owner {
                uid: meta.uid(),
                expected,
            }
        } else if meta.mode() & 0o077 != 0 {
            Problem::Mode {
                mode: meta.mode() & 0o7777,
            }
        } else {
            return Ok(());
        };
        Err(StoreError::Unsafe {
            path: self.dir.clone(),
            problem,
        })
    }

    /// Opens the quota's file in the checked directory (relative to it, so that the directory
    /// cannot be swapped in between), creating it with mode 0600 (whatever the umask) when
    /// `create` is set, and checks it (docs/files.md#files-that-outlive-a-run): a regular file,
    /// never opened through a symbolic link nor blocked on (a FIFO is refused at once), owned by
    /// the effective user and writable by nobody else. `None` when it does not exist and `create`
    /// is not set.
    fn open_file(&self, dir: &File, create: bool) -> Result<Option<File>, StoreError> {
        let file = match self.open_at(dir, create) {
            Ok(file) => file,
            Err(("open", Errno::ENOENT)) if !create => return Ok(None),
            Err(("open", Errno::ELOOP)) => {
                return Err(StoreError::Unsafe {
                    path: self.path(),
                    problem: Problem::Symlink,
                });
            }
            Err((action, e)) => return Err(self.io_error(action, self.path(), e)),
        };
        self.check_file(&file)?;
        // Reads and writes of a regular file never block: the flag goes all the same.
        fcntl::fcntl(&file, fcntl::FcntlArg::F_SETFL(OFlag::empty()))
            .map_err(|e| self.io_error("open", self.path(), e))?;
        Ok(Some(file))
    }

    /// Opens the quota's file relative to `dir`, never through a symbolic link nor blocking;
    /// with `create`, creates it if missing, 0600 whatever the umask. An error comes with what
    /// failed: to `open` the file, or to `create` it with its mode.
    fn open_at(&self, dir: &File, create: bool) -> Result<File, (&'static str, Errno)> {
        let mut flags = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        flags |= if create {
            OFlag::O_RDWR
        } else {
            OFlag::O_RDONLY
        };
        let private = Mode::S_IRUSR | Mode::S_IWUSR;
        let open = |flags| {
            fcntl::openat(dir, self.file.as_str(), flags, private)
                .map(File::from)
                .map_err(|e| ("open", e))
        };
        if !create {
            return open(flags);
        }
        match open(flags | OFlag::O_CREAT | OFlag::O_EXCL) {
            Ok(file) => {
                stat::fchmod(&file, private).map_err(|e| ("create", e))?;
                Ok(file)
            }
            Err((_, Errno::EEXIST)) => open(flags),
            Err(e) => Err(e),
        }
    }

    /// Checks the opened file: a regular file, owned by the effective user and writable by
    /// nobody else.
    fn check_file(&self, file: &File) -> Result<(), StoreError> {
        let st = stat::fstat(file).map_err(|e| self.io_error("inspect", self.path(), e))?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(StoreError::Unsafe {
                path: self.path(),
                problem: Problem::NotRegularFile,
            });
        }
        let expected = euid();
        if st.st_uid != expected || st.st_mode & 0o022 != 0 {
            return Err(StoreError::Unsafe {
                path: self.path(),
                problem: Problem::Untrusted {
                    uid: st.st_uid,
                    mode: st.st_mode & 0o7777,
                    expected,
                },
            });
        }
        Ok(())
    }

    fn io_error(&self, action: &'static str, path: PathBuf, e: Errno) -> StoreError {
        self.io_failed(action, path, io::Error::from(e))
    }

    fn io_failed(&self, action: &'static str, path: PathBuf, source: io::Error) -> StoreError {
        StoreError::Io {
            action,
            path,
            source,
        }
    }
}

impl LocalStore {
    /// Takes the lock without ever blocking, for at most [`LOCK_WAIT`] in all.
    fn lock(&self, file: &File, how: FlockArg) -> Result<(), StoreError> {
        match flock_within(file, how, LOCKING_WAIT, Duration::from_millis(2)) {
            Ok(()) => Ok(()),
            Err(LockError::Busy) => Err(StoreError::Busy { path: self.path() }),
            Err(LockError::Os(e)) => Err(self.at.io_error("lock", self.path(), e)),
        }
    }

    /// Reads the record at offset 0: `None` for an empty file, `Some(None)` for anything that
    /// is not one whole record. Also returns how many bytes were there (up to one more than a
    /// record).
    /// The stored bucket (`None` for an empty file, `Some(None)` for a damaged one), the
    /// throttle's window when the file has a sound one after the bucket, and the file's length.
    #[allow(clippy::type_complexity)]
    fn read(
        &self,
        file: &File,
    ) -> Result<(Option<Option<Bucket>>, Option<Window>, usize), StoreError> {
        let mut buf = [0u8; FILE_LEN + 1];
        let mut len = 0;
        while len < buf.len() {
            match file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.at.io_failed("read", self.path(), e)),
            }
        }
        let (stored, window) = match len {
            0 => (None, None),
            RECORD_LEN => (Some(Bucket::decode(&buf[..len])), None),
            FILE_LEN => (
                Some(Bucket::decode(&buf[..RECORD_LEN])),
                Window::decode(&buf[RECORD_LEN..len]),
            ),
            _ => (Some(None), None),
        };
        Ok((stored, window, len))
    }
}

/// The local store answers busy when another process holds the lock too long, and fails
/// otherwise.
impl BucketStore for LocalStore {
    fn exchange(&self, exchange: &Exchange, now_ms: u64) -> Result<Update, Unanswered> {
        LocalStore::exchange(self, exchange, now_ms).map_err(unanswered)
    }
}

fn unanswered(e: StoreError) -> Unanswered {
    match e {
        StoreError::Busy { .. } => Unanswered::Busy(e.to_string()),
        e => Unanswered::Failed(e.to_string()),
    }
}
