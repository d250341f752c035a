//! Starting a command with glibc's `posix_spawn`: as cheap as vfork (no copy of `retry`'s page
//! tables, nothing to run between fork and exec), and it sets what a try must start with in
//! one call: its own process group, an empty signal mask, and every signal at its default but
//! those ignored on entry, the two that glibc keeps for itself (32, 33) included, which std's
//! own use of `posix_spawn` leaves ignored.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;

use nix::libc;
use nix::unistd::Pid;

use crate::run::child::{ChildFd, ChildStdio, resolve};
use crate::run::dispositions::Dispositions;
use crate::run::envfile::EnvVar;

/// What `spawn` needs.
pub struct Spawn<'a> {
    pub command: &'a [OsString],
    pub env: &'a [EnvVar],
    pub stdio: ChildStdio,
    /// Start in a process group of its own.
    pub own_group: bool,
    pub dispositions: Dispositions,
}

/// Frees what posix_spawn's attribute and file-action objects hold, however `spawn` ends.
struct Attrs {
    attr: libc::posix_spawnattr_t,
    actions: libc::posix_spawn_file_actions_t,
}

impl Drop for Attrs {
    fn drop(&mut self) {
        // SAFETY: both were initialised in `Attrs::new` before an `Attrs` exists.
        unsafe {
            libc::posix_spawnattr_destroy(&mut self.attr);
            libc::posix_spawn_file_actions_destroy(&mut self.actions);
        }
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The environment of `retry` with `extra` set over it: the null-terminated array of pointers
/// to `KEY=VALUE` strings that exec takes, valid while `added` (the strings of `extra`) is.
/// `retry`'s own strings are passed in place rather than copied (a copy of each was most of
/// the cost of a spawn): `retry` runs on one thread and never changes its environment, so
/// they stay as they are until the spawn has copied them into the new program. As in
/// `std::env::vars_os`, a string with no `=` past its first byte is no variable and is left
/// out.
fn environment(extra: &[EnvVar], added: &[CString]) -> Vec<*mut libc::c_char> {
    let mut env = Vec::with_capacity(64);
    // SAFETY: `environ` is glibc's null-terminated array of NUL-terminated strings, which
    // nothing changes while `retry` runs (see above).
    let mut entry = unsafe { libc::environ };
    // SAFETY: `entry` points into that array, before or at its null end.
    while !entry.is_null() && !unsafe { *entry }.is_null() {
        // SAFETY: as above: a NUL-terminated string of the array.
        let string = unsafe { std::ffi::CStr::from_ptr(*entry) }.to_bytes();
        let key = string
            .get(1..)
            .and_then(|rest| rest.iter().position(|&b| b == b'='))
            .map(|eq| &string[..eq + 1]);
        if let Some(key) = key {
            if !extra.iter().any(|(k, _)| k.as_bytes() == key) {
                // SAFETY: as above.
                env.push(unsafe { *entry });
            }
        }
        // SAFETY: the array's null end has not been reached, so the next slot exists.
        entry = unsafe { entry.add(1) };
    }
    env.extend(added.iter().map(|a| a.as_ptr().cast_mut()));
    env.push(std::ptr::null_mut());
    env
}

/// The strings of the variables that `extra` sets, `KEY=VALUE`.
fn added(extra: &[EnvVar]) -> io::Result<Vec<CString>> {
    extra
        .iter()
        .map(|(key, value)| cstring(format!("{key}={value}").as_bytes()))
        .collect()
}

/// A signal set with exactly these signals, glibc's reserved ones allowed (its `sigaddset`
/// refuses them, yet its `posix_spawn` honours them in the set of defaults).
fn signal_set(signals: impl Iterator<Item = i32>) -> libc::sigset_t {
    const WORDS: usize = std::mem::size_of::<libc::sigset_t>() / 8;
    let mut bits = [0u64; WORDS];
    for n in signals {
        let bit = (n - 1) as usize;
        if bit / 64 < WORDS {
            bits[bit / 64] |= 1 << (bit % 64);
        }
    }
    // SAFETY: glibc's sigset_t on Linux is an array of 64-bit words holding signal n at bit
    // n-1, and `bits` has exactly its size.
    unsafe { std::mem::transmute::<[u64; WORDS], libc::sigset_t>(bits) }
}

/// Starts the command; the error is the one exec gave (or the lookup in PATH).
pub fn spawn(s: Spawn<'_>) -> io::Result<Pid> {
    let Some((program, _)) = s.command.split_first() else {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    };
    let path = cstring(resolve(program)?.as_os_str().as_bytes())?;
    let argv: Vec<CString> = s
        .command
        .iter()
        .map(|w| cstring(w.as_bytes()))
        .collect::<io::Result<_>>()?;
    let added = added(s.env)?;
    let argv_ptrs = pointers(&argv);
    let envp_ptrs = environment(s.env, &added);
    let mut attrs = Attrs::new()?;
    attrs.redirect(&s.stdio)?;
    attrs.start_with(s.own_group, &s.dispositions)?;
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid and NUL-terminated where it must be, and outlives the call.
    check(unsafe {
        libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            &attrs.actions,
            &attrs.attr,
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
        )
    })?;
    // `s.stdio` is dropped here: retry's copies of the child's ends close.
    Ok(Pid::from_raw(pid))
}

/// The null-terminated array of pointers to `strings` that exec takes; valid while `strings`
/// is.
fn pointers(strings: &[CString]) -> Vec<*mut libc::c_char> {
    let mut ptrs: Vec<*mut libc::c_char> = strings.iter().map(|a| a.as_ptr().cast_mut()).collect();
    ptrs.push(std::ptr::null_mut());
    ptrs
}

impl Attrs {
    fn new() -> io::Result<Attrs> {
        // SAFETY: zeroed objects initialised by their init functions before any other use, and
        // destroyed by `Attrs` whatever happens after.
        unsafe {
            let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
            let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
            check(libc::posix_spawnattr_init(&mut attr))?;
            if let Err(e) = check(libc::posix_spawn_file_actions_init(&mut actions)) {
                libc::posix_spawnattr_destroy(&mut attr);
                return Err(e);
            }
            Ok(Attrs { attr, actions })
        }
    }

    /// The child's standard streams: `retry`'s own, `/dev/null`, or the descriptors of
    /// `stdio`, which must stay open until the spawn.
    fn redirect(&mut self, stdio: &ChildStdio) -> io::Result<()> {
        let null = c"/dev/null";
        for (target, fd) in [
            (libc::STDIN_FILENO, &stdio.stdin),
            (libc::STDOUT_FILENO, &stdio.stdout),
            (libc::STDERR_FILENO, &stdio.stderr),
        ] {
            match fd {
                ChildFd::Inherit => {}
                // SAFETY: the file-action object is initialised, and the path is
                // NUL-terminated and static: it outlives the spawn.
                ChildFd::Null => check(unsafe {
                    libc::posix_spawn_file_actions_addopen(
                        &mut self.actions,
                        target,
                        null.as_ptr(),
                        libc::O_RDWR,
                        0,
                    )
                })?,
                // SAFETY: the file-action object is initialised; `fd` is open, and stays so
                // until `s.stdio` is dropped after the spawn.
                ChildFd::Fd(fd) => check(unsafe {
                    libc::posix_spawn_file_actions_adddup2(
                        &mut self.actions,
                        fd.as_raw_fd(),
                        target,
                    )
                })?,
            }
        }
        Ok(())
    }

    /// What the child starts with: a process group of its own if `own_group`, an empty signal
    /// mask, and `dispositions`.
    fn start_with(&mut self, own_group: bool, dispositions: &Dispositions) -> io::Result<()> {
        let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        if own_group {
            flags |= libc::POSIX_SPAWN_SETPGROUP;
        }
        let empty = signal_set(std::iter::empty());
        let defaults = signal_set(dispositions.defaults());
        // SAFETY: the attribute object is initialised; the sets are plain values.
        unsafe {
            check(libc::posix_spawnattr_setflags(&mut self.attr, flags as _))?;
            check(libc::posix_spawnattr_setpgroup(&mut self.attr, 0))?;
            check(libc::posix_spawnattr_setsigmask(&mut self.attr, &empty))?;
            check(libc::posix_spawnattr_setsigdefault(
                &mut self.attr,
                &defaults,
            ))?;
        }
        Ok(())
    }
}
