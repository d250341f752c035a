//! What a child of `retry` (a try, a hook) is started from: its three standard streams and the
//! file its program is. Both ways of starting one (`process`, and `spawn` where glibc's
//! `posix_spawn` serves) take these, so they live below both, and below `stdio`, which makes the
//! streams.

use std::io;
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::libc;

/// One standard stream of a child: `retry`'s own, `/dev/null`, or this descriptor.
#[derive(Debug)]
pub enum ChildFd {
    Inherit,
    Null,
    Fd(OwnedFd),
}

impl ChildFd {
    /// The same, for `std::process::Command`.
    pub fn into_stdio(self) -> std::process::Stdio {
        match self {
            ChildFd::Inherit => std::process::Stdio::inherit(),
            ChildFd::Null => std::process::Stdio::null(),
            ChildFd::Fd(fd) => std::process::Stdio::from(fd),
        }
    }
}

/// The child's ends, for spawning.
pub struct ChildStdio {
    pub stdin: ChildFd,
    pub stdout: ChildFd,
    pub stderr: ChildFd,
}

/// The file execvp would run for `program`: itself when it names a path, else the first
/// executable file of that name in PATH; `EACCES` when one exists but none is executable,
/// `ENOENT` when there is none.
pub fn resolve(program: &std::ffi::OsStr) -> io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.as_bytes().contains(&b'/') {
        return Ok(program.into());
    }
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    let mut denied = false;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        // As execvp(3) does: a match that cannot be executed (no x bit, or a directory, which
        // execve refuses with EACCES) is passed over, and makes the result "cannot execute"
        // (126) rather than "not found" (127) when nothing later matches.
        match nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK) {
            Ok(()) if candidate.is_file() => return Ok(candidate),
            Ok(()) => denied = true,
            Err(Errno::EACCES) if candidate.exists() => denied = true,
            _ => {}
        }
    }
    Err(io::Error::from_raw_os_error(if denied {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}
