//! The edges of the contract (docs/processes.md#timeouts, docs/processes.md#leftover-processes,
//! docs/processes.md#signals-received-by-retry, docs/log.md#hooks,
//! docs/exit-status.md#exit-status): signals of every number, signals that reach `retry` itself,
//! dispositions inherited from the caller, processes that leave the try's group, hooks, and starts
//! that fail for want of resources.

use crate::common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{
    alive, event_names, json_lines, pids_in, retry, retry_std, send, stderr_of, survivors,
    wait_bounded, wait_for_lines,
};

fn sigrtmin() -> i32 {
    nix::libc::SIGRTMIN()
}

#[test]
fn a_try_that_dies_of_a_real_time_signal_exits_128_plus_n_without_hanging() {
    let n = sigrtmin();
    let started = Instant::now();
    let out = retry()
        .args(["-n", "1", "--", "sh", "-c", &format!("kill -{n} $$")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + n), "{}", stderr_of(&out));
    assert!(started.elapsed() < common::STEP_LIMIT);
    // With a timeout it is still that signal, not "timed out".
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "5",
            "--",
            "sh",
            "-c",
            &format!("kill -{n} $$"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + n), "{}", stderr_of(&out));
    assert!(
        !stderr_of(&out).contains("timed out"),
        "{}",
        stderr_of(&out)
    );
}

/// Runs a try that traps signal `n` and times out with `-s SIGNAL`; returns retry's output and
/// the signal the try's trap recorded.
fn sent_on_timeout(signal: &str, n: i32) -> (std::process::Output, String) {
    let dir = common::temp_dir("rt-send");
    let got = dir.join("got");
    let script = format!(
        "trap 'echo {n} > \"{g}\"; exit 5' {n}; sleep 30 & wait",
        g = got.display()
    );
    let out = retry()
        .args(["-n", "1", "-t", "300ms", "-k", "5s", "-s", signal])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let got = std::fs::read_to_string(&got).unwrap_or_default();
    (out, got.trim().to_string())
}

#[test]
fn a_real_time_signal_given_by_number_is_sent_on_timeout() {
    for n in [sigrtmin(), sigrtmin() + 2] {
        let (out, got) = sent_on_timeout(&n.to_string(), n);
        assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
        assert_eq!(got, n.to_string(), "signal {n} reached the try");
        assert!(
            !stderr_of(&out).contains("SIGKILL"),
            "no kill needed: {}",
            stderr_of(&out)
        );
    }
}

#[test]
fn sigusr1_is_forwarded_to_the_try_and_the_run_goes_on() {
    let dir = common::temp_dir("usr1");
    let ready = dir.join("ready");
    let script = format!(
        "trap 'echo usr1' USR1; echo $$ > '{r}'; i=0; while [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done; echo done",
        r = ready.display()
    );
    let mut child = retry_std()
        .args(["-n", "1", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lines(&ready, 1, common::STEP_LIMIT);
    send(child.id(), nix::libc::SIGUSR1);
    let status = wait_bounded(&mut child, Duration::from_secs(15));
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "usr1\ndone\n");
}

/// Sends `signal` to retry during a try: the run stops as on SIGTERM, no further try starts,
/// nothing of the try is left, and retry dies of that signal.
fn a_signal_to_retry_stops_the_run(signal: i32, name: &str) {
    let dir = common::temp_dir(name);
    let pids = dir.join("pids");
    let script = format!(
        "echo $$ >> '{p}'; sleep 300 & echo $! >> '{p}'; wait",
        p = pids.display()
    );
    let mut child = retry_std()
        .args([
            "-n", "3", "-d", "0", "-k", "500ms", "--", "sh", "-c", &script,
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&pids, 2, common::STEP_LIMIT);
    send(child.id(), signal);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert_eq!(status.signal(), Some(signal), "{name}: {status:?}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 2, "{name}: no further try started");
    assert_eq!(survivors(&pids, Duration::from_secs(2)), Vec::<i32>::new());
}

#[test]
fn sigalrm_stops_the_run_as_sigterm_does_and_orphans_nothing() {
    a_signal_to_retry_stops_the_run(nix::libc::SIGALRM, "alrm");
}

#[test]
fn a_forwarded_signal_is_followed_by_sigcont_so_a_stopped_try_ends_at_once() {
    let dir = common::temp_dir("cont");
    let pids = dir.join("pids");
    let script = format!("echo $$ >> '{p}'; kill -STOP $$", p = pids.display());
    let mut child = retry_std()
        .args(["-n", "1", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&pids, 1, common::STEP_LIMIT);
    let pid = pids_in(&pids)[0];
    // Wait until the try has stopped itself.
    let until = Instant::now() + common::STEP_LIMIT;
    while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_default()
        .contains(") T ")
    {
        assert!(Instant::now() < until, "the try never stopped");
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = Instant::now();
    send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, Duration::from_secs(15));
    let took = sent.elapsed();
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}");
    // Without SIGCONT it would take the whole 10 s grace period.
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(!alive(pid));
}

/// The signals ignored in a process, from its /proc status.
fn ignored_mask(status: &str) -> u64 {
    let line = status
        .lines()
        .find(|l| l.starts_with("SigIgn:"))
        .expect("a SigIgn line");
    u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap()
}

#[test]
fn signals_ignored_on_entry_stay_ignored_in_the_try_and_no_others() {
    let bit = |n: i32| 1u64 << (n - 1);
    // As a non-interactive shell starts a background job: INT and QUIT ignored.
    let mut cmd = common::retry_std();
    cmd.args(["-n", "1", "--", "cat", "/proc/self/status"]);
    unsafe {
        cmd.pre_exec(|| {
            nix::libc::signal(nix::libc::SIGINT, nix::libc::SIG_IGN);
            nix::libc::signal(nix::libc::SIGQUIT, nix::libc::SIG_IGN);
            Ok(())
        });
    }
    let out = common::output_bounded(&mut cmd, common::TEST_LIMIT);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let mask = ignored_mask(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        mask,
        bit(nix::libc::SIGINT) | bit(nix::libc::SIGQUIT),
        "{mask:#x}"
    );
    // Nothing ignored on entry: nothing ignored in the try, the signals glibc reserves (32,
    // 33) included.
    let out = retry()
        .args(["-n", "1", "--", "cat", "/proc/self/status"])
        .output()
        .unwrap();
    let mask = ignored_mask(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(mask, 0, "{mask:#x}");
}

#[test]
fn under_nohup_sighup_neither_ends_retry_nor_its_try() {
    let dir = common::temp_dir("nohup");
    let pids = dir.join("pids");
    let script = format!("echo $$ >> '{p}'; sleep 1; echo done", p = pids.display());
    let mut cmd = common::retry_std();
    cmd.args(["-n", "1", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    unsafe {
        cmd.pre_exec(|| {
            nix::libc::signal(nix::libc::SIGHUP, nix::libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    wait_for_lines(&pids, 1, common::STEP_LIMIT);
    send(child.id(), nix::libc::SIGHUP);
    let pid = pids_in(&pids)[0];
    unsafe { nix::libc::kill(pid, nix::libc::SIGHUP) };
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
}

#[test]
fn processes_that_leave_the_group_with_setsid_are_stopped_before_the_next_try() {
    let dir = common::temp_dir("setsid");
    let pids = dir.join("pids");
    let script = format!(
        "setsid sh -c 'echo $$ >> \"{p}\"; exec sleep 203' >/dev/null 2>&1 & sleep 0.2; exit 1",
        p = pids.display()
    );
    let out = retry()
        .args([
            "-n", "2", "-d", "1ms", "-k", "2s", "--", "sh", "-c", &script,
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 2, "one escapee per try: {log}");
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    survivors(&left, Duration::ZERO);
    assert!(
        left.is_empty(),
        "still running when retry returned: {left:?}"
    );
    assert_eq!(
        log.matches("left 1 process running; stopped it").count(),
        2,
        "{log}"
    );
}

#[test]
fn a_process_that_leaves_the_group_with_setpgid_is_stopped_on_timeout() {
    let dir = common::temp_dir("setpgid");
    let pids = dir.join("pids");
    let script = format!(
        "perl -e 'setpgrp(0,0); open(F, \">>\", \"{p}\"); print F \"$$\\n\"; close F; sleep 30' & wait",
        p = pids.display()
    );
    let started = Instant::now();
    let out = retry()
        .args([
            "-n", "1", "-t", "500ms", "-k", "5s", "--", "sh", "-c", &script,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 1);
    let left = survivors(&pids, Duration::ZERO);
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn what_a_hook_leaves_running_is_stopped() {
    let dir = common::temp_dir("hook-left");
    let pids = dir.join("pids");
    let hook = format!(
        "sleep 77 >/dev/null 2>&1 & echo $! >> '{p}'",
        p = pids.display()
    );
    let out = retry()
        .args(["-n", "2", "-d", "10ms", "--on-retry", &hook])
        .args(["--on-give-up", &hook, "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 2, "both hooks ran: {log}");
    let left = survivors(&pids, Duration::ZERO);
    assert!(left.is_empty(), "hook leftovers still running: {left:?}");
    assert!(
        log.contains("--on-retry hook left 1 process running"),
        "{log}"
    );
    assert!(
        log.contains("--on-give-up hook left 1 process running"),
        "{log}"
    );
}

#[test]
fn the_budget_is_checked_again_after_the_hook() {
    let started = Instant::now();
    let out = retry()
        .args(["-n", "3", "-B", "1s", "-d", "100ms", "-j", "none"])
        .args([
            "--log-format",
            "json",
            "--on-retry",
            "sleep 5",
            "--",
            "false",
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    // The last try's status, not 124: no second try started past the deadline.
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert_eq!(log.matches(r#""event":"try""#).count(), 1, "{log}");
    assert!(log.contains(r#""reason":"budget""#), "{log}");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let out = retry()
        .args(["-n", "3", "-B", "1s", "-d", "100ms", "-j", "none"])
        .args(["--on-retry", "sleep 5", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert!(
        log.contains("no time left for try 2/3 after the --on-retry hook; giving up: budget: "),
        "{log}"
    );
    assert!(!log.contains("retry: try 2/3"), "{log}");
}

/// `retry` with no room for one more process: as nobody (root is exempt from the limit) with
/// RLIMIT_NPROC at 0, every fork fails with EAGAIN.
fn retry_without_processes(args: &[&str]) -> std::process::Output {
    let mut cmd = common::retry_std();
    cmd.args(args);
    unsafe {
        cmd.pre_exec(|| {
            if nix::libc::geteuid() == 0
                && (nix::libc::setgid(65534) != 0 || nix::libc::setuid(65534) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            let none = nix::libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if nix::libc::setrlimit(nix::libc::RLIMIT_NPROC, &none) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start retry as nobody");
    wait_bounded(&mut child, Duration::from_secs(15));
    child.wait_with_output().unwrap()
}

#[test]
fn a_start_that_fails_for_want_of_processes_is_transient_and_125_when_last() {
    let out = retry_without_processes(&[
        "-n",
        "3",
        "-d",
        "10ms",
        "--log-format",
        "json",
        "--",
        "true",
    ]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert_eq!(log.matches(r#""event":"try""#).count(), 3, "retried: {log}");
    assert_eq!(log.matches(r#""verdict":"transient""#).count(), 3, "{log}");
    assert!(log.contains(r#""no_resources":true"#), "{log}");
    assert!(log.contains("EAGAIN"), "{log}");
    assert!(!log.contains("cannot be executed"), "{log}");
}

#[test]
fn a_real_time_signal_to_retry_stops_the_run_and_retry_dies_of_it() {
    a_signal_to_retry_stops_the_run(sigrtmin() + 3, "rt-stop");
}

#[test]
fn the_signals_glibc_reserves_stop_the_run_too() {
    a_signal_to_retry_stops_the_run(32, "sig32");
    a_signal_to_retry_stops_the_run(33, "sig33");
}

#[test]
fn real_time_signals_by_name_are_sent_on_timeout() {
    let n = sigrtmin() + 2;
    let (out, got) = sent_on_timeout("RTMIN+2", n);
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert_eq!(got, n.to_string());
}

#[test]
fn an_interrupted_try_has_its_try_event_before_the_signal_and_the_give_up() {
    let dir = common::temp_dir("json-interrupted");
    let pids = dir.join("pids");
    let script = format!("echo $$ >> '{p}'; exec sleep 300", p = pids.display());
    let mut child = retry_std()
        .args(["--log-format", "json", "-n", "3", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lines(&pids, 1, common::STEP_LIMIT);
    send(child.id(), nix::libc::SIGTERM);
    wait_bounded(&mut child, common::STEP_LIMIT);
    let out = child.wait_with_output().unwrap();
    let log = stderr_of(&out);
    let events = json_lines(&log);
    assert_eq!(
        event_names(&events),
        ["start", "try", "signal", "give_up"],
        "{log}"
    );
    assert_eq!(events[1]["attempt"], 1);
    assert_eq!(events[1]["verdict"], "interrupted");
    assert_eq!(events[1]["outcome"]["signal"], "TERM");
}

#[test]
fn leftovers_are_logged_after_their_try_with_their_count() {
    let script = "sleep 300 >/dev/null 2>&1 & sleep 300 >/dev/null 2>&1 & exit 1";
    let out = retry()
        .args(["--log-format", "json", "-n", "1", "--", "sh", "-c", script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let events = json_lines(&log);
    assert_eq!(
        event_names(&events),
        ["start", "try", "leftovers", "give_up"],
        "{log}"
    );
    assert_eq!(events[2]["attempt"], 1);
    assert_eq!(events[2]["count"], 2);
    assert_eq!(events[2]["killed"], false);
}

#[test]
fn a_try_that_needed_sigkill_after_the_grace_period_says_so() {
    // Its output goes elsewhere, so that the test ends even if it were never killed.
    let script = "exec >/dev/null 2>&1; trap '' TERM; while :; do sleep 0.05; done";
    let out = retry()
        .args([
            "-n", "1", "-t", "300ms", "-k", "300ms", "--", "sh", "-c", script,
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    assert!(log.contains("try 1/1 timed out after"), "{log}");
    assert!(
        log.contains(", sent SIGTERM, then SIGKILL after the 300ms grace period"),
        "{log}"
    );
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "300ms",
            "-k",
            "300ms",
            "--log-format",
            "json",
        ])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let events = json_lines(&log);
    let try_event = events.iter().find(|e| e["event"] == "try").unwrap();
    assert_eq!(try_event["outcome"]["timeout"], true, "{log}");
    assert_eq!(try_event["killed"], true, "{log}");
    // A try that ends on the signal was not killed.
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "300ms",
            "--log-format",
            "json",
            "--",
            "sleep",
            "5",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let events = json_lines(&log);
    let try_event = events.iter().find(|e| e["event"] == "try").unwrap();
    assert_eq!(try_event["killed"], false, "{log}");
}

#[test]
fn an_internal_failure_has_an_error_event_and_status_125() {
    // Too few descriptors for the pipes that watching the output needs.
    let mut cmd = common::retry_std();
    cmd.args([
        "--log-format",
        "json",
        "--retry-if-output",
        "x",
        "--",
        "true",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    unsafe {
        cmd.pre_exec(|| {
            let few = nix::libc::rlimit {
                rlim_cur: 6,
                rlim_max: 6,
            };
            if nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &few) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    wait_bounded(&mut child, common::STEP_LIMIT);
    let out = child.wait_with_output().unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    let events = json_lines(&log);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "error", "{log}");
    assert!(!last["message"].as_str().unwrap().is_empty(), "{log}");
}

#[test]
fn what_was_below_retry_before_its_first_try_is_never_stopped_with_a_try() {
    let dir = common::temp_dir("inherited");
    let pid_file = dir.join("sidecar");
    // An entrypoint script: a sidecar, then `exec retry`, which inherits it as a child.
    let script = format!(
        "sleep 111 >/dev/null 2>&1 & echo $! > '{p}'; exec \"$0\" -n 2 -d 1ms -- sh -c 'sleep 0.1; exit 3'",
        p = pid_file.display()
    );
    let out = common::output_bounded(
        std::process::Command::new("sh")
            .args(["-c", &script])
            .arg(assert_cmd::cargo::cargo_bin("retry"))
            .env_remove("RETRY_RUN_ID"),
        common::TEST_LIMIT,
    );
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    let sidecar = pids_in(&pid_file)[0];
    let was_alive = alive(sidecar);
    survivors(&[sidecar], Duration::ZERO);
    assert!(was_alive, "the sidecar was stopped: {log}");
    assert!(!log.contains("running; stopped"), "{log}");
}

#[test]
fn a_stopped_try_gets_the_signal_once_not_once_per_way_it_was_found() {
    // A real-time signal queues, so each delivery counts: the try writes how many it got,
    // whole (by rename), since SIGKILL may come at any moment.
    let dir = common::temp_dir("once");
    let count = dir.join("count");
    let script = format!(
        "import os, signal, socket, time\n\
         r, w = socket.socketpair()\n\
         r.setblocking(False); w.setblocking(False)\n\
         signal.signal(signal.SIGRTMIN, lambda *a: None)\n\
         signal.set_wakeup_fd(w.fileno())\n\
         n = 0\n\
         while True:\n    \
             time.sleep(0.02)\n    \
             try:\n        n += len(r.recv(64))\n    \
             except BlockingIOError:\n        pass\n    \
             open('{c}.new', 'w').write(str(n))\n    \
             os.replace('{c}.new', '{c}')\n",
        c = count.display()
    );
    let out = retry()
        // Time enough for python to start on a loaded machine: its count is written from then on.
        .args(["-n", "1", "-t", "2s", "-k", "700ms", "-s", "RTMIN"])
        .args(["--", "python3", "-S", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    let got = std::fs::read_to_string(&count).unwrap_or_default();
    assert_eq!(got.trim(), "1", "deliveries of the stop signal");
}

#[test]
fn a_timed_out_try_logs_how_many_processes_had_left_its_group() {
    let script = "perl -e 'setpgrp(0,0); open(STDOUT, \">/dev/null\"); open(STDERR, \">/dev/null\"); sleep 30' & wait";
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "500ms",
            "--log-format",
            "json",
            "--",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    let events = json_lines(&log);
    assert_eq!(
        event_names(&events),
        ["start", "try", "leftovers", "give_up"],
        "{log}"
    );
    assert_eq!(events[2]["count"], 1, "{log}");
}

#[test]
fn a_hook_s_leftovers_are_a_leftovers_event_with_its_attempt() {
    let out = retry()
        .args(["-n", "2", "-d", "1ms", "--log-format", "json"])
        .args(["--on-retry", "sleep 77 >/dev/null 2>&1 &", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let events = json_lines(&log);
    let left = events
        .iter()
        .find(|e| e["event"] == "leftovers")
        .unwrap_or_else(|| panic!("no leftovers event: {log}"));
    assert_eq!(left["hook"], "--on-retry", "{log}");
    assert_eq!(left["attempt"], 1, "{log}");
    assert_eq!(left["count"], 1, "{log}");
}

#[test]
fn an_output_pattern_does_not_make_a_start_without_resources_permanent() {
    let out = retry_without_processes(&[
        "-n",
        "2",
        "-d",
        "10ms",
        "--retry-if-output",
        "x",
        "--log-format",
        "json",
        "--",
        "true",
    ]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert_eq!(log.matches(r#""verdict":"transient""#).count(), 2, "{log}");
}

/// A command run for its output that outlives its bound is killed and fails its test, rather
/// than hanging the suite.
#[test]
fn a_command_run_for_its_output_is_bounded_in_time() {
    let failed = common::expect_panic(|| {
        common::output_bounded(
            std::process::Command::new("sleep").arg("30"),
            Duration::from_millis(200),
        )
    });
    let message = failed.expect("the test fails");
    assert!(message.contains("did not end within"), "{message}");
}
