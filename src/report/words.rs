//! What `retry` says of the values its events carry: why a command could not start, how a
//! hook failed, a failure of `retry` itself, and each warning. The human log writes them
//! after `error: ` and `warning: `, and the JSON log as its `message`.

use crate::duration::hms;
use crate::exit::ExitStatus;
use crate::policy::lock::{DoneBefore, LockHolder};
use crate::policy::throttle::{Admission, Figures};
use crate::policy::{Form, GiveUp, Outcome, Signal};
use crate::report::event::{
    EnvFileNote, EnvLineProblem, Failure, HookFailure, NotStarted, Warning,
};
use crate::report::printable;
use crate::report::replay::{OptionsProblem, ReplayRefusal};
use crate::text::{self, Charset};

/// Why the command could not be started, for the try line and the `error` field of its JSON
/// event: `'cmd' was not found`, `cmd cannot be executed: Permission denied`.
pub fn not_started(why: &NotStarted, outcome: Outcome, charset: Charset) -> String {
    let name = text::quote(&why.program, charset);
    let errno = why.errno.map(nix::errno::Errno::from_raw);
    let reason = match errno {
        Some(errno) => errno.desc().to_string(),
        None => why.error.clone(),
    };
    match (outcome, errno) {
        (Outcome::NotFound, _) => format!("{name} was not found{}", shell_hint(&why.program)),
        (Outcome::NoResources, Some(errno)) => {
            format!("{name} could not be started: out of resources ({errno:?}: {reason})")
        }
        (Outcome::NoResources, None) => format!("{name} could not be started: out of resources"),
        _ => format!("{name} cannot be executed: {reason}"),
    }
}

/// The words of a shell that no program on the PATH stands for: run alone, they are not found.
const SHELL_BUILTINS: &[&str] = &[
    ".", "alias", "cd", "eval", "exec", "export", "pushd", "popd", "set", "source", "ulimit",
    "umask", "unset",
];

/// For a command that was not found because it is meant for a shell: a whole command line given
/// as one word (`retry -- 'ls -l'`), or a shell's builtin (`retry -- cd /`), a hint toward
/// `sh -c`; nothing for any other name.
fn shell_hint(program: &std::ffi::OsStr) -> String {
    let Some(word) = program.to_str() else {
        return String::new();
    };
    if SHELL_BUILTINS.contains(&word) {
        return format!(
            " ({word} is a word of the shell, not a program: run it in one, as sh -c '{word} …')"
        );
    }
    if word.contains(' ') && !word.contains('/') {
        let shown = printable(word).replace('\'', "'\\''");
        return format!(
            " (the command and its arguments are one word: give them apart, or run them in a shell, as sh -c '{shown}')"
        );
    }
    String::new()
}

/// Why a dead-letter file cannot be replayed, on one line: `--replay 'f': another replay of
/// this file is running`, `'f' line 3: its options ask for --dry-run, which a replay cannot
/// run`.
pub fn replay_refusal(refusal: &ReplayRefusal) -> String {
    let shown = |file: &std::path::Path| printable(&file.display().to_string());
    match refusal {
        ReplayRefusal::Busy { file } => {
            format!(
                "--replay '{}': another replay of this file is running",
                shown(file)
            )
        }
        ReplayRefusal::Untrusted { file, why } => format!("--replay '{}': {why}", shown(file)),
        ReplayRefusal::Unopened { file, append, why } => {
            let what = if *append { "append to" } else { "open" };
            format!("--replay '{}': cannot {what} it: {why}", shown(file))
        }
        ReplayRefusal::Unread { file, why } => format!("cannot read '{}': {why}", file.display()),
        ReplayRefusal::Damaged { file, line, why } => {
            format!("'{}' line {line}: {why}", file.display())
        }
        ReplayRefusal::Unpicked { file, why } => {
            format!("--only: {}, in '{}'", printable(why), shown(file))
        }
        ReplayRefusal::Options {
            file,
            line,
            problem,
        } => {
            let why = match problem {
                OptionsProblem::Unmerged(why) => why.clone(),
                OptionsProblem::DryRun => {
                    "its options ask for --dry-run, which a replay cannot run".into()
                }
                OptionsProblem::OtherMode => {
                    "its options ask for --simulate or --replay, which a replay cannot run".into()
                }
                OptionsProblem::Usage(e) => format!("its options with those given now: {e}"),
                OptionsProblem::Info => "its options ask for --help or --version".into(),
            };
            format!("'{}' line {line}: {why}", file.display())
        }
    }
}

/// How a hook failed: `could not start: ...`, `exited 3`, `was killed by SIGSEGV`, `timed out
/// after 2s; stopped it`.
pub fn hook_failure(failure: &HookFailure) -> String {
    match failure {
        HookFailure::NotStarted(error) => format!("could not start: {error}"),
        HookFailure::Ended(o @ (Outcome::Exit(_) | Outcome::Signal(_))) => o.words(Form::Line),
        HookFailure::Ended(other) => other.words(Form::Reason),
        HookFailure::TimedOut(took) => format!("timed out after {}; stopped it", hms(*took)),
    }
}

/// A failure in words.
pub fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Internal(text) | Failure::Output(text) => text.clone(),
        Failure::SignalHandlers(why) => format!("cannot install signal handlers: {why}"),
        Failure::LogFile { path, why } => {
            format!("cannot open --log-file '{}': {why}", path.display())
        }
        Failure::DeadLetter { path, why } => {
            format!("cannot open --dead-letter '{}': {why}", path.display())
        }
        Failure::History { path, why } => {
            format!("cannot open --history '{}': {why}", path.display())
        }
        Failure::Junit { path, why } => {
            format!("cannot write --junit '{}': {why}", path.display())
        }
        Failure::ReplayNotRecorded { path, why } => {
            format!(
                "cannot append to '{}': {why}; the replay stops",
                path.display()
            )
        }
    }
}

/// A warning about a file written besides the log, in words.
fn file_warning_text(w: &Warning) -> String {
    match w {
        Warning::DeadLetterNotWritten { path, why } => format!(
            "cannot record this run in --dead-letter '{}': {why}",
            path.display()
        ),
        Warning::DeadLetterKeptNotMoved { path, why } => {
            format!("--dead-letter '{}': {why}", path.display())
        }
        Warning::DeadLetterKeptLocally { path, file, why } => format!(
            "--dead-letter '{}': {why}; the run is kept in '{}' until a run or replay of this store reaches Redis",
            path.display(),
            file.display()
        ),
        Warning::NotMarkedDone { key, why } => format!(
            "--once {}: the run succeeded but the key could not be marked done: {why}; the next run will run the command again",
            printable(key)
        ),
        Warning::ClaimLapsed { id, owner } => format!(
            "run {id} was held by the replay {owner}, whose claim lapsed without being let go: that replay died, or was stopped or cut off from Redis, and a try it started may still run"
        ),
        Warning::ReplaySkipped { id, why } => {
            format!("run {id} is not replayed now: {why}; it stays pending")
        }
        Warning::ReplayForgotten { id } => format!(
            "run {id} was forgotten while this replay ran it (its claim had lapsed): the forget stands, and what this replay did is not recorded"
        ),
        Warning::ClaimLost { why, signal } => format!(
            "the claim on this run is lost ({why}): another replay may run it now, so this one stops it as on {signal}, and records nothing of it"
        ),
        Warning::HistoryTooLarge { path, bytes } => format!(
            "--history '{}' holds {bytes} bytes, more than the {} GiB that --stats reads: \
             rename it away and start a new one",
            path.display(),
            crate::store::deadletter::MAX_FILE >> 30
        ),
        Warning::HistoryNotWritten { path, why } => format!(
            "cannot record this run in --history '{}': {why}",
            path.display()
        ),
        Warning::MetricsNotWritten { path, why } => format!(
            "cannot write this run's metrics to --metrics '{}': {why}",
            path.display()
        ),
        Warning::LineCutShort { path, line } => format!(
            "'{}' line {line} is cut short (a write that did not finish): it holds no whole run, \
             and is skipped",
            path.display()
        ),
        Warning::OutputsNotWritten { path, why } => format!(
            "cannot append the step outputs to '{}': {why}",
            path.display()
        ),
        Warning::SummaryNotWritten { path, why } => format!(
            "cannot append the tries to the job summary '{}': {why}",
            path.display()
        ),
        Warning::JunitNotWritten { path, why } => format!(
            "cannot write the --junit report '{}': {why}",
            path.display()
        ),
        other => warning_text(other),
    }
}

/// A warning in words.
pub fn warning_text(w: &Warning) -> String {
    match w {
        Warning::DelayWithoutUnit { value } => format!(
            "-d {value} is the base wait of {value} seconds that the backoff grows and the jitter draws from (Debian's retry waits -d seconds every time: --backoff constant --jitter none for that); -d {value}s says the same without this warning"
        ),
        Warning::TimeoutWithoutUnit { value } => {
            // Debian's -t counts tries, a whole number.
            let tries = if value.bytes().all(|b| b.is_ascii_digit()) {
                format!(" (Debian's retry reads -t as tries: here they are -n {value})")
            } else {
                String::new()
            };
            format!(
                "-t {value} is a timeout of {value} seconds for each try{tries}; -t {value}s says the same without this warning"
            )
        }
        Warning::Nested {
            outer_id,
            outer,
            inner,
        } => {
            let total = match (outer, inner) {
                (0, _) | (_, 0) => "without limit".to_string(),
                (o, i) => format!("up to {o} × {i} = {} times", o.saturating_mul(*i)),
            };
            format!(
                "running inside another retry (run {outer_id}): the tries multiply, and the \
                 command may run {total}; nested retries are a classic cause of retry storms"
            )
        }
        Warning::SlowReader => "the reader of the output is too slow: what the try wrote last \
                                was not all passed on"
            .into(),
        Warning::ReaderGone => {
            "the reader of standard output is gone before all of it was written".into()
        }
        Warning::Survivors { pid, settle } => {
            format!("processes of pid {pid} still exist {settle:?} after SIGKILL")
        }
        Warning::Stdio(text) => text.clone(),
        w @ (Warning::TracesNotSent { .. }
        | Warning::TracesSetting { .. }
        | Warning::NotReported { .. }) => outside_warning_text(w),
        Warning::Flaky {
            attempt,
            of,
            failed,
        } => {
            let failed = plural(*failed, "failed try", "failed tries");
            let label = match of {
                Some(n) => format!("{attempt}/{n}"),
                None => attempt.to_string(),
            };
            format!("flaky: try {label} succeeded after {failed} (--flaky warn)")
        }
        w @ (Warning::QuotaNote(_)
        | Warning::QuotaBusy { .. }
        | Warning::CountBusy { .. }
        | Warning::ThrottleWindow { .. }
        | Warning::QuotaUnreachable { .. }
        | Warning::QuotaRefused { .. }
        | Warning::QuotaUnusable { .. }
        | Warning::PasswordInUrl { .. }) => quota_warning_text(w),
        w @ (Warning::DeadLetterNotWritten { .. }
        | Warning::DeadLetterKeptLocally { .. }
        | Warning::ClaimLost { .. }
        | Warning::ReplaySkipped { .. }
        | Warning::ReplayForgotten { .. }
        | Warning::ClaimLapsed { .. }
        | Warning::NotMarkedDone { .. }
        | Warning::DeadLetterKeptNotMoved { .. }
        | Warning::HistoryTooLarge { .. }
        | Warning::HistoryNotWritten { .. }
        | Warning::MetricsNotWritten { .. }
        | Warning::LineCutShort { .. }
        | Warning::OutputsNotWritten { .. }
        | Warning::SummaryNotWritten { .. }
        | Warning::JunitNotWritten { .. }) => file_warning_text(w),
        Warning::EnvFile(note) => env_file_text(note),
    }
}

/// A warning about what the world outside is told (`--pushgateway`, `--ping`, traces).
fn outside_warning_text(w: &Warning) -> String {
    match w {
        Warning::TracesNotSent { to, why } => {
            format!("the run's spans were not sent to {to}: {why}")
        }
        Warning::TracesSetting { variable, why } => format!("{variable}: {why}"),
        Warning::NotReported {
            option,
            what,
            url,
            why,
        } => format!("cannot send {what} to {option} '{url}': {why}"),
        other => warning_text(other),
    }
}

/// What `RETRY_ENV_FILE` came to, in words: the line and the name, never the value.
fn env_file_text(note: &EnvFileNote) -> String {
    match note {
        EnvFileNote::Line { line, name, why } => {
            let why = match why {
                EnvLineProblem::NotAssignment => {
                    "it is not NAME=VALUE (nor NAME<<DELIMITER)".to_string()
                }
                EnvLineProblem::BadName => "what comes before its = (or <<) is not a variable \
                                            name: letters, digits and _, not starting with a digit"
                    .to_string(),
                EnvLineProblem::Reserved => "the RETRY_ variables are retry's own".to_string(),
                EnvLineProblem::NotText => {
                    "its value holds a NUL byte or bytes that are not UTF-8".to_string()
                }
                EnvLineProblem::Unended => "no line DELIMITER ends its value".to_string(),
                EnvLineProblem::TooMany { max } => {
                    format!("the hooks have already set {max} variables, as many as a run keeps")
                }
            };
            match name {
                Some(name) => format!("RETRY_ENV_FILE line {line}: {name} is not set: {why}"),
                None => format!("RETRY_ENV_FILE line {line} is ignored: {why}"),
            }
        }
        EnvFileNote::TooLarge {
            read,
            max_bytes,
            max_lines,
        } => {
            let rest = match read {
                0 => "no line ends within them, and it sets nothing".to_string(),
                n => format!("what follows line {n} sets nothing"),
            };
            format!(
                "RETRY_ENV_FILE holds more than the {} KiB or {max_lines} lines that are read: \
                 {rest}",
                max_bytes / 1024
            )
        }
        EnvFileNote::NotMade(why) => {
            format!("cannot make RETRY_ENV_FILE for --on-retry ({why}): the hook runs without it")
        }
        EnvFileNote::NotRead(why) => {
            format!("cannot read RETRY_ENV_FILE after --on-retry ({why}): it sets nothing")
        }
    }
}

/// A warning about the retry quota, in words.
fn quota_warning_text(w: &Warning) -> String {
    match w {
        Warning::QuotaNote(note) => note.to_string(),
        Warning::ThrottleWindow { quota, own, asked } => format!(
            "the throttle of quota {quota} counts over its own window of {}, not the {} of --throttle: the window belongs to the quota, and this run decides on its figures as they are",
            hms(*own),
            hms(*asked)
        ),
        Warning::QuotaBusy { quota, why } => {
            format!("the retry quota {quota} is busy ({why}); this first try adds nothing to it")
        }
        Warning::CountBusy { quota, why } => format!(
            "the retry quota {quota} is busy ({why}); its throttle does not count how this run's last try ended"
        ),
        Warning::QuotaUnreachable {
            quota,
            why,
            from_now_on,
        } => format!(
            "the retry quota {quota} cannot be reached ({why}); the quota is kept on this \
             machine{}",
            if *from_now_on { " from now on" } else { "" }
        ),
        Warning::QuotaUnusable { quota, why } => {
            format!(
                "the retry quota {quota} cannot be used ({why}); only this run's own limits apply"
            )
        }
        Warning::QuotaRefused { quota, code } => format!(
            "the Redis server of the retry quota {quota} {}: a misconfiguration, not an outage; \
             the quota is not shared with the other runs: this run keeps it on this machine",
            refusal_words(code)
        ),
        Warning::PasswordInUrl { option, variable } => format!(
            "the Redis password in {option} can be read by every user of this machine (with \
             `ps`) while the run lasts; give it in {variable} instead"
        ),
        other => warning_text(other),
    }
}

/// What a Redis server that refused the password or the user did, with its code word.
pub fn refusal_words(code: &str) -> String {
    crate::store::redis::refusal_words(code)
}

pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The throttle's figures as the log gives them: `0 of 68 tries of quota db (10 ran, 58 held
/// back) were accepted in the last 2m (p=0.95)`: the tries counted are those that ran and those
/// held back. The window's figures are estimates, shown to the nearest try.
pub fn throttle_figures(quota: &str, admission: &Admission) -> String {
    let Figures {
        requests,
        accepts,
        held,
    } = admission.figures;
    let requests = requests.round();
    let held = held.round().min(requests);
    let tries = if requests == 1.0 { "try" } else { "tries" };
    let were = if requests == 1.0 { "was" } else { "were" };
    format!(
        "{} of {requests} {tries} of quota {quota} ({} ran, {held} held back) {were} accepted in \
         the last {} (p={})",
        accepts.round(),
        requests - held,
        hms(admission.window),
        crate::policy::throttle::shown_p(admission.p)
    )
}

/// Why a run gave up, in the words every record uses (`giving up: ...`, the annotation, the
/// `--junit` failure): `interrupted by SIGTERM` when a signal ended it.
pub fn give_up_reason(why: &GiveUp, signal: Option<Signal>) -> String {
    match (signal, why) {
        (Some(s), _) => format!("interrupted by {s}"),
        (None, GiveUp::Permanent) => "the failure is permanent".into(),
        (None, GiveUp::Tries) => "no tries left".into(),
        (None, GiveUp::Budget(exceeded)) => exceeded.to_string(),
        (None, GiveUp::Interrupted) => "interrupted".into(),
        (None, GiveUp::Input) => "standard input could not be kept for another try".into(),
        (None, GiveUp::Quota(refusal)) => refusal.to_string(),
        (None, GiveUp::Held) => "the last try was held back by --throttle".into(),
        (None, GiveUp::Consecutive) => "too few successful tries in a row for --consecutive".into(),
        (None, GiveUp::Locked(holder)) => lock_taken(holder),
        (None, GiveUp::LockLost(why) | GiveUp::LockUnreachable(why)) => printable(why),
    }
}

/// Who holds the lock of `--lock` that turned a run away, as far as its file says: `the lock
/// 'job' is taken by pid 4242 on web1 (run 0f3a…, since 2026-01-15T08:05:00.123Z)`.
pub fn lock_taken(holder: &LockHolder) -> String {
    let mut text = format!("the lock '{}' is taken", printable(&holder.name));
    match (holder.pid, holder.host.is_empty()) {
        (Some(pid), false) => text += &format!(" by pid {pid} on {}", printable(&holder.host)),
        (Some(pid), true) => text += &format!(" by pid {pid}"),
        (None, _) => text += " by another run",
    }
    let mut about = Vec::new();
    if !holder.run_id.is_empty() {
        about.push(format!("run {}", printable(&holder.run_id)));
    }
    if !holder.since.is_empty() {
        about.push(format!("since {}", printable(&holder.since)));
    }
    if !about.is_empty() {
        text += &format!(" ({})", about.join(", "));
    }
    text
}

/// Why a run of `--once`'s `key` is a usage error: the key is bound to another command line.
/// Not yet made printable: the line that carries it is.
pub fn once_bound_elsewhere(key: &str) -> String {
    format!(
        "--once {key}: the key is bound to another command line, which holds it or ran with it \
         within --once-for; give this command a key of its own"
    )
}

/// Why a run of `--once`'s `key` did not run the command: `'nightly' was done at
/// 2026-01-01T00:00:00.000Z on web-1 by run 01J… (pid 42); the command does not run again`.
pub fn done_before(key: &str, done: &DoneBefore) -> String {
    let at = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(done.at_ms);
    let by = &done.by;
    let mut text = format!(
        "'{}' was done at {}",
        printable(key),
        humantime::format_rfc3339_millis(at)
    );
    if !by.host.is_empty() {
        text += &format!(" on {}", printable(&by.host));
    }
    if !by.run_id.is_empty() {
        text += &format!(" by run {}", printable(&by.run_id));
    }
    if let Some(pid) = by.pid {
        text += &format!(" (pid {pid})");
    }
    text + "; the command does not run again"
}

/// What the last line of a run that gave up says it gave up on, after `gave up after N tries in
/// T: `: the last try's status (`exit 4`), or why there is none to say (`interrupted by
/// SIGTERM`, `every try was held back by --throttle`).
pub fn gave_up_cause(
    signal: Option<Signal>,
    last: Option<Outcome>,
    why: &GiveUp,
    streak: u64,
    consecutive: Option<u64>,
) -> String {
    match (signal, why) {
        (None, GiveUp::Locked(holder)) => return lock_taken(holder),
        (None, GiveUp::LockLost(why) | GiveUp::LockUnreachable(why)) => return printable(why),
        _ => {}
    }
    match (signal, last) {
        (Some(s), _) => format!("interrupted by {s}"),
        (None, None) if *why == GiveUp::Held => "every try was held back by --throttle".into(),
        (None, Some(outcome)) if *why == GiveUp::Held => {
            // The last try that ran, in the words of a give-up right after it: an exit 0 that
            // was not ready, or that a streak needed more of, gives 1, not 0.
            let ran = gave_up_cause(None, Some(outcome), &GiveUp::Tries, streak, consecutive);
            format!("the last try was held back by --throttle; the last that ran: {ran}")
        }
        // The last try succeeded, in a streak that something else cut short.
        (None, Some(outcome)) if streak > 0 => match (why, consecutive) {
            (GiveUp::Consecutive, _) | (_, None) => {
                format!("{outcome}, but too few successful tries in a row (--consecutive)")
            }
            (_, Some(n)) => {
                format!(
                    "{outcome}, but only {streak} of {n} successful tries in a row (--consecutive)"
                )
            }
        },
        // Otherwise only --until-output gives up after a try that exited 0.
        (None, Some(Outcome::Exit(0))) => "exit 0, but not ready (--until-output)".into(),
        (None, Some(outcome)) => outcome.to_string(),
        (None, None) => "no try ran".into(),
    }
}

/// What `--flaky fail` makes of a late success that exits with `status`: `--flaky fail: exit 1`.
pub fn flaky_fail(status: ExitStatus) -> String {
    format!("--flaky fail: exit {}", status.code())
}
