//! The log's rendering, driven by hand-built events: what each event becomes in the human log
//! and in JSON lines.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use super::*;
use crate::config::Config;
use crate::config::{ParseOutcome, parse};
use crate::exit::ExitStatus;
use crate::policy::pushback::Ignored;
use crate::policy::{Decision, GiveUp, Hook, Outcome, Reason, Signal, Verdict, Wait};
use crate::report::event::{During, Failure, HookFailure, NotStarted, TryReport};
use crate::report::words::not_started;
use crate::text::Charset;
use std::io::Write;

/// What a log wrote, for the test to read afterwards.
#[derive(Clone, Default)]
struct Captured(Rc<RefCell<Vec<u8>>>);

/// A clock that stamps every event with the same time.
fn fixed_clock() -> Stamper {
    Box::new(|| crate::report::event::Stamp {
        at: SystemTime::UNIX_EPOCH,
        elapsed: Duration::ZERO,
    })
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.borrow().clone()).unwrap()
    }
}

fn config_for(args: &[&str]) -> Config {
    match parse(
        ["retry"].iter().chain(args).chain(&["--", "true"]),
        SystemTime::UNIX_EPOCH,
    ) {
        ParseOutcome::Run(c) => *c,
        other => panic!("{other:?}"),
    }
}

fn log_for(args: &[&str]) -> (Log, Captured) {
    let mut config = config_for(args);
    config.charset = Charset::Utf8;
    let sink = Captured::default();
    let log = Log::new(
        Box::new(sink.clone()),
        &config,
        false,
        "id".into(),
        fixed_clock(),
    );
    (log, sink)
}

/// The events of the old calls, in the shapes the tests below were written with.
trait Emit {
    fn try_ended(&mut self, r: &TryReport);
    fn leftovers(&mut self, attempt: u64, signal: Signal, killed: bool, count: usize);
    fn hook_ended(&mut self, which: Hook, attempt: u64, failure: HookFailure);
    fn error(&mut self, message: &str);
    fn wait(&mut self, attempt: u64, wait: Wait);
    fn received(&mut self, signal: Signal, attempt: u64, during: During);
    fn gave_up(
        &mut self,
        tries: u64,
        elapsed: Duration,
        why: &GiveUp,
        status: ExitStatus,
        last: Option<Outcome>,
        signal: Option<Signal>,
    );
    fn succeeded(&mut self, attempt: u64, elapsed: Duration, waited: Duration);
    fn request_ignored(&mut self, attempt: u64, ignored: &Ignored);
}

impl Emit for Log {
    fn try_ended(&mut self, r: &TryReport) {
        self.emit(Event::TryEnded(r.clone()));
    }
    fn leftovers(&mut self, attempt: u64, signal: Signal, killed: bool, count: usize) {
        self.emit(Event::Leftovers {
            attempt,
            hook: None,
            signal,
            killed,
            count,
        });
    }
    fn hook_ended(&mut self, which: Hook, attempt: u64, failure: HookFailure) {
        self.emit(Event::HookFailed {
            which,
            attempt,
            failure,
        });
    }
    fn error(&mut self, message: &str) {
        self.emit(Event::Error(Failure::Internal(message.into())));
    }
    fn wait(&mut self, attempt: u64, wait: Wait) {
        self.emit(Event::Wait { attempt, wait });
    }
    fn received(&mut self, signal: Signal, attempt: u64, during: During) {
        self.emit(Event::Received {
            signal,
            attempt,
            during,
        });
    }
    fn gave_up(
        &mut self,
        tries: u64,
        elapsed: Duration,
        why: &GiveUp,
        status: ExitStatus,
        last: Option<Outcome>,
        signal: Option<Signal>,
    ) {
        self.emit(Event::GaveUp {
            tries,
            elapsed,
            why: why.clone(),
            status,
            last,
            signal,
            streak: 0,
        });
    }
    fn succeeded(&mut self, attempt: u64, elapsed: Duration, waited: Duration) {
        self.emit(Event::Succeeded {
            attempt,
            elapsed,
            waited,
            status: crate::exit::ExitStatus::Success,
            // These runs fail every try before the one that succeeds.
            flaky: attempt > 1,
            failed: attempt - 1,
        });
    }
    fn request_ignored(&mut self, attempt: u64, ignored: &Ignored) {
        self.emit(Event::RequestIgnored {
            attempt,
            ignored: ignored.clone(),
        });
    }
}

const FAILED: Verdict = Verdict::Transient(Reason::Default);

fn report(decision: &Decision) -> TryReport {
    TryReport {
        attempt: 1,
        outcome: Outcome::Exit(1),
        took: Duration::from_millis(5),
        verdict: FAILED,
        decision: decision.clone(),
        detail: None,
        killed: false,
        stopped_by_limit: false,
        signalled_after: None,
        in_a_row: 0,
    }
}

const TIMED_OUT: Verdict = Verdict::Transient(Reason::Default);

/// The human and JSON lines of a timed-out try 1 that the run retries, or gives up after.
fn stopped_try(args: &[&str], killed: bool, by_limit: bool, last: bool) -> (String, String) {
    let wait = Wait {
        base: Duration::from_secs(1),
        delay: Duration::from_secs(1),
        requested: None,
        clock: None,
    };
    let decision = if last {
        Decision::GiveUp(GiveUp::Tries)
    } else {
        Decision::Retry(wait)
    };
    let report = TryReport {
        attempt: 1,
        outcome: Outcome::Timeout,
        took: Duration::from_millis(2003),
        verdict: TIMED_OUT,
        decision,
        detail: None,
        killed,
        stopped_by_limit: by_limit,
        signalled_after: Some(Duration::from_millis(2001)),
        in_a_row: 0,
    };
    let (mut log, human) = log_for(args);
    log.try_ended(&report);
    let json_args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--log-format", "json"])
        .collect();
    let (mut log, json) = log_for(&json_args);
    log.try_ended(&report);
    (human.text(), json.text())
}

#[test]
fn a_timed_out_try_says_whether_it_needed_sigkill() {
    let (human, json) = stopped_try(&["-n3", "-t2s", "-k1s"], true, false, false);
    assert_eq!(
        human,
        "retry: try 1/3 timed out after 2.001s, sent SIGTERM, then SIGKILL after the 1s grace period (transient); next try in 1s\n"
    );
    assert!(
        json.contains(r#""outcome":{"timeout":true},"signal":"TERM","killed":true,"#),
        "{json}"
    );
    assert!(!json.contains("limit"), "{json}");
    let (human, json) = stopped_try(&["-n3", "-t2s", "-k1s"], false, false, false);
    assert!(
        human.contains("try 1/3 timed out after 2.001s, sent SIGTERM (transient)"),
        "{human}"
    );
    assert!(json.contains(r#""killed":false"#), "{json}");
}

#[test]
fn a_timed_out_try_names_the_signals_it_was_sent() {
    let (human, json) = stopped_try(&["-n1", "-t2s", "-s", "INT"], false, false, false);
    assert!(
        human.contains("timed out after 2.001s, sent SIGINT (transient)"),
        "{human}"
    );
    assert!(json.contains(r#""signal":"INT","killed":false"#), "{json}");
    let (human, _) = stopped_try(&["-n1", "-t2s", "-s", "KILL"], true, false, false);
    assert!(
        human.contains("timed out after 2.001s, sent SIGKILL (transient)"),
        "{human}"
    );
    let (human, _) = stopped_try(&["-n1", "-t2s", "-k", "0"], true, false, false);
    assert!(
        human.contains("timed out after 2.001s, sent SIGTERM, then SIGKILL at once"),
        "{human}"
    );
}

#[test]
fn a_try_stopped_by_the_budget_or_the_deadline_says_so() {
    let (human, json) = stopped_try(&["-n1", "-B2s"], false, true, true);
    assert_eq!(
        human,
        "retry: try 1/1 stopped at the end of the budget after 2.001s, sent SIGTERM (transient); giving up: no tries left\n"
    );
    assert!(
        json.contains(r#""killed":false,"limit":"budget""#),
        "{json}"
    );
    let deadline = ["-n1", "--deadline", "1970-01-01T00:00:02Z", "-k", "500ms"];
    let (human, json) = stopped_try(&deadline, true, true, true);
    assert!(
        human.contains("try 1/1 stopped at the deadline after 2.001s, sent SIGTERM, then SIGKILL after the 500ms grace period (transient)"),
        "{human}"
    );
    assert!(
        json.contains(r#""killed":true,"limit":"deadline""#),
        "{json}"
    );
}

#[test]
fn leftovers_are_counted() {
    let (mut log, sink) = log_for(&["-n3"]);
    log.leftovers(2, Signal::TERM, false, 2);
    log.leftovers(2, Signal::TERM, true, 1);
    log.leftovers(2, Signal::TERM, false, 0);
    assert_eq!(
        sink.text(),
        "retry: try 2/3 left 2 processes running; stopped them (SIGTERM)\n\
         retry: try 2/3 left 1 process running; stopped it (SIGTERM, then SIGKILL)\n\
         retry: try 2/3 left processes running in its group; stopped them (SIGTERM)\n"
    );
    let (mut log, sink) = log_for(&["--log-format", "json"]);
    log.leftovers(2, Signal::TERM, true, 3);
    log.leftovers(2, Signal::TERM, false, 0);
    let text = sink.text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with(r#""attempt":2,"signal":"TERM","killed":true,"count":3}"#),
        "{text}"
    );
    assert!(lines[1].ends_with(r#""killed":false}"#), "{text}");
}

#[test]
fn a_failed_hook_says_how_it_failed() {
    let (mut log, sink) = log_for(&["-n3"]);
    let refused = std::io::Error::from_raw_os_error(nix::libc::EACCES);
    log.hook_ended(
        Hook::OnRetry,
        1,
        HookFailure::NotStarted(refused.to_string()),
    );
    log.hook_ended(Hook::OnRetry, 1, HookFailure::Ended(Outcome::Exit(3)));
    log.hook_ended(
        Hook::OnRetry,
        2,
        HookFailure::Ended(Outcome::Signal(Signal::KILL)),
    );
    log.hook_ended(
        Hook::OnGiveUp,
        3,
        HookFailure::TimedOut(Duration::from_secs(2)),
    );
    assert_eq!(
        sink.text(),
        format!(
            "retry: --on-retry hook could not start: {refused}; going on\n\
             retry: --on-retry hook exited 3; going on\n\
             retry: --on-retry hook was killed by SIGKILL; going on\n\
             retry: --on-give-up hook timed out after 2s; stopped it; going on\n"
        )
    );
}

#[test]
fn a_command_that_could_not_start_is_named_with_the_reason() {
    let error = |errno| std::io::Error::from_raw_os_error(errno);
    let name = OsStr::new("my cmd");
    assert_eq!(
        not_started(
            &NotStarted::new(name, &error(nix::libc::ENOENT)),
            Outcome::NotFound,
            Charset::Utf8
        ),
        "'my cmd' was not found (the command and its arguments are one word: give them apart, or \
         run them in a shell, as sh -c 'my cmd')"
    );
    assert_eq!(
        not_started(
            &NotStarted::new(name, &error(nix::libc::EACCES)),
            Outcome::NotExecutable,
            Charset::Utf8
        ),
        "'my cmd' cannot be executed: Permission denied"
    );
    assert_eq!(
        not_started(
            &NotStarted::new(name, &error(nix::libc::EAGAIN)),
            Outcome::NoResources,
            Charset::Utf8
        ),
        format!(
            "'my cmd' could not be started: out of resources (EAGAIN: {})",
            nix::errno::Errno::EAGAIN.desc()
        )
    );
}

#[test]
fn an_internal_failure_has_its_own_event_even_under_quiet() {
    let (mut log, sink) = log_for(&["--log-format", "json", "-q"]);
    log.error("cannot read the\ninput");
    let event: serde_json::Value = serde_json::from_str(&sink.text()).unwrap();
    assert_eq!(event["event"], "error");
    assert_eq!(event["run_id"], "id");
    assert_eq!(event["message"], "cannot read the\ninput");
    let (mut log, sink) = log_for(&["-q"]);
    log.error("cannot read the\ninput");
    assert_eq!(sink.text(), "retry: error: cannot read the\\ninput\n");
}

#[test]
fn quiet_and_verbose_never_remove_a_json_event() {
    for flag in ["-q", "-v", "-n3"] {
        let (mut log, sink) = log_for(&["--log-format", "json", flag]);
        let wait = Wait {
            base: Duration::from_secs(1),
            delay: Duration::from_secs(1),
            requested: None,
            clock: None,
        };
        let retry = Decision::Retry(wait);
        let give_up = Decision::GiveUp(GiveUp::Tries);
        let elapsed = Duration::from_secs(1);
        log.try_ended(&report(&retry));
        log.wait(1, wait);
        log.leftovers(1, Signal::TERM, false, 1);
        log.hook_ended(Hook::OnRetry, 1, HookFailure::Ended(Outcome::Exit(3)));
        log.warn(Warning::Stdio("careful".into()));
        log.received(Signal::INT, 2, During::Try);
        log.try_ended(&report(&give_up));
        let status = ExitStatus::from_last_try(Outcome::Exit(1));
        log.gave_up(2, elapsed, &GiveUp::Tries, status, None, None);
        log.succeeded(3, elapsed, elapsed);
        log.error("broken");
        let events: Vec<String> = sink
            .text()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].to_string())
            .collect();
        assert_eq!(
            events,
            [
                "\"try\"",
                "\"wait\"",
                "\"leftovers\"",
                "\"hook\"",
                "\"warning\"",
                "\"signal\"",
                "\"try\"",
                "\"give_up\"",
                "\"success\"",
                "\"error\""
            ],
            "{flag}"
        );
    }
}

#[test]
fn a_wait_the_output_asked_for_is_named_in_the_log_and_the_json() {
    let s = Duration::from_secs;
    let asked = Decision::Retry(Wait {
        base: s(2),
        delay: s(30),
        requested: Some(s(30)),
        clock: None,
    });
    let longer = Decision::Retry(Wait {
        base: s(2),
        delay: s(2),
        requested: Some(Duration::from_millis(500)),
        clock: None,
    });
    let (mut log, sink) = log_for(&[]);
    log.try_ended(&report(&asked));
    log.try_ended(&report(&longer));
    assert_eq!(
        sink.text(),
        "retry: try 1/3 exited 1 after 5ms (transient); next try in 30s (asked for by the output)\n\
         retry: try 1/3 exited 1 after 5ms (transient); next try in 2s (the output asked for 500ms)\n"
    );
    let (mut log, sink) = log_for(&["--log-format", "json"]);
    let Decision::Retry(wait) = asked else {
        unreachable!()
    };
    log.wait(1, wait);
    let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
    assert_eq!(event["base_ms"], 2000);
    assert_eq!(event["delay_ms"], 30000);
    assert_eq!(event["requested_ms"], 30000);
    // A wait the output did not ask for has no `requested_ms` at all.
    let (mut log, sink) = log_for(&["--log-format", "json"]);
    log.wait(
        1,
        Wait {
            base: Duration::from_secs(2),
            delay: Duration::from_secs(1),
            requested: None,
            clock: None,
        },
    );
    let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
    assert!(event.get("requested_ms").is_none(), "{event}");
}

#[test]
fn a_wait_until_an_http_date_names_the_clock_that_measured_it() {
    let s = Duration::from_secs;
    let wait = |delay, requested, clock| Wait {
        base: s(1),
        delay,
        requested: Some(requested),
        clock: Some(clock),
    };
    // `Stamper` is the log's own, which stamps events; this is what a wait was measured on.
    use crate::policy::httpdate::TimeSource as By;
    let by_server = wait(s(3), s(3), By::Server);
    let shorter = wait(s(5), s(3), By::Local);
    let passed = wait(s(1), Duration::ZERO, By::Local);
    let (mut log, sink) = log_for(&[]);
    for w in [by_server, shorter, passed] {
        log.try_ended(&report(&Decision::Retry(w)));
    }
    assert_eq!(
        sink.text(),
        "retry: try 1/3 exited 1 after 5ms (transient); next try in 3s (asked for by the output: until its HTTP-date, by the server's Date: line)\n\
         retry: try 1/3 exited 1 after 5ms (transient); next try in 5s (the output asked for 3s: until its HTTP-date, by the local clock)\n\
         retry: try 1/3 exited 1 after 5ms (transient); next try in 1s (the output's HTTP-date has passed, by the local clock)\n"
    );
    for (w, word) in [(by_server, "server"), (passed, "local")] {
        let (mut log, sink) = log_for(&["--log-format", "json"]);
        log.wait(1, w);
        let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
        assert_eq!(event["clock"], word, "{event}");
        let asked = crate::duration::millis(w.requested.unwrap());
        assert_eq!(event["requested_ms"], asked, "{event}");
    }
}

#[test]
fn a_request_that_does_not_fit_is_the_reason_for_giving_up() {
    let limit = crate::policy::Limit::earliest(Some(Duration::from_millis(1500)), None);
    let mut exceeded = crate::policy::budget::check_retry(
        limit,
        Duration::from_millis(1050),
        Duration::from_secs(1),
        None,
    )
    .unwrap_err();
    exceeded.requested = true;
    let why = GiveUp::Budget(exceeded);
    let decision = Decision::GiveUp(why.clone());
    let (mut log, sink) = log_for(&[]);
    log.try_ended(&report(&decision));
    assert_eq!(
        sink.text(),
        "retry: try 1/3 exited 1 after 5ms (transient); giving up: the output asked for 1s (--delay-from-output), more than the 450ms the budget leaves (budget: 1.05s used + 1s wait ≥ 1.5s)\n"
    );
    let (mut log, sink) = log_for(&["--log-format", "json"]);
    let status = ExitStatus::from_last_try(Outcome::Exit(1));
    log.gave_up(
        1,
        Duration::from_millis(1050),
        &why,
        status,
        Some(Outcome::Exit(1)),
        None,
    );
    // The give_up line is written when the run's end is known.
    drop(log);
    let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
    assert_eq!(event["reason"], "budget");
    assert_eq!(event["requested_ms"], 1000);
    assert!(
        event["detail"]
            .as_str()
            .unwrap()
            .contains("--delay-from-output")
    );
}

#[test]
fn a_match_that_asks_for_no_wait_is_told_with_verbose_and_in_json() {
    let ignored = Ignored {
        group: Some("soon".into()),
        why: "not a number of seconds or a duration".into(),
    };
    let (mut log, sink) = log_for(&[]);
    log.request_ignored(1, &ignored);
    assert_eq!(sink.text(), "");
    let (mut log, sink) = log_for(&["-v"]);
    log.request_ignored(1, &ignored);
    assert!(
        sink.text().ends_with(
            "try 1/3: output matched --delay-from-output, but its capture group held 'soon', not a number of seconds or a duration; ignored\n"
        ),
        "{}",
        sink.text()
    );
    let (mut log, sink) = log_for(&["--log-format", "json", "-q"]);
    log.request_ignored(2, &ignored);
    let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
    assert_eq!(event["event"], "request_ignored");
    assert_eq!(event["attempt"], 2);
    assert_eq!(event["group"], "soon");
}
