//! Why a file that outlives a run is refused, in words a user can act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a file that outlives a run is not one `retry` may keep records in (the rules are in
/// docs/decisions.md, "Dead letters and replay").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A symbolic link stands at its last component: someone could point it anywhere.
    Symlink,
    /// It is not a regular file: what it is (`a FIFO`, `a directory`, ...).
    NotRegular(&'static str),
    /// Another user owns it, or group or others may write it: its owner and mode, and the
    /// user running `retry`.
    Untrusted { uid: u32, mode: u32, euid: u32 },
    /// A directory on the way to it belongs to neither root nor the user running `retry`:
    /// its owner could put anything in the place of what follows it.
    ForeignDirectory {
        path: PathBuf,
        uid: u32,
        mode: u32,
        euid: u32,
        /// Whether a system account may own it too (the way to a server's socket).
        system: bool,
    },
    /// A directory on the way to it may be written by anyone and has no sticky bit: anyone
    /// could replace what follows it.
    OpenDirectory { path: PathBuf, uid: u32, mode: u32 },
    /// The way to it goes through a symbolic link that neither root nor the user running
    /// `retry` owns: its owner chose where it leads.
    ForeignLink {
        path: PathBuf,
        uid: u32,
        euid: u32,
        system: bool,
    },
    /// What should be a server's Unix socket is something else.
    NotSocket,
    /// A Unix socket that another local user owns: anyone's server could listen on it.
    ForeignSocket { uid: u32, euid: u32 },
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
            Refusal::ForeignDirectory {
                path,
                uid,
                mode,
                euid,
                system,
            } => write!(
                f,
                "the way to it goes through '{}', owned by uid {uid} with mode {mode:04o}: \
                 every directory on the way must belong to {}",
                path.display(),
                trusted_owners(*euid, *system)
            ),
            Refusal::OpenDirectory { path, uid, mode } => write!(
                f,
                "the way to it goes through '{}', owned by uid {uid} with mode {mode:04o}: \
                 anyone may replace what is in it (no sticky bit)",
                path.display()
            ),
            Refusal::ForeignLink {
                path,
                uid,
                euid,
                system,
            } => write!(
                f,
                "the way to it goes through the symbolic link '{}', owned by uid {uid}: a link \
                 on the way must belong to {}",
                path.display(),
                trusted_owners(*euid, *system)
            ),
            Refusal::NotSocket => write!(f, "it is not a Unix socket"),
            Refusal::ForeignSocket { uid, euid } => write!(
                f,
                "it is owned by uid {uid}, another local user: a server's socket must belong to {}",
                trusted_owners(*euid, true)
            ),
        }
    }
}

/// Who may own what is on the way to a record file, in words.
fn trusted_owners(euid: u32, system: bool) -> String {
    match (euid, system) {
        (0, false) => "root".to_string(),
        (euid, false) => format!("root or uid {euid}"),
        (0, true) => "root or a system account (uid below 1000)".to_string(),
        (euid, true) => format!("root, uid {euid} or a system account (uid below 1000)"),
    }
}

impl std::error::Error for Refusal {}

/// A refusal as an I/O error, for the callers that carry `io::Error`.
impl From<Refusal> for io::Error {
    fn from(r: Refusal) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, r)
    }
}

/// The refusal that an error of [`open_record_file`](crate::store::open::open_record_file)
/// carries, if it is one.
pub fn refusal(e: &io::Error) -> Option<Refusal> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Refusal>())
        .cloned()
}
