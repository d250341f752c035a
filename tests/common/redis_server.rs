//! A `redis-server` of a test's own on 127.0.0.1, for the fleet quota's tests. Without
//! `redis-server` a test says so loudly on stderr and passes, unless RETRY_REQUIRE_REDIS=1 (as
//! CI sets it) makes it fail.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `redis-server` of this test's own, killed when dropped.
pub struct Server {
    pub child: Child,
    /// 0 for a server that listens on its socket alone.
    pub port: u16,
    pub log: PathBuf,
    /// The Unix socket it listens on, if one.
    pub socket: Option<PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts a server with these extra arguments, or returns `None` after saying loudly that
    /// the test is skipped (failing instead when RETRY_REQUIRE_REDIS=1).
    pub fn start(test: &str, extra: &[&str]) -> Option<Server> {
        let mut why = String::new();
        // A free port may be taken between asking for it and the server binding it: try again.
        for _ in 0..3 {
            match Server::try_start(test, extra) {
                Ok(server) => return Some(server),
                Err(e) => why = e,
            }
        }
        if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
            panic!("redis-server could not be started (RETRY_REQUIRE_REDIS=1): {why}");
        }
        // Written to the real stderr: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: redis-server not available: {test} did not run ({why}); install \
             redis-server, or set RETRY_REQUIRE_REDIS=1 to make this a failure"
        );
        None
    }

    /// Starts a server on `port` (one that an earlier server of the test had), or returns
    /// `None` as [`Server::start`] does.
    pub fn start_on(test: &str, port: u16) -> Option<Server> {
        match Server::try_start_on(test, &[], port) {
            Ok(server) => Some(server),
            Err(why) => {
                if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
                    panic!(
                        "redis-server could not be started again (RETRY_REQUIRE_REDIS=1): {why}"
                    );
                }
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: redis-server not available: {test}: {why}"
                );
                None
            }
        }
    }

    /// Starts a server on `port` with these extra arguments (a directory holding its
    /// snapshot, say), or returns `None` as [`Server::start_on`] does.
    pub fn start_on_with(test: &str, port: u16, extra: &[&str]) -> Option<Server> {
        let mut why = String::new();
        // The port of a server just shut down may take a moment to be free again.
        for _ in 0..20 {
            match Server::try_start_on(test, extra, port) {
                Ok(server) => return Some(server),
                Err(e) => why = e,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
            panic!("redis-server could not be started again (RETRY_REQUIRE_REDIS=1): {why}");
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: redis-server not available: {test}: {why}"
        );
        None
    }

    /// Starts a server that listens on a Unix socket alone (`port 0`), in a directory only this
    /// user may enter, or returns `None` as [`Server::start`] does.
    pub fn start_unix(test: &str, extra: &[&str]) -> Option<Server> {
        let dir = crate::common::runtime_dir(&format!("redis-sock-{test}"));
        let socket = dir.join("redis.sock");
        let path = socket.to_str().expect("a socket path in UTF-8").to_string();
        let mut args = vec!["--unixsocket", &path, "--unixsocketperm", "700"];
        args.extend_from_slice(extra);
        match Server::try_start_on(test, &args, 0) {
            Ok(server) => Some(server),
            Err(why) => {
                if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
                    panic!("redis-server could not be started (RETRY_REQUIRE_REDIS=1): {why}");
                }
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: redis-server not available: {test} did not run ({why})"
                );
                None
            }
        }
    }

    fn try_start(test: &str, extra: &[&str]) -> Result<Server, String> {
        Server::try_start_on(test, extra, free_port())
    }

    /// Starts a server whose clock of the time of day is `seconds` ahead of this machine's
    /// (behind, when negative): a library put before the C library's clock calls shifts them
    /// (libfaketime cannot: it deadlocks with the server's jemalloc). Its monotonic clock is
    /// left alone. Returns `None` as [`Server::start`] does, and when no C compiler builds the
    /// library, saying so loudly (failing under RETRY_REQUIRE_REDIS=1).
    pub fn start_with_clock_shifted(test: &str, seconds: i64) -> Option<Server> {
        let dir = crate::common::temp_dir(&format!("clock-shift-{test}"));
        let source = dir.join("clock_shift.c");
        let library = dir.join("clock_shift.so");
        std::fs::write(&source, CLOCK_SHIFT_C).expect("write the clock's library");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&library)
            .arg(&source)
            .stdin(Stdio::null())
            .output();
        let why = match built {
            Ok(out) if out.status.success() => {
                let preload = library
                    .to_str()
                    .expect("a library path in UTF-8")
                    .to_string();
                let shift = seconds.to_string();
                let env = [("LD_PRELOAD", preload.as_str()), ("CLOCK_SHIFT_S", &shift)];
                let mut why = String::new();
                for _ in 0..3 {
                    match Server::try_start_env(test, &[], free_port(), &env) {
                        Ok(server) => return Some(server),
                        Err(e) => why = e,
                    }
                }
                why
            }
            Ok(out) => format!("cc failed: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => format!("cannot run cc: {e}"),
        };
        if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
            panic!("a redis-server with its clock shifted could not be started: {why}");
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: a redis-server with its clock shifted could not be started: {test} did \
             not run ({why})"
        );
        None
    }

    fn try_start_on(test: &str, extra: &[&str], port: u16) -> Result<Server, String> {
        Server::try_start_env(test, extra, port, &[])
    }

    fn try_start_env(
        test: &str,
        extra: &[&str],
        port: u16,
        env: &[(&str, &str)],
    ) -> Result<Server, String> {
        let dir = crate::common::temp_dir(&format!("redis-{test}"));
        let log = dir.join("redis.log");
        let port_arg = port.to_string();
        let mut args = vec![
            "--port",
            &port_arg,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        args.extend_from_slice(extra);
        // The server gets none of the descriptors the test program inherited: they were marked
        // close-on-exec before its `main`.
        let mut command = Command::new("redis-server");
        let child = command
            .args(&args)
            .envs(env.iter().copied())
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        let socket = extra
            .iter()
            .position(|a| *a == "--unixsocket")
            .map(|at| PathBuf::from(extra[at + 1]));
        let mut server = Server {
            child,
            port,
            log,
            socket,
        };
        // Another test's server may hold the port while this one fails to bind it: only this
        // server's own log says it listens.
        let listens = |server: &Server| {
            std::fs::read_to_string(&server.log)
                .is_ok_and(|log| log.to_lowercase().contains("ready to accept connections"))
                && server.answers()
        };
        let ready = crate::common::wait_until(Duration::from_secs(5), || {
            listens(&server) || matches!(server.child.try_wait(), Ok(Some(_)))
        });
        if ready && listens(&server) {
            return Ok(server);
        }
        let log = std::fs::read_to_string(&server.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(3).collect();
        Err(format!(
            "redis-server on port {port} did not answer PING: {}",
            tail.join(" | ")
        ))
    }

    /// Whether the server answers PING (with PONG, or asking for the password).
    pub fn answers(&self) -> bool {
        let mut reply = [0u8; 7];
        let mut ping = |s: &mut dyn ReadWrite| {
            s.write_all(b"PING\r\n").is_ok()
                && s.read_exact(&mut reply).is_ok()
                && (reply.starts_with(b"+PONG") || reply.starts_with(b"-NOAUTH"))
        };
        if let Some(socket) = &self.socket {
            let Ok(mut s) = UnixStream::connect(socket) else {
                return false;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            return ping(&mut s);
        }
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        ping(&mut s)
    }

    pub fn url(&self, name: &str) -> String {
        format!("redis://127.0.0.1:{}/{name}", self.port)
    }
}

/// The library that shifts a server's clock of the time of day by `CLOCK_SHIFT_S` seconds. It
/// asks the kernel itself, so that it needs nothing that could call back into a clock (as
/// `dlsym` and a `malloc` that reads the time would).
const CLOCK_SHIFT_C: &str = r#"
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long shift(void) {
    const char *s = getenv("CLOCK_SHIFT_S");
    return s ? atoll(s) : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += shift();
    return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *t) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}
"#;

/// A stream to PING a server on.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

/// A port on 127.0.0.1 that refuses connections for as long as the returned descriptor is
/// open: a socket bound to it that never listens. A port that [`free_port`] found free may be
/// taken by a server another test starts meanwhile; this one cannot.
pub fn closed_port() -> (std::os::fd::OwnedFd, u16) {
    use nix::libc;
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain socket calls on a descriptor this function owns; the address structures
    // are zeroed (valid) and outlive the calls that read or write them.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "a socket");
        let fd = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let ptr = &raw mut addr as *mut libc::sockaddr;
        assert_eq!(libc::bind(raw, ptr, size), 0, "bind a port");
        let mut len = size;
        assert_eq!(libc::getsockname(raw, ptr, &mut len), 0, "its address");
        (fd, u16::from_be(addr.sin_port))
    }
}

/// `redis-cli -p PORT --raw ARGS...` on 127.0.0.1: the lines of its reply.
pub fn cli(port: u16, args: &[&str]) -> Vec<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--raw"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Sends `commands` to the server on `port` at once (`redis-cli --pipe`), each a list of
/// words: for many of them, or large ones, where [`cli`] would start a process each.
pub fn pipe(port: u16, commands: &[Vec<Vec<u8>>]) {
    let mut resp = Vec::new();
    for words in commands {
        resp.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
        for word in words {
            resp.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            resp.extend_from_slice(word);
            resp.extend_from_slice(b"\r\n");
        }
    }
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-cli --pipe");
    child.stdin.take().unwrap().write_all(&resp).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redis-cli --pipe: {out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("errors: 0"), "redis-cli --pipe: {said}");
}

/// Whether the replica on `replica` comes to hold, within the step limit, everything that the
/// server on `primary` had written when asked: its replication offset reaches the primary's.
/// (`WAIT` would not say it: sent on a connection that wrote nothing, as `redis-cli WAIT` is, it
/// waits for nothing.)
pub fn in_step(primary: u16, replica: u16) -> bool {
    let offset = |port: u16, field: &str| -> u64 {
        cli(port, &["INFO", "replication"])
            .iter()
            .find_map(|l| l.trim().strip_prefix(field)?.parse().ok())
            .unwrap_or(0)
    };
    let written = offset(primary, "master_repl_offset:");
    crate::common::wait_until(crate::common::STEP_LIMIT, || {
        offset(replica, "slave_repl_offset:") >= written
    })
}
