//! Opening the files that outlive a run by the rules of docs/decisions.md ("Dead letters and
//! replay"): the way to them checked from `/`, their type, owner and mode; and whether two paths
//! name one file.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::sys::stat::{self, Mode};

use crate::store::refusal::Refusal;

/// How [`open_record_file`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// To read it: it must exist.
    Read,
    /// To read it and append to it: it must exist.
    Append,
    /// To read it and append to it, created (0600, its missing directories 0700) if missing.
    Create,
    /// To read it and write it in place (a lock's file), created (0600) if missing; its
    /// directory must be there, as `flock FILE` wants it.
    Lock,
}

/// Opens a file that `retry` keeps records in (docs/decisions.md#dead-letters-and-replay): reached
/// through [`open_way`] (every directory from `/` checked, opened one from the other, so that none
/// can be swapped in between), never through a symbolic link at its last component, only a regular
/// file (a FIFO or a device is refused before anything could block on it), owned by the effective
/// user and writable by nobody else. A file it creates is 0600 and the directories it creates 0700,
/// whatever the umask.
pub fn open_record_file(path: &Path, access: Access) -> io::Result<File> {
    let Some(name) = file_name(path) else {
        return Err(Refusal::NotRegular("a directory").into());
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = open_way(dir, access == Access::Create)?;
    open_in(&dir, name, access)
}

/// Opens `name` in `dir`, a directory whose way [`open_way`] (or [`open_shared_way`]) checked,
/// by the rules of [`open_record_file`].
pub fn open_in(dir: &File, name: &std::ffi::OsStr, access: Access) -> io::Result<File> {
    // A file that is there is looked at before it is opened: opening a device may act on it.
    match stat::fstatat(dir, name, fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => check_file_mode(st.st_mode)?,
        Err(Errno::ENOENT) if matches!(access, Access::Create | Access::Lock) => {}
        Err(e) => return Err(e.into()),
    }
    let file = open_at(dir, name, access)?;
    check_opened(&file)?;
    Ok(file)
}

/// Creates `name` in `dir`, a new file that no other process has opened (`O_EXCL`, never
/// through a link), 0600 whatever the umask.
pub fn create_new_in(dir: &File, name: &std::ffi::OsStr) -> io::Result<File> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let private = Mode::S_IRUSR | Mode::S_IWUSR;
    let file = File::from(fcntl::openat(dir, name, flags, private)?);
    stat::fchmod(&file, private)?;
    Ok(file)
}

/// The last component of `path` when it names a file: not when it ends in `/` or `..`.
fn file_name(path: &Path) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let ends_as_dir = bytes.ends_with(b"/") || bytes.ends_with(b"/.") || bytes == b".";
    path.file_name().filter(|_| !ends_as_dir)
}

/// Opens `name` in `dir` as `access` says, never through a symbolic link nor blocking; a file
/// it creates is 0600 whatever the umask.
fn open_at(dir: &File, name: &std::ffi::OsStr, access: Access) -> io::Result<File> {
    let base = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let base = match access {
        Access::Read => base | OFlag::O_RDONLY,
        Access::Append | Access::Create => base | OFlag::O_RDWR | OFlag::O_APPEND,
        Access::Lock => base | OFlag::O_RDWR,
    };
    let private = Mode::S_IRUSR | Mode::S_IWUSR;
    let open = |flags: OFlag| fcntl::openat(dir, name, flags, private).map(File::from);
    let refused = |e: Errno| -> io::Error {
        match e {
            // O_NOFOLLOW: a symbolic link planted since it was looked at.
            Errno::ELOOP => Refusal::Symlink.into(),
            e => e.into(),
        }
    };
    let file = match access {
        Access::Create | Access::Lock => match open(base | OFlag::O_CREAT | OFlag::O_EXCL) {
            Ok(file) => {
                // The umask may have taken bits away: the owner must read and write it.
                stat::fchmod(&file, private)?;
                file
            }
            Err(Errno::EEXIST) => open(base).map_err(refused)?,
            Err(e) => return Err(refused(e)),
        },
        _ => open(base).map_err(refused)?,
    };
    // Reads and writes of a regular file never block; the flag goes all the same, so that the
    // file behaves as any other.
    fcntl::fcntl(&file, fcntl::FcntlArg::F_SETFL(OFlag::O_APPEND & base))?;
    Ok(file)
}

/// What is not a regular file, said as a refusal.
pub fn check_type(meta: &std::fs::Metadata) -> Result<(), Refusal> {
    check_file_mode(meta.mode())
}

/// What is not a regular file, from its `st_mode`, said as a refusal.
fn check_file_mode(mode: u32) -> Result<(), Refusal> {
    let what = match mode & nix::libc::S_IFMT {
        nix::libc::S_IFREG => return Ok(()),
        nix::libc::S_IFLNK => return Err(Refusal::Symlink),
        nix::libc::S_IFDIR => "a directory",
        nix::libc::S_IFIFO => "a FIFO",
        nix::libc::S_IFCHR => "a character device",
        nix::libc::S_IFBLK => "a block device",
        nix::libc::S_IFSOCK => "a socket",
        _ => "not a file",
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

/// How many symbolic links (and directories made by another run meanwhile) one way may meet
/// in all, as Linux follows at most 40 links: a loop of links ends there.
const MAX_TURNS: usize = 40;

/// Opens the directory `dir` (a relative one from the working directory) for a record file
/// (docs/decisions.md#dead-letters-and-replay), as OpenSSH checks the way to a key file: every
/// directory from `/` down to it must belong to root or the effective user, and one that others may
/// write must have the sticky bit; a symbolic link on the way is followed only when root or the
/// effective user owns it, and its target's way is checked the same way. Each directory is opened
/// from the one above it, never by its path again, so none can be swapped in between; `..` goes
/// back to the directory the way came from, as the kernel takes it. With `create`, missing
/// directories are made 0700 whatever the umask.
pub fn open_way(dir: &Path, create: bool) -> io::Result<File> {
    let absolute = match dir.is_absolute() {
        true => dir.to_path_buf(),
        false => std::env::current_dir()?.join(dir),
    };
    walk(&absolute, create, false)
}

/// Walks from `/` to `absolute`, each directory checked: owned by root or the effective user, or
/// also by a system account with `system`.
fn walk(absolute: &Path, create: bool, system: bool) -> io::Result<File> {
    let mut way = Way::from_root(system)?;
    let mut names = parts(absolute);
    while let Some(name) = names.pop_front() {
        way.step(name, &mut names, create)?;
    }
    Ok(way.into_last())
}

/// Opens the directory `dir` as [`open_way`] does, making none, except that a system account
/// may own what is on the way too: the directory another program reads from, such as
/// node_exporter's textfile directory under `/var/lib/prometheus` (which Debian's `prometheus`
/// account owns). Another local user cannot own one.
pub fn open_shared_way(dir: &Path) -> io::Result<File> {
    let absolute = match dir.is_absolute() {
        true => dir.to_path_buf(),
        false => std::env::current_dir()?.join(dir),
    };
    walk(&absolute, false, true)
}

/// The accounts below this uid are the system's (Debian's policy and `login.defs`'s
/// `SYS_UID_MAX` stop at 999): a local user cannot become one.
pub const FIRST_USER_UID: u32 = 1000;

/// Opens the directory of a Redis server's Unix socket, checked as [`open_way`] checks the way
/// to a record file, except that a system account may own what is on the way too: a server
/// runs as one (Debian's `redis` owns `/run/redis`), and another local user cannot own one.
pub fn open_socket_way(dir: &Path) -> io::Result<File> {
    open_shared_way(dir)
}

/// Checks the socket `name` in `dir` (opened by [`open_socket_way`]): a socket, not a link,
/// owned by root, the effective user or a system account. Another local user's socket could
/// be anyone's server, and would be sent the password.
pub fn check_socket(dir: &File, name: &std::ffi::OsStr) -> io::Result<()> {
    let st = stat::fstatat(dir, name, fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    match st.st_mode & nix::libc::S_IFMT {
        nix::libc::S_IFSOCK => {}
        nix::libc::S_IFLNK => return Err(Refusal::Symlink.into()),
        _ => return Err(Refusal::NotSocket.into()),
    }
    let euid = euid();
    if st.st_uid != 0 && st.st_uid != euid && st.st_uid >= FIRST_USER_UID {
        return Err(Refusal::ForeignSocket {
            uid: st.st_uid,
            euid,
        }
        .into());
    }
    Ok(())
}

/// The names of a path to walk, `..` included; `/` and `.` are passed over.
fn parts(path: &Path) -> std::collections::VecDeque<std::ffi::OsString> {
    use std::path::Component;
    path.components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

/// A directory on the way, opened, and the path it was reached by (for the refusals).
struct Step {
    dir: File,
    path: PathBuf,
}

/// The directories from `/` to where the walk has come, each opened and checked.
struct Way {
    steps: Vec<Step>,
    turns: usize,
    euid: u32,
    /// Whether a system account may own what is on the way too (a server's socket).
    system: bool,
}

impl Way {
    fn from_root(system: bool) -> io::Result<Way> {
        let root = Path::new("/");
        let dir = File::from(fcntl::open(root, search_flags(), Mode::empty())?);
        let mut way = Way {
            steps: Vec::new(),
            turns: 0,
            euid: euid(),
            system,
        };
        way.enter(dir, root.to_path_buf())?;
        Ok(way)
    }

    /// The directory the walk ended in.
    fn into_last(mut self) -> File {
        self.steps.pop().expect("the way starts at /").dir
    }

    fn here(&self) -> &Step {
        self.steps.last().expect("the way starts at /")
    }

    /// Takes one name of the way; a link's target goes in front of the names still to take.
    fn step(
        &mut self,
        name: std::ffi::OsString,
        rest: &mut std::collections::VecDeque<std::ffi::OsString>,
        create: bool,
    ) -> io::Result<()> {
        if name == ".." {
            if self.steps.len() > 1 {
                self.steps.pop();
            }
            return Ok(());
        }
        let path = self.here().path.join(&name);
        let nofollow = fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
        match stat::fstatat(&self.here().dir, name.as_os_str(), nofollow) {
            Ok(st) if st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFLNK => {
                self.follow(&name, path, st.st_uid, rest)
            }
            Ok(_) => {
                let flags = search_flags();
                let dir = fcntl::openat(&self.here().dir, name.as_os_str(), flags, Mode::empty())?;
                self.enter(File::from(dir), path)
            }
            Err(Errno::ENOENT) if create => self.make(name, path, rest),
            Err(e) => Err(e.into()),
        }
    }

    /// Follows the link `name` (owned by `uid`) when root or the effective user owns it.
    fn follow(
        &mut self,
        name: &std::ffi::OsStr,
        path: PathBuf,
        uid: u32,
        rest: &mut std::collections::VecDeque<std::ffi::OsString>,
    ) -> io::Result<()> {
        if !self.trusts(uid) {
            let (euid, system) = (self.euid, self.system);
            return Err(Refusal::ForeignLink {
                path,
                uid,
                euid,
                system,
            }
            .into());
        }
        self.turn()?;
        let target = PathBuf::from(fcntl::readlinkat(&self.here().dir, name)?);
        if target.is_absolute() {
            self.steps.truncate(1);
        }
        for part in parts(&target).into_iter().rev() {
            rest.push_front(part);
        }
        Ok(())
    }

    /// Makes the missing directory `name`, 0700 whatever the umask; one that another run made
    /// meanwhile is looked at again as any other.
    fn make(
        &mut self,
        name: std::ffi::OsString,
        path: PathBuf,
        rest: &mut std::collections::VecDeque<std::ffi::OsString>,
    ) -> io::Result<()> {
        match stat::mkdirat(&self.here().dir, name.as_os_str(), Mode::S_IRWXU) {
            Ok(()) => {}
            Err(Errno::EEXIST) => {
                self.turn()?;
                rest.push_front(name);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let dir = File::from(fcntl::openat(
            &self.here().dir,
            name.as_os_str(),
            flags,
            Mode::empty(),
        )?);
        stat::fchmod(&dir, Mode::S_IRWXU)?;
        self.enter(dir, path)
    }

    /// Checks the opened directory and walks into it.
    fn enter(&mut self, dir: File, path: PathBuf) -> io::Result<()> {
        let st = stat::fstat(&dir)?;
        let (uid, mode) = (st.st_uid, st.st_mode & 0o7777);
        if !self.trusts(uid) {
            let (euid, system) = (self.euid, self.system);
            return Err(Refusal::ForeignDirectory {
                path,
                uid,
                mode,
                euid,
                system,
            }
            .into());
        }
        if mode & 0o002 != 0 && mode & 0o1000 == 0 {
            return Err(Refusal::OpenDirectory { path, uid, mode }.into());
        }
        self.steps.push(Step { dir, path });
        Ok(())
    }

    /// Whether `uid` may own what is on the way.
    fn trusts(&self, uid: u32) -> bool {
        uid == 0 || uid == self.euid || (self.system && uid < FIRST_USER_UID)
    }

    /// Counts a link followed or a name looked at again: past [`MAX_TURNS`], the way loops.
    fn turn(&mut self) -> io::Result<()> {
        self.turns += 1;
        match self.turns > MAX_TURNS {
            true => Err(Errno::ELOOP.into()),
            false => Ok(()),
        }
    }
}

/// How a directory on the way is opened: only to look at it and go on from it (a directory
/// that may be searched but not listed, as 0711, is passed), never through a link.
fn search_flags() -> OFlag {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let only_to_search = OFlag::O_PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let only_to_search = OFlag::O_RDONLY;
    only_to_search | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
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
