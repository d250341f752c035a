//! Where state that outlives a run is kept: the dead-letter file of runs that gave up
//! (spec 17), the history file of every run (spec 18.4), the retry quota's bucket in a local
//! file or in Redis (spec 15.3), and the lock that the dead-letter file and the quota's local
//! store take.
//!
//! `quota` is what every quota store offers, `file` and `redis` (over `resp` and `sha1`) the
//! two stores, `shared` the one that a run opens and its fallback from Redis to the file.

pub mod deadletter;
pub mod file;
pub mod history;
pub mod lines;
pub mod quota;
pub mod redis;
mod resp;
mod sha1;
pub mod shared;

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{self, FlockArg, OFlag};
use nix::sys::stat::{self, Mode};

/// Why [`flock_within`] did not take the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another process held it for all of the time allowed.
    Busy,
    Os(Errno),
}

/// Takes a `flock` without ever blocking: tries again after short sleeps, growing from 100 µs
/// to `longest_pause`, for at most `within` in all. The lock is released by closing the file,
/// never by an unlock call: that is what also happens when the process is killed, and it
/// cannot fail (nix's `Flock` guard panics when its unlock fails, and a run must not crash).
pub fn flock_within(
    file: &File,
    how: FlockArg,
    within: Duration,
    longest_pause: Duration,
) -> Result<(), LockError> {
    use std::os::fd::AsRawFd;
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        #[allow(deprecated)]
        match fcntl::flock(file.as_raw_fd(), how) {
            Ok(()) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(Errno::EWOULDBLOCK) => {}
            Err(e) => return Err(LockError::Os(e)),
        }
        let waited = start.elapsed();
        if waited >= within {
            return Err(LockError::Busy);
        }
        thread::sleep(pause.min(within - waited));
        pause = (pause * 2).min(longest_pause);
    }
}

/// Why a file that outlives a run is not one `retry` may keep records in (spec 19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A symbolic link stands at its last component: someone could point it anywhere.
    Symlink,
    /// It is not a regular file: what it is (`a FIFO`, `a directory`, ...).
    NotRegular(&'static str),
    /// Another user owns it, or group or others may write it: its owner and mode, and the
    /// user running `retry`.
    Untrusted { uid: u32, mode: u32, euid: u32 },
    /// Its directory may be written by anyone and has no sticky bit: anyone could replace it.
    OpenDirectory { mode: u32 },
    /// A directory above its own may be written by anyone and has no sticky bit: anyone could
    /// put a directory of theirs in the place of the one below it.
    OpenAncestor { mode: u32 },
    /// The way to it goes through a symbolic link that another user (`uid`, not root) owns, in
    /// a directory anyone may write: they could point it anywhere (as Linux's
    /// `fs.protected_symlinks` refuses to follow such a link).
    ForeignLink { uid: u32 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Symlink => write!(f, "it is a symbolic link"),
            Refusal::NotRegular(what) => write!(f, "it is {what}, not a regular file"),
            Refusal::Untrusted { uid, mode, euid } => write!(
                f,
                "it is owned by uid {uid} with mode {mode:04o}: it must belong to uid {euid} \
                 and not be writable by group or others"
            ),
            Refusal::OpenDirectory { mode } => write!(
                f,
                "its directory has mode {mode:04o}: anyone may replace a file in it (no sticky bit)"
            ),
            Refusal::OpenAncestor { mode } => write!(
                f,
                "a directory above it has mode {mode:04o}: anyone may replace the directories \
                 below it (no sticky bit)"
            ),
            Refusal::ForeignLink { uid } => write!(
                f,
                "the way to it goes through a symbolic link of uid {uid} in a directory anyone \
                 may write: they could point it anywhere"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// A refusal as an I/O error, for the callers that carry `io::Error`.
impl From<Refusal> for io::Error {
    fn from(r: Refusal) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, r)
    }
}

/// How [`open_record_file`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// To read it: it must exist.
    Read,
    /// To read it and append to it: it must exist.
    Append,
    /// To read it and append to it, created (0600, its missing directories 0700) if missing.
    Create,
}

/// Opens a file that `retry` keeps records in (spec 19): never through a symbolic link at its
/// last component, only a regular file (a FIFO or a device is refused before anything could
/// block on it), owned by the effective user and writable by nobody else, in a directory that
/// is not open to all without the sticky bit. A file it creates is 0600 and the directories it
/// creates 0700, whatever the umask.
pub fn open_record_file(path: &Path, access: Access) -> io::Result<File> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    check_ancestors(dir)?;
    if access == Access::Create {
        create_dirs(dir)?;
    }
    check_dir(dir)?;
    // A file that is there is looked at before it is opened: opening a device may act on it.
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check_type(&meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound && access == Access::Create => {}
        Err(e) => return Err(e),
    }
    let base = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let base = match access {
        Access::Read => base | OFlag::O_RDONLY,
        Access::Append | Access::Create => base | OFlag::O_RDWR | OFlag::O_APPEND,
    };
    let private = Mode::S_IRUSR | Mode::S_IWUSR;
    let open = |flags: OFlag| fcntl::open(path, flags, private);
    let refused = |e: Errno| -> io::Error {
        match e {
            // O_NOFOLLOW: a symbolic link planted since it was looked at.
            Errno::ELOOP => Refusal::Symlink.into(),
            e => e.into(),
        }
    };
    let (fd, created) = match access {
        Access::Create => match open(base | OFlag::O_CREAT | OFlag::O_EXCL) {
            Ok(fd) => (fd, true),
            Err(Errno::EEXIST) => (open(base).map_err(refused)?, false),
            Err(e) => return Err(refused(e)),
        },
        _ => (open(base).map_err(refused)?, false),
    };
    let file = File::from(fd);
    if created {
        // The umask may have taken bits away: the owner must read and write it.
        stat::fchmod(&file, private)?;
    }
    check_opened(&file)?;
    // Reads and writes of a regular file never block; the flag goes all the same, so that the
    // file behaves as any other.
    fcntl::fcntl(&file, fcntl::FcntlArg::F_SETFL(OFlag::O_APPEND & base))?;
    Ok(file)
}

/// What is not a regular file, said as a refusal.
fn check_type(meta: &std::fs::Metadata) -> Result<(), Refusal> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_symlink() {
        return Err(Refusal::Symlink);
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(Refusal::NotRegular(what))
}

/// Checks an opened file: a regular file that the effective user owns and that neither group
/// nor others may write.
fn check_opened(file: &File) -> io::Result<()> {
    let meta = file.metadata()?;
    check_type(&meta)?;
    let euid = euid();
    if meta.uid() != euid || meta.mode() & 0o022 != 0 {
        return Err(Refusal::Untrusted {
            uid: meta.uid(),
            mode: meta.mode() & 0o7777,
            euid,
        }
        .into());
    }
    Ok(())
}

/// Refuses a directory that anyone may write to without the sticky bit: another user could
/// put any file in place of ours.
fn check_dir(dir: &Path) -> io::Result<()> {
    let mode = std::fs::metadata(dir)?.mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(Refusal::OpenDirectory {
            mode: mode & 0o7777,
        }
        .into());
    }
    Ok(())
}

/// Refuses a way to `dir` that another user could change (spec 19, a level up from the file):
/// a directory above it that anyone may write to without the sticky bit, or a symbolic link on
/// the way that another user (not root) owns in a directory anyone may write. Directories not
/// made yet are passed over: they will be made 0700.
fn check_ancestors(dir: &Path) -> io::Result<()> {
    let absolute = match dir.is_absolute() {
        true => dir.to_path_buf(),
        false => std::env::current_dir()?.join(dir),
    };
    let euid = euid();
    // The links as the path names them.
    for at in absolute.ancestors() {
        let Ok(meta) = std::fs::symlink_metadata(at) else {
            continue;
        };
        let open_parent = at
            .parent()
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.mode() & 0o002 != 0);
        if meta.file_type().is_symlink() && open_parent && ![euid, 0].contains(&meta.uid()) {
            return Err(Refusal::ForeignLink { uid: meta.uid() }.into());
        }
    }
    // The directories as the links lead: from the deepest that exists, up.
    let Some(real) = absolute
        .ancestors()
        .find_map(|at| std::fs::canonicalize(at).ok())
    else {
        return Ok(());
    };
    // The file's own directory is `check_dir`'s, which says so.
    let own = std::fs::canonicalize(dir).ok();
    for above in real.ancestors().filter(|a| Some(*a) != own.as_deref()) {
        let mode = std::fs::metadata(above)?.mode();
        if mode & 0o002 != 0 && mode & 0o1000 == 0 {
            return Err(Refusal::OpenAncestor {
                mode: mode & 0o7777,
            }
            .into());
        }
    }
    Ok(())
}

/// Creates `dir` and its missing parents, each 0700 whatever the umask.
fn create_dirs(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::symlink_metadata(d) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d),
            Err(e) => return Err(e),
        }
        at = d.parent();
    }
    for d in missing.into_iter().rev() {
        match nix::unistd::mkdir(d, Mode::S_IRWXU) {
            Ok(()) => std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?,
            Err(Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The effective user, who owns what `retry` creates. (nix's `geteuid` needs its "user"
/// feature, which `retry` does not otherwise use.)
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and always succeeds.
    unsafe { nix::libc::geteuid() }
}

/// Whether two paths name one file: the same device and inode when both exist, else the same
/// path once made absolute, with a symbolic link in place of the file followed (it may point
/// to a file not created yet) and its directory's links resolved.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    // The directory with its links resolved when it exists, else with `.` and `..` taken out.
    let resolved = |p: &Path| -> Option<PathBuf> {
        let mut p = std::path::absolute(p).ok()?;
        // A dangling link: where it points, a few links deep at most.
        for _ in 0..8 {
            match std::fs::read_link(&p) {
                Ok(target) => p = std::path::absolute(p.parent()?.join(target)).ok()?,
                Err(_) => break,
            }
        }
        let name = p.file_name()?.to_os_string();
        let dir = p.parent()?;
        let dir = dir.canonicalize().unwrap_or_else(|_| {
            let mut plain = PathBuf::new();
            for part in dir.components() {
                match part {
                    std::path::Component::ParentDir => {
                        plain.pop();
                    }
                    std::path::Component::CurDir => {}
                    part => plain.push(part),
                }
            }
            plain
        });
        Some(dir.join(name))
    };
    match (resolved(a), resolved(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The refusal that an error of [`open_record_file`] carries, if it is one.
pub fn refusal(e: &io::Error) -> Option<Refusal> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Refusal>())
        .copied()
}
