//! Under a terminal (docs/processes.md#process-group-and-terminal): the try's group gets the
//! terminal, so it can read from it and Ctrl-C reaches it; a Ctrl-C stops the run.

use crate::common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::libc;
use nix::pty::openpty;

/// retry run as the session leader of a new pseudo-terminal, as a shell would start it.
struct Pty {
    master: std::fs::File,
    child: Child,
    seen: String,
}

impl Pty {
    fn spawn(args: &[&str]) -> Pty {
        Pty::spawn_with_env(args, &[])
    }

    fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Pty {
        let mut cmd = common::retry_std();
        cmd.args(args);
        Pty::spawn_command(cmd, env)
    }

    fn spawn_command(cmd: std::process::Command, env: &[(&str, &str)]) -> Pty {
        Pty::spawn_sized(cmd, env, None)
    }

    /// retry on a terminal `columns` wide.
    fn spawn_narrow(args: &[&str], columns: u16) -> Pty {
        let mut cmd = common::retry_std();
        cmd.args(args);
        let size = libc::winsize {
            ws_row: 24,
            ws_col: columns,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        Pty::spawn_sized(cmd, &[], Some(size))
    }

    fn spawn_sized(
        mut cmd: std::process::Command,
        env: &[(&str, &str)],
        size: Option<libc::winsize>,
    ) -> Pty {
        let pty = openpty(size.as_ref(), None).expect("openpty");
        // Other tests spawn processes concurrently: they must not inherit this terminal.
        for fd in [pty.master.as_raw_fd(), pty.slave.as_raw_fd()] {
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        let slave: OwnedFd = pty.slave;
        cmd.env_remove("NO_COLOR");
        cmd.envs(env.iter().copied());
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn retry on a pty");
        drop(cmd);
        Pty {
            master: std::fs::File::from(pty.master),
            child,
            seen: String::new(),
        }
    }

    /// An interactive bash with job control on a new terminal, as a person would have; `$R` is
    /// retry's path.
    fn bash() -> Pty {
        let mut bash = std::process::Command::new("bash");
        bash.args(["--norc", "--noprofile", "-i"]);
        let retry = assert_cmd::cargo::cargo_bin("retry");
        let retry = retry.to_str().expect("a path in UTF-8");
        let mut pty = Pty::spawn_command(
            bash,
            &[
                ("PS1", "$ "),
                ("TERM", "dumb"),
                ("R", retry),
                ("HISTFILE", ""),
            ],
        );
        pty.type_bytes(b"set -b\n");
        pty
    }

    /// Types a command line at the shell.
    fn type_line(&mut self, line: &str) {
        self.type_bytes(format!("{line}\n").as_bytes());
    }

    fn type_bytes(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }

    /// Reads the terminal until `needle` shows, or fails after 10 seconds.
    fn expect(&mut self, needle: &str) {
        let until = Instant::now() + common::STEP_LIMIT;
        while !self.seen.contains(needle) {
            assert!(
                Instant::now() < until,
                "never saw {needle:?} in {:?}",
                self.seen
            );
            let mut fds = [libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            if unsafe { libc::poll(fds.as_mut_ptr(), 1, 100) } <= 0 {
                continue;
            }
            let mut buf = [0u8; 4096];
            match self.master.read(&mut buf) {
                Ok(n) if n > 0 => self.seen.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn wait(&mut self) -> std::process::ExitStatus {
        let until = Instant::now() + common::STEP_LIMIT;
        while Instant::now() < until {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        panic!("retry did not end; the terminal showed {:?}", self.seen);
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        // A failed test leaves nothing running: the session's leader and its own group, then
        // whatever the terminal's hangup does not end.
        if let Ok(None) = self.child.try_wait() {
            common::send(self.child.id(), libc::SIGHUP);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until `pid`, a child of the test, has stopped (or fails).
fn wait_stopped(pid: u32, pty: &Pty) {
    let until = Instant::now() + common::STEP_LIMIT;
    loop {
        let mut status = 0;
        let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        if r == pid as i32 && libc::WIFSTOPPED(status) {
            return;
        }
        assert!(r == 0, "retry ended instead of stopping: {:?}", pty.seen);
        assert!(
            Instant::now() < until,
            "retry never stopped: {:?}",
            pty.seen
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The pid of the child of `parent` that runs `comm`, once it is there.
fn child_running(parent: u32, comm: &str) -> u32 {
    common::wait_for_child(parent as i32, comm, common::STEP_LIMIT, |_| true) as u32
}

#[test]
fn a_try_reads_a_line_typed_at_the_terminal() {
    let mut pty = Pty::spawn(&[
        "-n",
        "3",
        "-d",
        "0",
        "--",
        "sh",
        "-c",
        "read x; echo got:$x",
    ]);
    pty.type_bytes(b"hello\n");
    pty.expect("got:hello");
    let status = pty.wait();
    assert_eq!(status.code(), Some(0), "{}", pty.seen);
}

/// Waits until retry's child runs `comm` in the terminal's foreground group; returns its pid.
fn wait_for_foreground_child(retry_pid: u32, comm: &str) -> i32 {
    common::wait_for_child(retry_pid as i32, comm, common::STEP_LIMIT, |stat| {
        stat.in_foreground()
    })
}

#[test]
fn ctrl_c_at_the_terminal_stops_the_run_with_no_further_try() {
    // The command is a plain program, so that nothing but the try itself handles Ctrl-C (a
    // shell script would bring a shell's own race between fork and exec into the test).
    let mut pty = Pty::spawn(&[
        "--color", "never", "-n", "5", "-d", "0", "--", "sleep", "30",
    ]);
    wait_for_foreground_child(pty.child.id(), "sleep");
    pty.type_bytes(b"\x03");
    let status = pty.wait();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{}", pty.seen);
    pty.expect("gave up after 1 try");
    assert!(
        pty.seen.contains("try 1/5 was killed by SIGINT"),
        "{}",
        pty.seen
    );
    assert!(!pty.seen.contains("try 2/5"), "{}", pty.seen);
}

#[test]
fn a_long_wait_counts_down_on_the_terminal_and_the_next_line_replaces_it() {
    let started = Instant::now();
    let mut pty = Pty::spawn(&[
        "--color", "never", "-n", "2", "-d", "3s", "-j", "none", "--", "false",
    ]);
    pty.expect("gave up after 2 tries");
    let status = pty.wait();
    assert_eq!(status.code(), Some(1));
    assert!(started.elapsed() >= Duration::from_secs(3));
    let seen = &pty.seen;
    for n in ["in 3s", "in 2s", "in 1s"] {
        assert!(
            seen.contains(&format!("retry: next try (2/2) {n}")),
            "{seen:?}"
        );
    }
    // The countdown is cleared, and the next log line takes its place.
    let last = seen.rfind("next try (2/2) in").unwrap();
    let rest = &seen[last..];
    let clear = rest.find("\r\x1b[2K").expect("the countdown is cleared");
    assert!(
        rest[clear..]
            .trim_start_matches("\r\x1b[2K")
            .starts_with("retry: try 2/2 exited 1"),
        "{rest:?}"
    );
}

#[test]
fn ctrl_z_stops_retry_with_the_try_and_continuing_retry_continues_the_try() {
    let mut pty = Pty::spawn(&[
        "--color",
        "never",
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        "read x; echo got:$x",
    ]);
    let pid = pty.child.id();
    wait_for_foreground_child(pid, "sh");
    pty.type_bytes(b"\x1a");
    // retry stops itself, as a job would, after taking the terminal back.
    let until = Instant::now() + common::STEP_LIMIT;
    loop {
        let mut status = 0;
        let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        if r == pid as i32 && libc::WIFSTOPPED(status) {
            break;
        }
        assert!(
            r == 0,
            "retry ended instead of stopping: {status:#x} {:?}",
            pty.seen
        );
        assert!(
            Instant::now() < until,
            "retry never stopped: {:?}",
            pty.seen
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let stat = common::proc_stat(pid as i32).expect("retry is stopped, not gone");
    assert!(
        stat.in_foreground(),
        "retry took the terminal back before stopping: {stat:?}"
    );
    // What a shell's `fg` does: continue retry, which hands the terminal on and continues the try.
    common::send(pid, libc::SIGCONT);
    wait_for_foreground_child(pid, "sh");
    pty.type_bytes(b"hello\n");
    pty.expect("got:hello");
    assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
}

#[test]
fn colour_on_a_terminal_unless_no_color_is_set() {
    let mut pty = Pty::spawn(&["-n", "2", "-d", "0", "--", "false"]);
    pty.expect("gave up");
    pty.wait();
    assert!(
        pty.seen.contains("\x1b[31mgave up\x1b[0m"),
        "{:?}",
        pty.seen
    );
    let mut pty = Pty::spawn_with_env(&["-n", "2", "-d", "0", "--", "false"], &[("NO_COLOR", "1")]);
    pty.expect("gave up");
    pty.wait();
    assert!(!pty.seen.contains("\x1b["), "{:?}", pty.seen);
}

#[test]
fn a_background_job_stops_when_its_try_reads_the_terminal_and_fg_resumes_it() {
    // An interactive shell with job control runs retry in the background.
    let mut bash = std::process::Command::new("bash");
    bash.args(["--norc", "--noprofile", "-i"]);
    let mut pty = Pty::spawn_command(bash, &[("PS1", "$ "), ("TERM", "dumb")]);
    let retry = assert_cmd::cargo::cargo_bin("retry");
    pty.type_bytes(b"set -b\n");
    pty.type_bytes(
        format!(
            "'{}' --color never -n 1 -- sh -c 'read x; echo got:$x' &\n",
            retry.display()
        )
        .as_bytes(),
    );
    // The try reads the terminal from the background: it stops, and retry with it.
    pty.expect("Stopped");
    let retry =
        common::wait_for_child(pty.child.id() as i32, "retry", common::STEP_LIMIT, |stat| {
            stat.state == 'T'
        });
    pty.type_bytes(b"fg\n");
    // Type the line once `fg` has given the try the terminal: typed while bash still reads its
    // command line, it could be read ahead by bash rather than by the try.
    wait_for_foreground_child(retry as u32, "sh");
    pty.type_bytes(b"hello\n");
    pty.expect("got:hello");
    pty.type_bytes(b"exit\n");
    // A bare `exit` exits with the status of the last command, `fg`, which is the job's: retry's
    // own, 0 since its one try succeeded.
    assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
}

#[test]
fn ctrl_z_during_the_countdown_clears_the_line_before_retry_stops() {
    let mut pty = Pty::spawn(&[
        "--color", "never", "-n", "2", "-d", "2500ms", "-j", "none", "--", "false",
    ]);
    let pid = pty.child.id();
    pty.expect("next try (2/2) in");
    pty.type_bytes(b"\x1a");
    let until = Instant::now() + common::STEP_LIMIT;
    loop {
        let mut status = 0;
        let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        if r == pid as i32 && libc::WIFSTOPPED(status) {
            break;
        }
        assert!(r == 0, "retry ended instead of stopping: {:?}", pty.seen);
        assert!(
            Instant::now() < until,
            "retry never stopped: {:?}",
            pty.seen
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The terminal echoed ^Z after the countdown; retry cleared the line before stopping, so
    // the shell's "Stopped" line does not follow a half-drawn countdown.
    pty.expect("^Z\r\x1b[2K");
    common::send(pid, libc::SIGCONT);
    pty.expect("gave up after 2 tries");
    assert_eq!(pty.wait().code(), Some(1), "{:?}", pty.seen);
}

#[test]
fn a_watched_try_still_sees_a_terminal_of_the_real_size() {
    let mut pty = Pty::spawn(&[
        "--color",
        "never",
        "--retry-if-output",
        "zzz",
        "--",
        "sh",
        "-c",
        "[ -t 1 ] && echo out-is-a-tty; [ -t 2 ] && echo err-is-a-tty >&2; stty size",
    ]);
    // The real terminal's size, set after retry started: the try's terminal follows it.
    let size = libc::winsize {
        ws_row: 42,
        ws_col: 123,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    unsafe { libc::ioctl(pty.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    pty.expect("out-is-a-tty");
    pty.expect("err-is-a-tty");
    assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
}

#[test]
fn a_watched_try_s_terminal_follows_the_real_one_s_size_when_the_try_writes() {
    let mut pty = Pty::spawn(&[
        "--retry-if-output",
        "zzz",
        "--",
        "sh",
        "-c",
        "echo started; read x; echo resized; read x; stty size <&1",
    ]);
    pty.expect("started");
    let size = libc::winsize {
        ws_row: 42,
        ws_col: 123,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    unsafe { libc::ioctl(pty.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    pty.type_bytes(b"go\n");
    // The try holds the terminal, so the resize signals it, not retry: retry follows the size
    // when the try writes, before it passes that output on.
    pty.expect("resized");
    pty.type_bytes(b"go\n");
    pty.expect("42 123");
    assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
}

#[test]
fn a_resize_that_reaches_retry_reaches_the_try_s_terminal_at_once() {
    // With stdin elsewhere, retry keeps the terminal's foreground and gets SIGWINCH itself.
    let mut cmd = std::process::Command::new("sh");
    cmd.env_remove("RETRY_RUN_ID").args([
        "-c",
        // The try writes nothing while it waits (a few seconds at most) for its terminal to take
        // the new size, so only the SIGWINCH that reached retry can have resized it.
        "exec \"$0\" --retry-if-output zzz -- sh -c '
            exec 3>&1; echo started; n=0
            while [ \"$(stty size <&3)\" != \"33 111\" ] && [ $n -lt 500 ]; do
                sleep 0.01; n=$((n + 1))
            done
            stty size <&1' </dev/null",
    ]);
    cmd.arg(assert_cmd::cargo::cargo_bin("retry"));
    let mut pty = Pty::spawn_command(cmd, &[]);
    pty.expect("started");
    let size = libc::winsize {
        ws_row: 33,
        ws_col: 111,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    unsafe { libc::ioctl(pty.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    pty.expect("33 111");
    assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
}

#[test]
fn a_pager_after_retry_in_a_pipeline_keeps_the_terminal() {
    // The pager reads the terminal while the try runs, as `less` does: the job's terminal
    // stays with the job, so it is not stopped for reading it. (Ctrl-C in a job that holds
    // more than retry: ctrl_c_stops_a_script_that_runs_retry_in_a_loop.)
    let mut pty = Pty::bash();
    pty.type_line(
        "\"$R\" --color never -n 1 -- sh -c 'echo first; sleep 1; echo second' \
         | { read l; echo got:$l; read x </dev/tty; echo paged:$x; cat; }",
    );
    pty.expect("got:first");
    pty.type_line("q");
    pty.expect("paged:q");
    pty.expect("second");
    pty.type_line("echo status=${PIPESTATUS[0]}:${PIPESTATUS[1]}");
    pty.expect("status=0:0");
    assert!(!pty.seen.contains("Stopped"), "{:?}", pty.seen);
    pty.type_line("exit");
    pty.wait();
}

#[test]
fn ctrl_c_stops_a_script_that_runs_retry_in_a_loop() {
    for shell in ["sh", "bash"] {
        // The script is the session's leader, and so in the terminal's foreground job, with
        // retry in its group, as a script run from a prompt is.
        let mut cmd = std::process::Command::new(shell);
        cmd.args([
            "-c",
            "for h in a b c; do \"$0\" --color never -n 2 -d 0 -- sleep 30; echo after:$h; done",
        ]);
        cmd.arg(assert_cmd::cargo::cargo_bin("retry"));
        let mut pty = Pty::spawn_command(cmd, &[]);
        let retry = child_running(pty.child.id(), "retry");
        child_running(retry, "sleep");
        pty.type_bytes(b"\x03");
        let status = pty.wait();
        assert_eq!(
            status.signal(),
            Some(libc::SIGINT),
            "{shell}: {:?}",
            pty.seen
        );
        assert!(!pty.seen.contains("after:"), "{shell}: {:?}", pty.seen);
    }
}

#[test]
fn one_ctrl_z_stops_retry_piped_into_cat_and_fg_resumes_it() {
    let mut pty = Pty::bash();
    pty.type_line("\"$R\" --color never -n 1 -- sh -c 'sleep 1; echo done:$((40+2))' | cat");
    let retry = child_running(pty.child.id(), "retry");
    child_running(retry, "sh");
    pty.type_bytes(b"\x1a");
    pty.expect("Stopped");
    pty.type_line("fg");
    pty.expect("done:42");
    pty.type_line("echo status=$?");
    pty.expect("status=0");
    pty.type_line("exit");
    pty.wait();
}

#[test]
fn a_wait_kept_stopped_past_the_budget_starts_no_try_and_ends_with_the_last_status() {
    let mut pty = Pty::spawn(&[
        "--color", "never", "-n", "5", "-d", "2s", "-j", "none", "-B", "3s", "--", "sh", "-c",
        "exit 3",
    ]);
    let pid = pty.child.id();
    pty.expect("next try in 2s");
    // retry's budget began before it wrote that line: it is over 3 s after it at the latest.
    let budget_over = Instant::now() + Duration::from_millis(3100);
    pty.type_bytes(b"\x1a");
    wait_stopped(pid, &pty);
    // Kept stopped past the end of the budget, then continued, as `fg` does.
    std::thread::sleep(budget_over.saturating_duration_since(Instant::now()));
    common::send(pid, libc::SIGCONT);
    let status = pty.wait();
    pty.expect("gave up");
    assert_eq!(status.code(), Some(3), "{:?}", pty.seen);
    assert!(!pty.seen.contains("retry: try 2/5"), "{:?}", pty.seen);
    assert!(pty.seen.contains("budget"), "{:?}", pty.seen);
}

#[test]
fn a_countdown_says_a_long_wait_as_the_log_lines_do() {
    let mut pty = Pty::spawn(&[
        "--color", "never", "-n", "2", "-d", "2h", "-m", "2h", "-j", "none", "--", "false",
    ]);
    pty.expect("next try in 2h");
    pty.expect("next try (2/2) in 2h");
    pty.type_bytes(b"\x03");
    assert_eq!(pty.wait().signal(), Some(libc::SIGINT), "{:?}", pty.seen);
    assert!(!pty.seen.contains("7200s"), "{:?}", pty.seen);
}

#[test]
fn a_countdown_is_cut_to_the_terminal_s_width() {
    let mut pty = Pty::spawn_narrow(
        &[
            "--color", "never", "-n", "2", "-d", "1h", "-m", "1h", "-j", "none", "--", "false",
        ],
        20,
    );
    pty.expect("\r\x1b[2Kretry: next try (2");
    // Drawn a second time, a line that wrapped would leave a row behind.
    pty.type_bytes(b"\x03");
    pty.wait();
    let countdowns: Vec<&str> = pty
        .seen
        .split("\r\x1b[2K")
        .skip(1)
        .map(|rest| rest.split(['\r', '\n']).next().unwrap_or(""))
        .filter(|line| line.starts_with("retry: next try ("))
        .collect();
    assert!(!countdowns.is_empty(), "{:?}", pty.seen);
    for line in countdowns {
        assert!(line.chars().count() < 20, "{line:?} in {:?}", pty.seen);
    }
}

#[test]
fn a_run_in_the_background_draws_no_countdown_over_the_prompt() {
    let started = Instant::now();
    let mut pty = Pty::bash();
    pty.type_line("\"$R\" --color never -n 2 -d 2100ms -j none -- false &");
    pty.expect("gave up after 2 tries");
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert!(!pty.seen.contains("next try (2/2) in"), "{:?}", pty.seen);
    pty.type_line("exit");
    pty.wait();
}

/// The terminal's modes, as `stty -a` shows them.
fn modes(pty: &Pty) -> (libc::tcflag_t, libc::tcflag_t, libc::tcflag_t) {
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::tcgetattr(pty.master.as_raw_fd(), &mut t) },
        0
    );
    (t.c_iflag, t.c_oflag, t.c_lflag)
}

#[test]
fn a_raw_try_killed_by_its_timeout_leaves_the_terminal_s_modes_as_they_were() {
    let mut pty = Pty::spawn(&[
        "--color",
        "never",
        "-n",
        "2",
        "-d",
        "0",
        "-t",
        "1s",
        "--",
        "sh",
        "-c",
        // The try says it set the terminal raw only once it sees it so itself.
        "stty raw -echo; stty -a | grep -q -- ' -icanon' && echo is-raw; sleep 30",
    ]);
    // The modes a new terminal has, as this one had before retry started: read from another,
    // since the try may have set this one raw already on a loaded machine.
    let before = {
        let fresh = openpty(None, None).expect("openpty");
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::tcgetattr(fresh.master.as_raw_fd(), &mut t) },
            0
        );
        (t.c_iflag, t.c_oflag, t.c_lflag)
    };
    pty.expect("is-raw");
    pty.expect("gave up");
    assert_eq!(pty.wait().code(), Some(124), "{:?}", pty.seen);
    assert_eq!(modes(&pty), before, "{:?}", pty.seen);
    // Set back before retry wrote its lines, and before the next try: each starts a line.
    assert!(pty.seen.contains("\r\nretry: gave up"), "{:?}", pty.seen);
}

#[test]
fn a_watched_try_gets_sigwinch_when_the_terminal_is_resized() {
    // With stdin elsewhere, retry keeps the terminal's foreground and gets SIGWINCH itself; the
    // try's pseudo-terminal is nobody's controlling terminal, so retry tells the try.
    let mut cmd = std::process::Command::new("sh");
    cmd.env_remove("RETRY_RUN_ID").args([
        "-c",
        "exec \"$0\" --retry-if-output zzz -- sh -c '
            exec 3>&1; trap \"w=1\" WINCH; echo started; n=0
            while [ -z \"$w\" ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n + 1)); done
            [ -n \"$w\" ] && echo \"winch: $(stty size <&3)\"' </dev/null",
    ]);
    cmd.arg(assert_cmd::cargo::cargo_bin("retry"));
    let mut pty = Pty::spawn_command(cmd, &[]);
    pty.expect("started");
    let size = libc::winsize {
        ws_row: 31,
        ws_col: 97,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    unsafe { libc::ioctl(pty.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    pty.expect("winch: 31 97");
    assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
}

#[test]
fn a_prompt_on_the_terminal_under_another_standard_input_can_be_answered() {
    // Standard input elsewhere: the try is not given the terminal as it starts; it is stopped
    // for reading it, and retry says so and gives it the terminal.
    for input in ["</dev/null", "<<EOF\nx\nEOF\n"] {
        let mut cmd = std::process::Command::new("sh");
        cmd.env_remove("RETRY_RUN_ID").args([
            "-c",
            &format!("exec \"$0\" --color never -- sh -c 'read p </dev/tty; echo got:$p' {input}"),
        ]);
        cmd.arg(assert_cmd::cargo::cargo_bin("retry"));
        let mut pty = Pty::spawn_command(cmd, &[]);
        pty.expect("for using the terminal; gave it the terminal");
        pty.type_line("secret");
        pty.expect("got:secret");
        assert_eq!(pty.wait().code(), Some(0), "{:?}", pty.seen);
        assert_eq!(
            pty.seen.matches("using the terminal").count(),
            1,
            "{:?}",
            pty.seen
        );
    }
}

#[test]
fn a_prompt_after_a_pipe_into_retry_can_be_answered_from_an_interactive_shell() {
    let mut pty = Pty::bash();
    pty.type_line("echo x | \"$R\" --color never -- sh -c 'read p </dev/tty; echo got:$p'");
    pty.expect("gave it the terminal");
    pty.type_line("secret");
    pty.expect("got:secret");
    pty.type_line("echo status=$?");
    pty.expect("status=0");
    pty.type_line("exit");
    pty.wait();
}
