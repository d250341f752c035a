//! Helpers shared by the end-to-end tests: the real binary, bounded in time, and checks on
//! the processes it leaves.
#![allow(dead_code)]

pub mod agree;
pub mod every_option;
pub mod nemesis;
pub mod nemesis_lock;
pub mod receiver;
pub mod redis_server;
pub mod sentinel;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// No test may run longer than this, whatever goes wrong.
pub const TEST_LIMIT: Duration = Duration::from_secs(30);

/// The longest one step of a test may take (a process to start, write a line, end, a file to
/// appear) before the test fails: far more than any step needs on a loaded machine.
pub const STEP_LIMIT: Duration = Duration::from_secs(10);

/// `retry` through assert_cmd, killed if it runs past `TEST_LIMIT`.
pub fn retry() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("retry").expect("the retry binary is built");
    cmd.timeout(TEST_LIMIT);
    cmd.env_remove("RETRY_RUN_ID");
    cmd.env_remove("NO_COLOR");
    for name in CI_VARS {
        cmd.env_remove(name);
    }
    cmd
}

/// What tells `retry` it runs in CI: removed, so that the tests behave the same in CI and out
/// of it; the CI tests set them.
pub const CI_VARS: [&str; 4] = [
    "GITHUB_ACTIONS",
    "GITHUB_STEP_SUMMARY",
    "GITHUB_OUTPUT",
    "GITLAB_CI",
];

/// Whether `what`, from the system package `package`, is on this machine for `test`. Without
/// it the test says so loudly on stderr and passes, so that `cargo test` passes on a machine
/// with only the Rust toolchain; RETRY_REQUIRE_PACKAGES=1 (as CI sets it, after installing
/// them) makes it a failure instead.
pub fn have_package(test: &str, what: &str, package: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var_os("RETRY_REQUIRE_PACKAGES").is_some_and(|v| v == "1") {
        panic!("{what} is missing (RETRY_REQUIRE_PACKAGES=1): install the {package} package");
    }
    // Written to the real stderr: the test harness captures `eprintln!` of passing tests.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {test} did not run: {what} is missing; install the {package} package, or set \
         RETRY_REQUIRE_PACKAGES=1 to make this a failure"
    );
    false
}

/// Whether the program `name` can be run (it is on PATH).
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

/// `retry` as a plain std command, for tests that signal it while it runs.
pub fn retry_std() -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("retry"));
    cmd.env_remove("RETRY_RUN_ID");
    for name in CI_VARS {
        cmd.env_remove(name);
    }
    cmd
}

/// Runs `body` in a process of its own: this test program started again for the one test
/// `name` (its path, `events::a_run_...`). For a test that runs `retry`'s runner inside the
/// test process: the runner catches signals for the whole process and reaps any child that
/// ends, the children of the tests running beside it included.
pub fn alone(name: &str, body: impl FnOnce()) {
    const ALONE: &str = "RETRY_TEST_ALONE";
    if std::env::var_os(ALONE).is_some_and(|v| v == name) {
        body();
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().expect("this program"))
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .env(ALONE, name)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start this test program again");
    let status = wait_bounded(&mut child, TEST_LIMIT);
    let out = child.wait_with_output().expect("its output");
    let (stdout, stderr) = (stdout_of(&out), stderr_of(&out));
    assert!(
        status.success(),
        "{name} alone: {status:?}\n{stdout}{stderr}"
    );
    // A name that matches no test would pass having run nothing.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name} alone: {stdout}"
    );
}

/// Waits for `child` with a bound; kills it and fails the test past the bound.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("retry did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pid a try wrote in `file`, once the process is gone within `limit`: `Err` with the pid
/// when it is still running then.
pub fn gone_within(file: &Path, limit: Duration) -> Result<i32, i32> {
    let pid: i32 = std::fs::read_to_string(file)
        .expect("the try wrote its pid")
        .trim()
        .parse()
        .expect("a pid");
    let gone = || nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err();
    match wait_until(limit, gone) {
        true => Ok(pid),
        false => Err(pid),
    }
}

/// Sends `signal` to the process `pid`.
pub fn send(pid: u32, signal: i32) {
    // SAFETY: kill takes two integers and touches no memory.
    unsafe { nix::libc::kill(pid as i32, signal) };
}

/// A fresh directory for one test under cargo's target tmp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// A fresh directory that only this user may enter, for a test's `XDG_RUNTIME_DIR`: the local
/// quota store that a run keeps there is then the test's own.
pub fn runtime_dir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir(name);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// `cmd` with each file it writes limited to `limit` bytes: past it a write is cut short, then
/// fails (EFBIG), as on a full disk.
pub fn on_a_full_disk(cmd: &mut std::process::Command, limit: u64) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit and signal are async-signal-safe and touch no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            use nix::sys::resource::{Resource, setrlimit};
            use nix::sys::signal::{SigHandler, Signal, signal};
            signal(Signal::SIGXFSZ, SigHandler::SigIgn)?;
            setrlimit(Resource::RLIMIT_FSIZE, limit, limit)?;
            Ok(())
        })
    }
}

/// Held by each test that moves tens of megabytes through pipes and files (past the 32 MiB that
/// retry keeps in memory), so that they run one at a time: side by side they cost the kernel
/// more than their sum (BENCHMARKS.md, "The test suite's time"). They are marked `#[ignore]`
/// and run by `.ci/run` with the failovers.
pub fn one_big_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static BIG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A big test that failed while holding it leaves it poisoned; the next may still run.
    BIG.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Polls `ready` until it holds (true) or `limit` has passed (false).
///
/// The pause between polls starts at 5 ms and doubles up to 40 ms: what is soon ready is seen
/// soon, and a long wait (a cluster's nodes agreeing, a replica catching up) asks a few dozen
/// times, not hundreds; many of these polls start a `redis-cli` each.
#[must_use]
pub fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    let mut pause = Duration::from_millis(5);
    while !ready() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(40));
    }
    true
}

/// What /proc says of a process, as much of its stat line as the tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The program name (at most 15 bytes of it).
    pub comm: String,
    /// R, S, D, T (stopped), Z (zombie), ...
    pub state: char,
    pub pgrp: i32,
    /// The foreground process group of its controlling terminal, -1 without one.
    pub tpgid: i32,
}

impl ProcStat {
    /// True when its group holds its terminal's foreground.
    pub fn in_foreground(&self) -> bool {
        self.pgrp == self.tpgid
    }
}

/// `pid`'s stat, or None once it is gone.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp session tty_nr tpgid ...; comm may hold spaces and parentheses.
    let (head, rest) = stat.rsplit_once(')')?;
    let (_, comm) = head.split_once('(')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        comm: comm.to_string(),
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        tpgid: fields.get(5)?.parse().ok()?,
    })
}

/// The children of `pid` (of its main thread, which is the only one of the processes here).
pub fn children_of(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits until a child of `parent` runs `comm` and `ready` holds for it; returns its pid.
pub fn wait_for_child(
    parent: i32,
    comm: &str,
    limit: Duration,
    mut ready: impl FnMut(&ProcStat) -> bool,
) -> i32 {
    let mut found = None;
    let seen = wait_until(limit, || {
        found = children_of(parent)
            .into_iter()
            .find(|&child| proc_stat(child).is_some_and(|stat| stat.comm == comm && ready(&stat)));
        found.is_some()
    });
    let children: Vec<_> = children_of(parent).into_iter().map(proc_stat).collect();
    assert!(seen, "no child {comm} of {parent} as awaited: {children:?}");
    found.expect("found with the wait")
}

/// True if `pid` is a live process (a zombie counts as gone: it runs nothing).
pub fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|stat| !matches!(stat.state, 'Z' | 'X'))
}

/// The pids written one per line to `file`.
pub fn pids_in(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits up to `limit` for every pid to be gone; returns those still alive.
pub fn survivors(pids: &[i32], limit: Duration) -> Vec<i32> {
    let until = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() > until {
            for &p in &left {
                // Clean up so that a failing test leaves nothing behind either.
                unsafe { nix::libc::kill(p, nix::libc::SIGKILL) };
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `file` holds at least `n` lines, or panics after `limit`.
pub fn wait_for_lines(file: &Path, n: usize, limit: Duration) {
    assert!(
        wait_until(limit, || pids_in(file).len() >= n),
        "{} never got {n} lines",
        file.display()
    );
}

/// `cmd.output()` bounded in time: standard input from /dev/null, standard output and error
/// read to their end as the command writes them; past `limit` the command is killed and the
/// test fails, as `wait_bounded` does.
pub fn output_bounded(cmd: &mut std::process::Command, limit: Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let reader = |mut stream: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            let _ = tx.send(bytes);
        });
        rx
    };
    let stdout = reader(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("piped stderr")));
    let until = Instant::now() + limit;
    let status = wait_bounded(&mut child, limit);
    // A process the command left behind may still hold the pipes: bounded too.
    let rest = || until.saturating_duration_since(Instant::now()) + STEP_LIMIT;
    let stdout = stdout
        .recv_timeout(rest())
        .expect("the command's stdout was still held open past the bound");
    let stderr = stderr
        .recv_timeout(rest())
        .expect("the command's stderr was still held open past the bound");
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// Whether curl is on this machine for `test` (the tests that ask a local HTTP server with
/// it): skipped loudly without it, as for any package (`have_package`).
pub fn have_curl(test: &str) -> bool {
    have_package(test, "curl", "curl", on_path("curl"))
}

pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The standard error of a run that `retry` refused before it began: status 125 and a single
/// line; `what`, when not empty, names the run in a failure.
pub fn usage_error_of(out: &std::process::Output, what: &str) -> String {
    let log = stderr_of(out);
    let at = if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    };
    assert_eq!(out.status.code(), Some(125), "{at}{log}");
    assert_eq!(log.lines().count(), 1, "{at}{log}");
    log
}

/// Checks that `cmd`, `retry` with the options under test, refuses to run `touch ran` in
/// `dir`: status 125 within 5 s, one line that holds every one of `needles`, no file `ran`.
pub fn assert_refused(cmd: &mut assert_cmd::Command, dir: &Path, needles: &[&str]) {
    let _ = std::fs::remove_file(dir.join("ran"));
    let started = Instant::now();
    let out = cmd
        .current_dir(dir)
        .timeout(STEP_LIMIT)
        .args(["--", "touch", "ran"])
        .output()
        .unwrap();
    let log = usage_error_of(&out, &format!("{cmd:?}"));
    for needle in needles {
        assert!(log.contains(needle), "{cmd:?}: {needle:?} in {log}");
    }
    assert!(!dir.join("ran").exists(), "{cmd:?}: the command ran");
    assert!(started.elapsed() < Duration::from_secs(5), "{cmd:?}");
}

/// The JSON values of `text`, one a line: a JSON log, a history, dead letters.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

/// The JSON values of the file at `path`, one a line.
pub fn json_file(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    json_lines(&text)
}

/// The JSON lines whose `event` is `name`.
pub fn events<'a>(lines: &'a [serde_json::Value], name: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|l| l["event"] == name).collect()
}

/// The first JSON line whose `event` is `name`; the test fails without one.
pub fn event<'a>(lines: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| l["event"] == name)
        .unwrap_or_else(|| panic!("no {name} event in {lines:?}"))
}

/// The `event` of each JSON line, in order.
pub fn event_names(lines: &[serde_json::Value]) -> Vec<&str> {
    lines.iter().map(|l| l["event"].as_str().unwrap()).collect()
}

/// A quota's parameters, as `ratio=R,floor=F/s,cap=C` sets them: `ratio` tokens deposited by
/// each first try, `floor` tokens that accrue each second, at most `cap` tokens.
pub fn quota_params(ratio: f64, floor: f64, cap: f64) -> retry::policy::quota::QuotaParams {
    retry::policy::quota::QuotaParams { ratio, floor, cap }
}

/// An exclusive `flock` on a file, held by another process (a `sleep`) until dropped: a
/// writer that is elsewhere and takes its time.
pub struct LockHolder(Child);

impl LockHolder {
    /// Takes the lock on `path` and hands it to a `sleep` that holds it.
    pub fn lock(path: &Path) -> LockHolder {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new().read(true).open(path).unwrap();
        #[allow(deprecated)]
        nix::fcntl::flock(file.as_raw_fd(), nix::fcntl::FlockArg::LockExclusive).unwrap();
        // The lock belongs to the open file, which the child now shares; this process's
        // descriptor is closed when the Command is dropped at the end of the statement.
        let child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(file)
            .spawn()
            .unwrap();
        LockHolder(child)
    }

    /// Lets the lock go: its holder is killed and reaped.
    pub fn release(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        self.release();
    }
}

/// The effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { nix::libc::geteuid() }
}

/// The uid of a second user, created when missing; `None` (the test says loudly that it skips
/// that part, and fails under RETRY_REQUIRE_PACKAGES=1, as CI runs it as root) when this
/// process is not root and cannot create one.
pub fn other_user() -> Option<u32> {
    if euid() != 0 {
        have_package(
            "a test of another user",
            "root, to create a second user,",
            "passwd",
            false,
        );
        return None;
    }
    let name = "retry-test-other";
    let uid = || {
        let out = std::process::Command::new("id")
            .args(["-u", name])
            .output()
            .ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    if uid().is_none() {
        // Several tests may create it at once: whichever does, the uid is then there.
        let _ = std::process::Command::new("useradd")
            .args(["-M", "-N", name])
            .status();
    }
    let found = uid();
    if found.is_none() {
        have_package("a test of another user", "useradd", "passwd", false);
    }
    found
}

/// Sets the test program up before its `main`, from its `.init_array` as a C constructor runs:
///
/// - Every descriptor it inherited (above standard error) is marked close-on-exec: what a test
///   starts then holds none of them. Whoever started `cargo test` may have left one open, a
///   lock that `flock(1)` holds for a build among them, and a process a test leaves behind
///   would keep that lock for as long as it lives. Descriptors the tests open are close-on-exec
///   already (std opens them so).
/// - Every signal it inherited ignored is set back to its default, as an interactive shell
///   starts a command in the foreground. A shell script that runs `cargo test &` starts it with
///   SIGINT and SIGQUIT ignored, `nohup` with SIGHUP ignored; `retry` keeps a signal ignored
///   that it was started with ignored (docs/processes.md), so a test that interrupts `retry`
///   would see nothing happen, wait for its bound and leave its try running. (SIGPIPE is left
///   to Rust's runtime, which ignores it after this.)
extern "C" fn before_main() {
    use nix::libc;
    // SAFETY: one system call on this process's own descriptor table, and a read and a setting
    // of each signal's action before any thread or handler exists; zero bytes are a valid
    // `sigaction`.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        for n in 1..libc::SIGRTMIN() {
            if matches!(n, libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE) {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(n, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                libc::signal(n, libc::SIG_DFL);
            }
        }
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static BEFORE_MAIN: extern "C" fn() = before_main;

thread_local! {
    /// Whether this thread is inside [`expect_panic`].
    static EXPECTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, which a test expects to panic, and returns the panic's message (or `None` when
/// it did not panic). The panic is not printed: the test program's panic hook says nothing of
/// an expected panic, so no backtrace is taken for it (with `RUST_BACKTRACE=1`, the first one
/// reads the program's debug information into memory, 100 MB that every later fork of the
/// test program copies the page tables of). Any other panic is printed as before.
pub fn expect_panic<R>(f: impl FnOnce() -> R) -> Option<String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let told = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !EXPECTING.with(std::cell::Cell::get) {
                told(info);
            }
        }));
    });
    EXPECTING.with(|e| e.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    EXPECTING.with(|e| e.set(false));
    let payload = result.err()?;
    Some(
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    )
}

/// The binary, started on another host (a UTS namespace named `name`) when `other` is true.
pub fn on_host(other: bool, name: &str) -> std::process::Command {
    let me = assert_cmd::cargo::cargo_bin("retry").display().to_string();
    if !other {
        let mut cmd = retry_std();
        cmd.stdin(std::process::Stdio::null());
        return cmd;
    }
    let mut cmd = std::process::Command::new("unshare");
    let script = format!("hostname {name} && exec \"$0\" \"$@\"");
    cmd.args(["-u", "sh", "-c", &script, &me])
        .env_remove("RETRY_RUN_ID")
        .stdin(std::process::Stdio::null());
    cmd
}

/// Whether runs can be started on other hosts (UTS namespaces, as root), said loudly if not.
pub fn other_hosts(test: &str) -> bool {
    have_package(
        test,
        "root, for UTS namespaces (unshare -u) that are other hosts",
        "root",
        euid() == 0
            && std::process::Command::new("unshare")
                .args(["-u", "true"])
                .status()
                .is_ok_and(|s| s.success()),
    )
}
