//! Does a try want input (docs/stdin.md#standard-input)? `retry` reads its standard input for a try
//! only when some process of the try waits on the pipe `retry` feeds it, so that a try that never
//! reads leaves every byte to whoever reads after `retry`.
//!
//! Linux shows where each task sleeps: `/proc/PID/task/TID/syscall` holds the system call and
//! its arguments, `/proc/PID/fd/N` what a descriptor is, `/proc/PID/mem` the arrays `poll` and
//! `select` wait on, and `/proc/PID/fdinfo/N` what an epoll instance watches. Only tasks asleep
//! show a system call, and with the pipe empty a task asleep in `read` on it is waiting for
//! `retry`. Not seen: a reader that polls with `O_NONBLOCK` and sleeps in between, one that
//! reads through io_uring, and a descriptor handed to a process outside the try (an ssh
//! ControlMaster): they wait until `--timeout`.

use crate::run::process::Inherited;

/// What a look at the try's processes found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// Nothing waits on the pipe.
    No,
    /// Some task waits on it, for `count` bytes when its system call says (`read`), or an
    /// unknown amount (`poll`, `select`, `epoll`).
    Yes { count: Option<usize> },
    /// Some process below `retry` cannot be looked at (a setuid program, another user's).
    Unknowable,
}

/// True where `retry` can see what a try waits on.
pub const SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    target_pointer_width = "64",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// Looks for tasks waiting on one try's input pipe.
#[derive(Debug)]
pub struct Demand {
    /// The pipe's inode and device (pipefs), as fstat of its reading end gives them.
    ino: u64,
    dev: u64,
    /// How `/proc/PID/fd/N` names the pipe.
    link: String,
    /// The task (pid, tid) last seen waiting on the pipe. A reader of a few bytes at a time is
    /// fed one read at a time, so it is looked at first: a task found asleep in a read of this
    /// pipe needs no walk of the process tree, and it is the try's, since only the try was
    /// given the pipe.
    last: Option<(i32, i32)>,
}

impl Demand {
    pub fn new(ino: u64, dev: u64) -> Demand {
        Demand {
            ino,
            dev,
            link: format!("pipe:[{ino}]"),
            last: None,
        }
    }

    /// Looks at every task of every process below `retry` (but the inherited ones).
    pub fn wanted(&mut self, inherited: &Inherited) -> Wanted {
        #[cfg(all(
            target_os = "linux",
            target_pointer_width = "64",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            linux::wanted(self, inherited)
        }
        #[cfg(not(all(
            target_os = "linux",
            target_pointer_width = "64",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )))]
        {
            let _ = (inherited, self.ino, self.dev, &self.link, self.last);
            Wanted::Unknowable
        }
    }
}

#[cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod linux {
    use std::fs::File;
    use std::io;
    use std::os::unix::fs::FileExt;

    use nix::libc;

    use super::{Demand, Wanted};
    use crate::run::process::{Inherited, descendants};

    /// The most entries of a `poll` array, bits of a `select` set or buffers of a `readv` read
    /// from a process.
    const MAX_ENTRIES: u64 = 4096;

    /// What one task is doing, as far as the pipe goes.
    enum Seen {
        Waits(Option<usize>),
        Not,
        /// Its files cannot be read.
        Hidden,
    }

    /// A file of /proc that could not be read: `Hidden` when access is refused, `Not` when the
    /// task or descriptor is gone.
    fn refused(e: &io::Error) -> Seen {
        match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => Seen::Hidden,
            _ => Seen::Not,
        }
    }

    pub(super) fn wanted(demand: &mut Demand, inherited: &Inherited) -> Wanted {
        if let Some((pid, tid)) = demand.last {
            if let Seen::Waits(count) = demand.task(pid, tid) {
                return Wanted::Yes { count };
            }
        }
        demand.last = None;
        let mut wanted = Wanted::No;
        let mut hidden = false;
        for process in descendants(inherited) {
            let pid = process.pid.as_raw();
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let Some(tid) = task
                    .file_name()
                    .to_str()
                    .and_then(|t| t.parse::<i32>().ok())
                else {
                    continue;
                };
                match demand.task(pid, tid) {
                    Seen::Waits(count) => {
                        demand.last = Some((pid, tid));
                        wanted = match wanted {
                            Wanted::Yes { count: Some(c) } => Wanted::Yes {
                                count: count.map(|n| n.max(c)),
                            },
                            Wanted::Yes { count: None } => Wanted::Yes { count: None },
                            _ => Wanted::Yes { count },
                        };
                    }
                    Seen::Hidden => hidden = true,
                    Seen::Not => {}
                }
            }
        }
        match wanted {
            Wanted::No if hidden => Wanted::Unknowable,
            w => w,
        }
    }

    /// The system call a task sleeps in: its number and six arguments.
    fn parse_syscall(line: &str) -> Option<(i64, [u64; 6])> {
        let mut fields = line.split_whitespace();
        // "running", or -1 for a task asleep outside any system call.
        let nr: i64 = fields.next()?.parse().ok()?;
        let mut args = [0u64; 6];
        for arg in &mut args {
            let field = fields.next()?;
            *arg = u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()?;
        }
        Some((nr, args))
    }

    impl Demand {
        fn task(&self, pid: i32, tid: i32) -> Seen {
            let line = match read_syscall(pid, tid) {
                Ok(line) => line,
                Err(e) => return refused(&e),
            };
            let Some((nr, a)) = std::str::from_utf8(&line).ok().and_then(parse_syscall) else {
                return Seen::Not;
            };
            let known = |fd: u64, count: u64| -> Seen {
                match self.is_pipe(pid, fd) {
                    Ok(true) => Seen::Waits(Some(usize::try_from(count).unwrap_or(usize::MAX))),
                    Ok(false) => Seen::Not,
                    Err(seen) => seen,
                }
            };
            match nr {
                libc::SYS_read | libc::SYS_pread64 | libc::SYS_recvfrom | libc::SYS_tee => {
                    known(a[0], a[2])
                }
                libc::SYS_splice | libc::SYS_copy_file_range => known(a[0], a[4]),
                libc::SYS_sendfile => known(a[1], a[3]),
                libc::SYS_readv | libc::SYS_preadv | libc::SYS_preadv2 => {
                    match self.is_pipe(pid, a[0]) {
                        Ok(true) => Seen::Waits(iov_total(pid, a[1], a[2])),
                        Ok(false) => Seen::Not,
                        Err(seen) => seen,
                    }
                }
                libc::SYS_recvmsg => match self.is_pipe(pid, a[0]) {
                    Ok(true) => Seen::Waits(None),
                    Ok(false) => Seen::Not,
                    Err(seen) => seen,
                },
                #[cfg(target_arch = "x86_64")]
                libc::SYS_poll => self.poll(pid, a[0], a[1]),
                libc::SYS_ppoll => self.poll(pid, a[0], a[1]),
                #[cfg(target_arch = "x86_64")]
                libc::SYS_select => self.select(pid, a[0], a[1]),
                libc::SYS_pselect6 => self.select(pid, a[0], a[1]),
                #[cfg(target_arch = "x86_64")]
                libc::SYS_epoll_wait => self.epoll(pid, a[0], 0),
                libc::SYS_epoll_pwait | libc::SYS_epoll_pwait2 => self.epoll(pid, a[0], 0),
                _ => Seen::Not,
            }
        }

        /// Is descriptor `fd` of `pid` the pipe? `Err` when that cannot be read.
        fn is_pipe(&self, pid: i32, fd: u64) -> Result<bool, Seen> {
            if fd > i32::MAX as u64 {
                return Ok(false);
            }
            match std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) {
                Ok(link) => Ok(link.as_os_str() == self.link.as_str()),
                Err(e) => Err(refused(&e)),
            }
        }

        /// `poll(fds, nfds)`: waits on the pipe if an entry asks to read it.
        fn poll(&self, pid: i32, fds: u64, nfds: u64) -> Seen {
            const ENTRY: usize = std::mem::size_of::<libc::pollfd>();
            let n = nfds.min(MAX_ENTRIES) as usize;
            let bytes = match read_memory(pid, fds, n * ENTRY) {
                Ok(bytes) => bytes,
                Err(e) => return refused(&e),
            };
            let mut hidden = false;
            for entry in bytes.chunks_exact(ENTRY) {
                let fd = i32::from_ne_bytes([entry[0], entry[1], entry[2], entry[3]]);
                let events = i16::from_ne_bytes([entry[4], entry[5]]);
                if fd < 0 || events & (libc::POLLIN | libc::POLLRDNORM) == 0 {
                    continue;
                }
                match self.is_pipe(pid, fd as u64) {
                    Ok(true) => return Seen::Waits(None),
                    Ok(false) => {}
                    Err(Seen::Hidden) => hidden = true,
                    Err(_) => {}
                }
            }
            if hidden { Seen::Hidden } else { Seen::Not }
        }

        /// `select(nfds, readfds, ...)`: waits on the pipe if its bit is set in `readfds`.
        fn select(&self, pid: i32, nfds: u64, readfds: u64) -> Seen {
            if readfds == 0 || nfds == 0 {
                return Seen::Not;
            }
            let nfds = nfds.min(MAX_ENTRIES * 16);
            let words = nfds.div_ceil(64) as usize;
            let bytes = match read_memory(pid, readfds, words * 8) {
                Ok(bytes) => bytes,
                Err(e) => return refused(&e),
            };
            let mut hidden = false;
            for (w, word) in bytes.chunks_exact(8).enumerate() {
                let mut bits = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
                while bits != 0 {
                    let fd = (w * 64) as u64 + u64::from(bits.trailing_zeros());
                    bits &= bits - 1;
                    if fd >= nfds {
                        break;
                    }
                    match self.is_pipe(pid, fd) {
                        Ok(true) => return Seen::Waits(None),
                        Ok(false) => {}
                        Err(Seen::Hidden) => hidden = true,
                        Err(_) => {}
                    }
                }
            }
            if hidden { Seen::Hidden } else { Seen::Not }
        }

        /// `epoll_wait(epfd, ...)`: waits on the pipe if the instance watches it for input,
        /// itself or through an epoll instance it watches.
        fn epoll(&self, pid: i32, epfd: u64, depth: u32) -> Seen {
            let info = match std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{epfd}")) {
                Ok(info) => info,
                Err(e) => return refused(&e),
            };
            // tfd:        0 events:       19 data:                0  pos:0 ino:2c6ad sdev:f
            for line in info.lines().filter(|l| l.starts_with("tfd:")) {
                let mut fields = line.split_whitespace();
                let tfd = fields.nth(1).and_then(|f| f.parse::<u64>().ok());
                let mut events = 0u32;
                let mut ino = None;
                let mut dev = None;
                while let Some(field) = fields.next() {
                    if field == "events:" {
                        events = fields
                            .next()
                            .and_then(|e| u32::from_str_radix(e, 16).ok())
                            .unwrap_or(0);
                    } else if let Some(i) = field.strip_prefix("ino:") {
                        ino = u64::from_str_radix(i, 16).ok();
                    } else if let Some(d) = field.strip_prefix("sdev:") {
                        dev = u64::from_str_radix(d, 16).ok();
                    }
                }
                let reads = events & (libc::EPOLLIN | libc::EPOLLRDNORM) as u32 != 0;
                if reads && ino == Some(self.ino) && dev.is_none_or(|d| d == self.dev) {
                    return Seen::Waits(None);
                }
                // An epoll instance inside this one.
                if let (true, Some(tfd)) = (depth < 4, tfd) {
                    let nested = std::fs::read_link(format!("/proc/{pid}/fd/{tfd}"))
                        .is_ok_and(|l| l.as_os_str() == "anon_inode:[eventpoll]");
                    if nested {
                        if let Seen::Waits(count) = self.epoll(pid, tfd, depth + 1) {
                            return Seen::Waits(count);
                        }
                    }
                }
            }
            Seen::Not
        }
    }

    /// The `syscall` file of a task, in one read: the number and eight arguments in hex, fewer
    /// than 200 bytes. (It is read once per request of a reader fed a byte at a time, where
    /// `read_to_string`'s growing reads would be half the cost.)
    fn read_syscall(pid: i32, tid: i32) -> io::Result<Vec<u8>> {
        use std::io::Read as _;
        let mut file = File::open(format!("/proc/{pid}/task/{tid}/syscall"))?;
        let mut buf = vec![0u8; 256];
        let mut len = 0;
        while len < buf.len() {
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(len);
        Ok(buf)
    }

    /// `len` bytes of the memory of `pid` at `addr`.
    fn read_memory(pid: i32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        let mem = File::open(format!("/proc/{pid}/mem"))?;
        let mut buf = vec![0u8; len];
        mem.read_exact_at(&mut buf, addr)?;
        Ok(buf)
    }

    /// The bytes a `readv` of `count` buffers at `iov` asks for, if they can be read.
    fn iov_total(pid: i32, iov: u64, count: u64) -> Option<usize> {
        const IOVEC: usize = std::mem::size_of::<libc::iovec>();
        if count == 0 || count > MAX_ENTRIES {
            return None;
        }
        let bytes = read_memory(pid, iov, count as usize * IOVEC).ok()?;
        let total = bytes
            .chunks_exact(IOVEC)
            .map(|v| u64::from_ne_bytes(v[8..16].try_into().unwrap_or([0; 8])))
            .fold(0u64, u64::saturating_add);
        Some(usize::try_from(total).unwrap_or(usize::MAX))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_sleeping_task_shows_its_system_call_and_arguments() {
            let line = "0 0x0 0x7fb6558d7000 0x20000 0x7fb65596ab60 0xffffffff 0x0 0x7ffff815c618 0x7fb655a532ad\n";
            assert_eq!(
                parse_syscall(line),
                Some((
                    0,
                    [0, 0x7fb6558d7000, 0x20000, 0x7fb65596ab60, 0xffffffff, 0]
                ))
            );
            assert_eq!(parse_syscall("running\n"), None);
            assert_eq!(parse_syscall("-1 0x7ffff815c618 0x7fb655a532ad\n"), None);
        }
    }
}

#[cfg(all(
    test,
    target_os = "linux",
    target_pointer_width = "64",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod tests {
    use std::os::fd::AsFd;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// Starts `argv` with the reading end of a fresh pipe as its stdin and looks at it until
    /// `want` holds, or two seconds pass; returns the last look.
    fn look_at(argv: &[&str], want: impl Fn(Wanted) -> bool) -> Wanted {
        look_at_for(argv, Duration::from_secs(2), want)
    }

    /// What `demand` sees of `argv` reading its standard input, looked at for `span` at most
    /// or until `want` holds.
    fn look_at_for(argv: &[&str], span: Duration, want: impl Fn(Wanted) -> bool) -> Wanted {
        let (r, w) = nix::unistd::pipe().unwrap();
        let st = nix::sys::stat::fstat(r.as_fd()).unwrap();
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::from(r))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut demand = Demand::new(st.st_ino, st.st_dev);
        let until = Instant::now() + span;
        let mut seen = Wanted::No;
        while Instant::now() < until {
            seen = demand.wanted(&Inherited::default());
            if want(seen) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        drop(w);
        seen
    }

    #[test]
    fn a_blocking_read_is_seen_with_its_count() {
        let seen = look_at(&["dd", "bs=777", "count=1", "status=none"], |w| {
            w != Wanted::No
        });
        assert_eq!(seen, Wanted::Yes { count: Some(777) });
    }

    #[test]
    fn a_task_seen_waiting_is_not_taken_to_wait_once_it_has_read() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let st = nix::sys::stat::fstat(r.as_fd()).unwrap();
        let mut child = Command::new("sh")
            .args(["-c", "read x; sleep 5"])
            .stdin(Stdio::from(r))
            .spawn()
            .unwrap();
        let mut demand = Demand::new(st.st_ino, st.st_dev);
        let until = Instant::now() + Duration::from_secs(2);
        let look_until = |demand: &mut Demand, want: Wanted| {
            let mut seen = demand.wanted(&Inherited::default());
            while seen != want && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
                seen = demand.wanted(&Inherited::default());
            }
            seen
        };
        // `read` asks for a byte at a time, and is seen asking again after each.
        let one = Wanted::Yes { count: Some(1) };
        assert_eq!(look_until(&mut demand, one), one);
        nix::unistd::write(&w, b"a").unwrap();
        assert_eq!(look_until(&mut demand, one), one);
        // The line ends: the shell sleeps and nothing waits any more.
        nix::unistd::write(&w, b"\n").unwrap();
        let seen = look_until(&mut demand, Wanted::No);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, Wanted::No);
    }

    #[test]
    fn a_process_that_does_not_read_is_not_waiting() {
        // Looked at for a while as it sleeps: never seen waiting on its input.
        let seen = look_at_for(&["sleep", "5"], Duration::from_millis(300), |w| {
            w != Wanted::No
        });
        assert_eq!(seen, Wanted::No);
    }

    #[test]
    fn poll_select_and_epoll_waits_are_seen_without_a_count() {
        for script in [
            "import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()",
            "import select; select.select([0], [], [])",
            "import select; e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()",
        ] {
            let seen = look_at(&["python3", "-c", script], |w| w != Wanted::No);
            assert_eq!(seen, Wanted::Yes { count: None }, "{script}");
        }
    }
}
