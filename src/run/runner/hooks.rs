//! The hooks `--on-retry` and `--on-give-up` (docs/log.md#hooks), called from here alone:
//! `sh -c CMD` with the environment of a try, run to its end or its bound; its failure is logged
//! and changes nothing else, and what it leaves running is stopped as a failed try's leftovers
//! are. `--on-retry` may set variables for the later tries through its `RETRY_ENV_FILE`
//! (docs/log.md#variables-for-the-next-tries). Which hook it is, when it runs and what it is
//! told besides the try's environment is `policy::Hook`'s to say.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use crate::exit::ExitStatus;
use crate::policy::{GiveUp, Hook, Outcome, Signal, Wait};
use crate::report::event::{During, EnvFileNote, Event, HookFailure, Warning};
use crate::report::log::Log;
use crate::run::child::{ChildFd, ChildStdio};
use crate::run::clock::after;
use crate::run::descriptor::pass_on_stderr;
use crate::run::dispositions::Dispositions;
use crate::run::envfile::{EnvFile, EnvVar};
use crate::run::process::{Child, SpawnError, SpawnOptions};
use crate::run::runner::env::{HookVars, RunEnv};
use crate::run::runner::run_end::End;
use crate::run::runner::state::Runner;
use crate::run::runner::stop::{Finish, Stopper};
use crate::run::runner::watch::Watch;
use crate::run::stderr::Stderr;

impl Runner<'_> {
    /// `--on-retry` after try `attempt`, which ran and failed, before the wait `wait`; `last` is
    /// how the last try that ran ended. Returns how the run ends when a stopping signal reached
    /// `retry` meanwhile.
    pub(super) fn on_retry(
        &mut self,
        attempt: u64,
        last: Option<Outcome>,
        wait: &Wait,
    ) -> Option<End> {
        let command = self.config.on_retry.as_ref()?;
        // The status giving up after this failed try would give: 1 for a try that exited 0 but
        // was not ready (--until-output).
        let exit_code = last
            .map_or(ExitStatus::Held, |o| {
                ExitStatus::of_giving_up(&GiveUp::Tries, o)
            })
            .code();
        self.call_hook(Hook::OnRetry, command, attempt, exit_code, wait.delay)
    }

    /// `--on-give-up` after try `attempt`, the run having given up with `status`. Returns how
    /// the run ends when a stopping signal reached `retry` meanwhile.
    pub(super) fn on_give_up(&mut self, attempt: u64, status: ExitStatus) -> Option<End> {
        let command = self.config.on_give_up.as_ref()?;
        self.call_hook(
            Hook::OnGiveUp,
            command,
            attempt,
            status.code(),
            Duration::ZERO,
        )
    }

    /// Runs `hook` (`command`) after try `attempt`, if that try ran and failed.
    fn call_hook(
        &mut self,
        hook: Hook,
        command: &str,
        attempt: u64,
        exit_code: i32,
        delay: Duration,
    ) -> Option<End> {
        if !self.state.last_try_failed() {
            return None;
        }
        let now = self.start.elapsed();
        let call = HookCall {
            hook,
            command,
            attempt,
            exit_code,
            delay,
            bound: hook.bound(&self.config.policy, now, self.config.kill_after),
        };
        let (watch, log) = (&mut self.watch, &mut self.log);
        let signal = call.run_hook(watch, log, &self.stopper, &mut self.env)?;
        Some(self.interrupted(attempt, signal, During::Hook(hook)))
    }
}

/// A hook to run now (docs/log.md#hooks): which one, its command, and what it is told.
struct HookCall<'a> {
    hook: Hook,
    command: &'a str,
    /// The try after which it runs.
    attempt: u64,
    /// `RETRY_EXIT_CODE`: the status `retry` would exit with after that try.
    exit_code: i32,
    /// `RETRY_DELAY_MS`: the wait before the next try.
    delay: Duration,
    /// How long it may run.
    bound: Option<Duration>,
}

/// What a hook wrote, kept in a temporary file, and how much of it has been passed on to
/// standard error.
struct HookOutput {
    file: std::fs::File,
    passed: u64,
    stderr: Stderr,
}

impl HookOutput {
    /// Under CI, where the try's output passes through `retry` so that its lines start lines
    /// of their own, and while `--output-on-failure` holds the run's output, a hook's output
    /// is kept in a temporary file and passed on when the hook ends: a hook is short, and no
    /// pipe can fill and stop it meanwhile.
    fn under_ci(log: &Log, stderr: &Stderr) -> Option<HookOutput> {
        if log.facts().ci.system.is_none() && !stderr.withholding() {
            return None;
        }
        let file = crate::run::spool::anonymous_file().ok()?;
        let stderr = stderr.clone();
        Some(HookOutput {
            file,
            passed: 0,
            stderr,
        })
    }

    /// Passes on to standard error what the hook has written since the last call, its last
    /// line ended: `retry` passes it on, so a line it leaves open would be `retry`'s (the last
    /// hook, `--on-give-up`, is followed by no line of `retry`'s that would end it).
    fn pass_on(&mut self) {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; 64 * 1024];
        let mut last = b'\n';
        while let Ok(n @ 1..) = self.file.read_at(&mut buf, self.passed) {
            if pass_on_stderr(&self.stderr, &buf[..n]).is_err() {
                return;
            }
            last = buf[n - 1];
            self.passed += n as u64;
        }
        if last != b'\n' {
            let _ = pass_on_stderr(&self.stderr, b"\n");
        }
    }
}

impl HookCall<'_> {
    /// Runs the hook (`sh -c CMD`) to its end or its bound, with the environment of a try
    /// (`env`), stopped as `stopper` stops a try; returns a stopping signal received meanwhile.
    /// Its failure is logged and changes nothing else; what its `RETRY_ENV_FILE` sets is set
    /// in `env` for what follows.
    fn run_hook(
        &self,
        watch: &mut Watch,
        log: &mut Log,
        stopper: &Stopper,
        env: &mut RunEnv,
    ) -> Option<Signal> {
        let mut output = HookOutput::under_ci(log, watch.stdio.stderr());
        let env_file = self.env_file(log);
        let dispositions = watch.signals.dispositions();
        let vars = HookVars {
            exit_code: self.exit_code,
            delay: self.delay,
            env_file: env_file.as_ref().map(EnvFile::path),
        };
        let env_vars = env.for_hook(self.attempt, &vars);
        let spawned = self.spawn_hook(&env_vars, output.as_ref(), dispositions);
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let failure = HookFailure::NotStarted(e.error.to_string());
                self.hook_failed(log, failure);
                return None;
            }
        };
        let until = self.bound.and_then(after);
        let finish = stopper.run_child(watch, log, &mut child, until, None);
        // The file goes first, whatever the hook came to: nothing may be left of it, and what
        // the hook's leftovers write to it later counts for nothing.
        let handed = env_file.map(EnvFile::take);
        let (received, failure) = match finish {
            Finish::Exited(Outcome::Exit(0)) => (None, None),
            Finish::Exited(outcome) => (None, Some(HookFailure::Ended(outcome))),
            Finish::TimedOut(stopped) => {
                let took = self.bound.unwrap_or_default();
                (stopped.received, Some(HookFailure::TimedOut(took)))
            }
            Finish::Interrupted(signal, _) => (Some(signal), None),
            // A hook's output goes straight to standard error: never through retry.
            Finish::OutputFailed(_) => (None, None),
        };
        if let Some(out) = &mut output {
            out.pass_on();
        }
        if let Some(failure) = failure {
            self.hook_failed(log, failure);
        }
        if received.is_some() {
            // No try follows: what the file has goes unread.
            return received;
        }
        if let Some(handed) = handed {
            let notes = match handed {
                Ok(text) => env.hand_on(&text),
                Err(e) => vec![EnvFileNote::NotRead(e.to_string())],
            };
            notes
                .into_iter()
                .for_each(|n| log.warn(Warning::EnvFile(n)));
        }
        // What a hook leaves running is its own (`policy::Hook`), and stopped as a failed try's
        // leftovers are (docs/log.md#hooks).
        let stopped = stopper.stop_leftovers(watch, log, &mut child, None)?;
        if let Some(out) = &mut output {
            out.pass_on();
        }
        log.emit(Event::Leftovers {
            attempt: self.attempt,
            hook: Some(self.hook),
            signal: stopper.signal,
            killed: stopped.ending.killed(),
            count: stopped.count,
        });
        stopped.received
    }

    /// A fresh `RETRY_ENV_FILE` for the hook, if it gets one; one that cannot be made is
    /// warned of, and the hook runs without it.
    fn env_file(&self, log: &mut Log) -> Option<EnvFile> {
        if !self.hook.hands_on() {
            return None;
        }
        EnvFile::create()
            .inspect_err(|e| log.warn(Warning::EnvFile(EnvFileNote::NotMade(e.to_string()))))
            .ok()
    }

    fn hook_failed(&self, log: &mut Log, failure: HookFailure) {
        log.emit(Event::HookFailed {
            which: self.hook,
            attempt: self.attempt,
            failure,
        });
    }

    /// Starts `sh -c CMD` for the hook, with its environment `env`, no input, and its output on
    /// standard error (or in `output`, passed on later): standard output belongs to the command.
    fn spawn_hook(
        &self,
        env: &[EnvVar],
        output: Option<&HookOutput>,
        dispositions: Dispositions,
    ) -> Result<Child, SpawnError> {
        let into = |fd: std::io::Result<OwnedFd>| match fd {
            Ok(fd) => ChildFd::Fd(fd),
            Err(_) => ChildFd::Null,
        };
        let (stdout, stderr) = match output {
            Some(out) => (
                into(out.file.as_fd().try_clone_to_owned()),
                into(out.file.as_fd().try_clone_to_owned()),
            ),
            None => (
                into(std::io::stderr().as_fd().try_clone_to_owned()),
                ChildFd::Inherit,
            ),
        };
        let sh_command = [
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from(self.command),
        ];
        Child::spawn(SpawnOptions {
            stdio: ChildStdio {
                stdin: ChildFd::Null,
                stdout,
                stderr,
            },
            command: &sh_command,
            env,
            foreground: false,
            terminal: None,
            dispositions,
        })
    }
}
