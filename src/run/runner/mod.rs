//! The loop of a real run: ask the schedule what to do, run the try, wait for the first of (the
//! try ends, its time is up, a signal arrives), report, obey.

mod around;
mod dead_letter;
mod env;
mod held;
mod hooks;
mod job_control;
mod launch;
mod lease;
mod lock;
mod once;
mod quota;
mod run_end;
mod state;
mod stop;
mod try_end;
mod watch;

use std::ops::ControlFlow;
use std::time::Duration;

use crate::exit::ExitStatus;
use crate::outcome::RunVerdict;
use crate::policy::quota::QuotaRefusal;
use crate::policy::step::TryResult;
use crate::policy::throttle::Admission;
use crate::policy::{Decision, Flaky, GiveUp, Outcome, OutputMatch, Signal, Verdict};
use crate::report::event::{During, Event, Failure, NotStarted, Warning};
use crate::run::clock::{Moment, after};
use crate::run::process::Child;
use crate::run::random::LazyRng;
use crate::run::stdio::TryIo;
pub use around::{OuterRun, RunEnd, Surroundings};
pub use lease::{OncePeek, peek_lease, peek_once_lease};
pub use quota::SharedQuota;
use quota::{Admit, held_report};
use run_end::End;
pub use state::Runner;
use stop::{Finish, Leftovers};
use try_end::{Ended, Retry, Try, TryEnd};

impl<'c> Runner<'c> {
    /// Runs the tries to the run's end, which it returns: the one place the end is kept.
    fn run_loop(&mut self, seed: u64) -> End {
        let config = self.config;
        let mut rng = LazyRng::new(seed);
        self.log.emit(Event::Start { seed });
        if let Some(value) = &config.timeout_without_unit {
            self.log.warn(Warning::TimeoutWithoutUnit {
                value: value.clone(),
            });
        }
        if let Some(value) = &config.delay_without_unit {
            self.log.warn(Warning::DelayWithoutUnit {
                value: value.clone(),
            });
        }
        let inner = self.config.policy.max_tries.unwrap_or(0);
        if let Some(warning) = self.outer.as_ref().and_then(|o| o.nested_warning(inner)) {
            self.log.warn(warning);
        }
        // The lock comes before the stagger: runs turned away wait for nothing. A run that
        // waited for the lock has been spaced from the others by it, and its wait has used
        // budget that the stagger was sized without: it does not wait its stagger too.
        let waited = match self.take_lock() {
            Ok(waited) => waited,
            Err(end) => return end,
        };
        if let Some(most) = config.stagger.filter(|_| waited == lock::Waited::No) {
            let delay = crate::policy::schedule::stagger(most, &mut rng);
            self.log.emit(Event::Stagger { delay, most });
            if let Some(signal) = self.watch.sleep(&mut self.log, delay, 1) {
                return self.interrupted(0, signal, During::Stagger);
            }
        }
        self.quota.start(seed);
        self.admit_next();
        // A signal during the first exchange with the quota's store: no try ran.
        if let Some(signal) = self.watch.signals.pending_stop() {
            return self.interrupted(0, signal, During::Start);
        }
        let end = loop {
            if let ControlFlow::Break(end) = self.round(&mut rng) {
                break end;
            }
        };
        if !matches!(end.verdict, RunVerdict::Interrupted { .. }) {
            self.quota.finish(&mut self.log);
        }
        end
    }

    /// The exchange with the quota's store before the next try: the refusal when the quota has
    /// no token for it; a try the throttle holds back is kept in `next_held`.
    fn admit_next(&mut self) -> Option<QuotaRefusal> {
        match self.quota.before_try(&mut self.log) {
            Admit::Run => None,
            Admit::Held(admission) => {
                self.next_held = Some(admission);
                None
            }
            Admit::Refused(refusal) => Some(refusal),
        }
    }

    /// Try `attempt`, held back by `--throttle` on the figures of `admission`: it does not run,
    /// and the schedule's wait follows as after a transient failure.
    fn held_try(&mut self, rng: &mut LazyRng, admission: Admission) -> ControlFlow<End, Retry> {
        let now = self.start.elapsed();
        let (attempt, _) = self.state.start_try(now);
        let step = self.state.decide(TryResult::Held, now, rng);
        let decision = step.decision.confirmed(true, || self.admit_next());
        let report = held_report(&self.quota, attempt, admission, decision.clone());
        self.log.emit(Event::TryHeld(report));
        match decision {
            Decision::Retry(wait) => ControlFlow::Continue(Retry {
                attempt,
                outcome: self.state.last_ran(),
                wait,
            }),
            Decision::GiveUp(why) => {
                ControlFlow::Break(self.give_up(attempt, &why, self.state.last_ran()))
            }
            Decision::Succeed | Decision::Stop(_) => {
                ControlFlow::Break(self.give_up(attempt, &GiveUp::Held, self.state.last_ran()))
            }
        }
    }

    /// One try, and the wait before the next one if the schedule retries.
    fn round(&mut self, rng: &mut LazyRng) -> ControlFlow<End> {
        let retry = self.next_try(rng)?;
        self.wait_to_retry(&retry)
    }

    /// Runs the next try to its end and reports it: `Continue` with the retry the schedule
    /// decided on, or `Break` with how the run ends.
    fn next_try(&mut self, rng: &mut LazyRng) -> ControlFlow<End, Retry> {
        if let Some(admission) = self.next_held.take() {
            return self.held_try(rng, admission);
        }
        let now = self.start.elapsed();
        // A success that leaves a --consecutive streak short is not the end: another try
        // follows, or the run gives up.
        let short = self.state.success_would_be_short();
        let (attempt, limit) = self.state.start_try(now);
        let by_limit = self.state.schedule().limit_ends_try(now);
        let mut t = Try {
            attempt,
            start: Moment::now(),
            io: TryIo::default(),
        };
        self.log.emit(Event::TryStarted { attempt: t.attempt });
        let end = match self.run_try(t.attempt, limit, by_limit, short, &mut t.io) {
            Ok(end) => end,
            Err(e) => {
                self.log.emit(Event::TryOutputDone {
                    attempt: t.attempt,
                    output: t.io.take_tail(),
                });
                self.log
                    .emit(Event::Error(Failure::Internal(format!("{e:#}"))));
                return ControlFlow::Break(End::internal());
            }
        };
        let output = self.watch.stdio.finish_try(&mut t.io);
        if let Some(warning) = self.watch.stdio.take_warning() {
            self.log.warn(Warning::Stdio(warning));
        }
        let (ended, detail) = match end {
            TryEnd::Ended(ended) => (ended, None),
            TryEnd::NotStarted(outcome, detail) => (Ended::by_itself(outcome), Some(detail)),
            TryEnd::OutputFailed(ended) => {
                self.log.emit(Event::TryOutputDone {
                    attempt: t.attempt,
                    output: t.io.take_tail(),
                });
                self.stopped_for_output(&t, ended);
                return ControlFlow::Break(self.output_failed(&t.io));
            }
            TryEnd::Interrupted(signal, ended) => {
                return ControlFlow::Break(self.interrupted_try(&mut t, signal, ended));
            }
        };
        let took = t.start.elapsed();
        let (verdict, decision) = self.decide(rng, &ended, output);
        let decision = decision.measured_by(t.io.requests.clock());
        self.report_try(&mut t, took, &ended, verdict, &decision, detail)?;
        self.obey(decision, &mut t, ended.outcome)
    }

    /// Writes out the output of try `t`, which ended as `ended`, and reports it with what the
    /// schedule decided: `Break` when writing the output ends the run.
    fn report_try(
        &mut self,
        t: &mut Try,
        took: Duration,
        ended: &Ended,
        verdict: Verdict,
        decision: &Decision,
        detail: Option<NotStarted>,
    ) -> ControlFlow<End> {
        // Buffered output goes to standard output for the successful try; in a repeat, for every
        // try that succeeded.
        let success = match self.state.repeat() {
            Some(_) => matches!(verdict, Verdict::Success(_)),
            None => matches!(decision, Decision::Succeed),
        };
        // A success after failed tries that --flaky fail fails: the run fails all the same.
        let fails_anyway = success
            && self.state.repeat().is_none()
            && self.config.flaky == Flaky::Fail
            && self.state.counts().failed > 0;
        self.watch.stdio.deliver(&mut t.io, success, fails_anyway);
        let run_end = self.run_end();
        let drained = self.watch.drain(&mut self.log, &mut t.io, run_end);
        self.log.emit(Event::TryOutputDone {
            attempt: t.attempt,
            output: t.io.take_tail(),
        });
        // A request matters only to the wait after a transient failure.
        let transient = matches!(verdict, Verdict::Transient(_));
        let mut report = ended.report(t.attempt, t.start, took, verdict, decision.clone(), detail);
        report.in_a_row = self.state.streak();
        self.log.emit(Event::TryEnded(report));
        if let Some(ignored) = t.io.requests.ignored.clone().filter(|_| transient) {
            self.log.emit(Event::RequestIgnored {
                attempt: t.attempt,
                ignored,
            });
        }
        if let Some(end) = self.output_ends_run(t.attempt, drained, &t.io, success) {
            return ControlFlow::Break(end);
        }
        if let Some(left) = ended.leftovers {
            self.log.emit(Event::Leftovers {
                attempt: t.attempt,
                hook: None,
                signal: self.config.signal,
                killed: left.ending.killed(),
                count: left.count,
            });
        }
        ControlFlow::Continue(())
    }

    /// What the schedule (or `--repeat`) makes of the try just run, which ended as `ended` and
    /// whose output matched (or not) the output patterns: the step, then the exchanges with
    /// the quota's store it asks for. A retry that could not get the same input gives up.
    fn decide(
        &mut self,
        rng: &mut LazyRng,
        ended: &Ended,
        output: OutputMatch,
    ) -> (Verdict, Decision) {
        let result = TryResult::Ran {
            outcome: ended.outcome,
            output,
            by_limit: ended.by_limit,
        };
        let step = self.state.decide(result, self.start.elapsed(), rng);
        if let Some((counted, failed)) = step.count {
            self.quota.ended(counted, failed);
        }
        // Another try would read only part of the input; the quota may have no token for it,
        // or the throttle hold it back.
        let input_kept = self.watch.stdio.can_replay();
        let decision = step.decision.confirmed(input_kept, || self.admit_next());
        (step.verdict.unwrap_or(Verdict::Interrupted), decision)
    }

    /// Carries out the decision on try `t`, whose output has been written out.
    fn obey(
        &mut self,
        decision: Decision,
        t: &mut Try,
        outcome: Outcome,
    ) -> ControlFlow<End, Retry> {
        match decision {
            Decision::Succeed => {
                // Under --flaky fail, a success after failed tries exits as the last of them
                // would have.
                // A try failed before (tries held back by the throttle did not fail, and
                // --consecutive's successful tries neither).
                let failed = self.state.counts().failed;
                let flaky = failed > 0;
                let status = match (self.config.flaky, self.state.last_failed()) {
                    (Flaky::Fail, Some(failed)) if flaky => ExitStatus::of_flaky_success(failed),
                    _ => ExitStatus::Success,
                };
                let verdict = match flaky {
                    true => RunVerdict::Flaky {
                        failed: status != ExitStatus::Success,
                    },
                    false => RunVerdict::Succeeded,
                };
                self.log.emit(Event::Succeeded {
                    attempt: t.attempt,
                    elapsed: self.start.elapsed(),
                    waited: self.state.schedule().waited(),
                    status,
                    flaky,
                    failed,
                });
                if self.config.flaky == Flaky::Warn && flaky {
                    let of = self.config.policy.max_tries;
                    self.log.warn(Warning::Flaky {
                        attempt: t.attempt,
                        of,
                        failed,
                    });
                }
                self.watch.stdio.hand_off(&mut t.io);
                ControlFlow::Break(End { status, verdict })
            }
            Decision::GiveUp(why) => {
                ControlFlow::Break(self.give_up(t.attempt, &why, Some(outcome)))
            }
            Decision::Stop(why) => ControlFlow::Break(self.end_repeat(t.attempt, why)),
            Decision::Retry(wait) => ControlFlow::Continue(Retry {
                attempt: t.attempt,
                outcome: Some(outcome),
                wait,
            }),
        }
    }

    /// `retry` received `signal` during try `t`, which has been stopped (if it had started):
    /// writes out what can be at once, reports the try and what it left, and ends the run.
    fn interrupted_try(&mut self, t: &mut Try, signal: Signal, ended: Option<Ended>) -> End {
        // What can be written at once is; a received signal waits for nothing.
        self.watch.stdio.deliver(&mut t.io, false, false);
        let _ = self
            .watch
            .drain(&mut self.log, &mut t.io, Some(Moment::now()));
        self.log.emit(Event::TryOutputDone {
            attempt: t.attempt,
            output: t.io.take_tail(),
        });
        if let Some(ended) = ended {
            self.state.stopped(ended.outcome);
            // Not a signal that reached `retry`: the lease of `--lock` was lost, and the try
            // says so as every record of the run does.
            let (verdict, decision) = match self.watch.lease_lost() {
                Some(why) => (
                    Verdict::LockLost,
                    Decision::GiveUp(GiveUp::LockLost(why.to_string())),
                ),
                None => (Verdict::Interrupted, Decision::GiveUp(GiveUp::Interrupted)),
            };
            let took = t.start.elapsed();
            let report = ended.report(t.attempt, t.start, took, verdict, decision, None);
            self.log.emit(Event::TryInterrupted(report));
            if let Some(left) = ended.leftovers {
                self.log.emit(Event::Leftovers {
                    attempt: t.attempt,
                    hook: None,
                    signal,
                    killed: left.ending.killed(),
                    count: left.count,
                });
            }
            return self.interrupted(t.attempt, signal, During::Try);
        }
        // The signal came before the try started: after the wait, or before the first try.
        match t.attempt {
            1 => self.interrupted(0, signal, During::Start),
            n => self.interrupted(n - 1, signal, During::Wait),
        }
    }

    /// How writing out the output of try `attempt` ends the run, if it does: a stopping signal
    /// received meanwhile (`drained`), a failed write, or a reader of the successful try's
    /// output gone before it had all of it.
    fn output_ends_run(
        &mut self,
        attempt: u64,
        drained: Option<Signal>,
        io: &TryIo,
        success: bool,
    ) -> Option<End> {
        if let Some(signal) = drained {
            return Some(self.interrupted(attempt, signal, During::Output));
        }
        if io.failed.is_some() {
            return Some(self.output_failed(io));
        }
        if io.broken && success {
            // Never 0 after losing output: the command itself would have met SIGPIPE, and
            // retry dies of it as the command would have.
            self.log.warn(Warning::ReaderGone);
            return Some(self.reader_gone(attempt));
        }
        None
    }

    /// The wait before the try after `retry.attempt`: the `--on-retry` hook, then what is left of
    /// the wait, if the next try still fits in the budget.
    fn wait_to_retry(&mut self, retry: &Retry) -> ControlFlow<End> {
        let Retry {
            attempt,
            outcome,
            wait,
        } = *retry;
        self.log.emit(Event::Wait { attempt, wait });
        let waiting = Moment::now();
        if let Some(end) = self.on_retry(attempt, outcome, &wait) {
            return ControlFlow::Break(end);
        }
        // The hook's time is part of the wait: the next try starts as planned, or when the hook
        // is done if it took longer. A hook that took long may have spent the budget the retry
        // needed.
        let left = wait.delay.saturating_sub(waiting.elapsed());
        if let Err(exceeded) = self.state.schedule().still_fits(self.start.elapsed(), left) {
            self.log.emit(Event::NoTimeAfterHook {
                next: attempt + 1,
                exceeded,
                hook: true,
            });
            let end = self.give_up(attempt, &GiveUp::Budget(exceeded), outcome);
            return ControlFlow::Break(end);
        }
        if let Some(signal) = self.watch.sleep(&mut self.log, left, attempt + 1) {
            return ControlFlow::Break(self.interrupted(attempt, signal, During::Wait));
        }
        // A wait kept stopped (Ctrl-Z) past the end of the budget starts no try: the run gives
        // up as if the wait had not fitted, with the last try's status.
        if let Err(exceeded) = self.state.schedule().not_over(self.start.elapsed()) {
            self.log.emit(Event::NoTimeAfterHook {
                next: attempt + 1,
                exceeded,
                hook: false,
            });
            let end = self.give_up(attempt, &GiveUp::Budget(exceeded), outcome);
            return ControlFlow::Break(end);
        }
        ControlFlow::Continue(())
    }

    /// The end of the run's budget or deadline, if it has one.
    fn run_end(&self) -> Option<Moment> {
        let limit = self.config.policy.limit?;
        self.start.checked_add(limit.at)
    }

    /// Runs one try to its end, stopping it on its timeout (`limit`, which is the end of the
    /// run when `by_limit`), and stopping what a failed try left running, or a successful one
    /// that leaves the streak of `--consecutive` `short`.
    fn run_try(
        &mut self,
        attempt: u64,
        limit: Option<Duration>,
        by_limit: bool,
        short: bool,
        io: &mut TryIo,
    ) -> anyhow::Result<TryEnd> {
        // A signal that came while retry was busy (logging, deciding) means no further try.
        if let Some(signal) = self.watch.signals.pending_stop() {
            return Ok(TryEnd::Interrupted(signal, None));
        }
        let env = self.env.for_try(attempt);
        let mut child = match launch::spawn_command(&mut self.watch, self.config, &env, io)? {
            Ok(child) => child,
            Err(e) => {
                let detail = NotStarted::new(&self.config.command[0], &e.error);
                return Ok(TryEnd::NotStarted(e.outcome, detail));
            }
        };
        let until = limit.and_then(after);
        self.watch.guard(child.group().map(|g| g.as_raw()));
        let (watch, log) = (&mut self.watch, &mut self.log);
        let finish = self
            .stopper
            .run_child(watch, log, &mut child, until, Some(io));
        // Whether the try died of a signal or was stopped: then the terminal's modes are set
        // back, as a shell sets them back after its job.
        let killed = !matches!(finish, Finish::Exited(Outcome::Exit(_)));
        let end = self.try_end(&mut child, finish, by_limit, short, io);
        self.watch.guard(None);
        // Take the terminal back before writing to it: with `stty tostop`, a write from outside
        // the foreground group would stop retry.
        self.watch.job.give_back_terminal(&child, killed);
        Ok(end)
    }

    /// What a try that `run_child` saw to its end came to, once what a failed one left running
    /// has been stopped too, before anything else happens, so that tries never overlap
    /// (docs/processes.md#leftover-processes): what stayed in its group, and on Linux what left it.
    fn try_end(
        &mut self,
        child: &mut Child,
        finish: Finish,
        by_limit: bool,
        short: bool,
        io: &mut TryIo,
    ) -> TryEnd {
        let mut ended = match finish {
            Finish::Exited(outcome) => Ended::by_itself(outcome),
            Finish::TimedOut(stopped) => {
                let ended = Ended::stopped(Outcome::Timeout, &stopped, by_limit);
                match stopped.received {
                    Some(signal) => return TryEnd::Interrupted(signal, Some(ended)),
                    None => ended,
                }
            }
            Finish::Interrupted(signal, stopped) => {
                // A leader that SIGKILL ended after the grace period may not be reaped.
                let outcome = child.outcome().unwrap_or(Outcome::Signal(Signal::KILL));
                let ended = Ended::stopped(outcome, &stopped, false);
                return TryEnd::Interrupted(signal, Some(ended));
            }
            Finish::OutputFailed(stopped) => {
                let outcome = child.outcome().unwrap_or(Outcome::Signal(Signal::KILL));
                return TryEnd::OutputFailed(Ended::stopped(outcome, &stopped, false));
            }
        };
        if !short && !self.stops_leftovers(ended.outcome, io) {
            return TryEnd::Ended(ended);
        }
        let (watch, log) = (&mut self.watch, &mut self.log);
        if let Some(stopped) = self.stopper.stop_leftovers(watch, log, child, Some(io)) {
            if let Some(signal) = stopped.received {
                return TryEnd::Interrupted(signal, Some(ended));
            }
            ended.leftovers = Some(Leftovers {
                count: stopped.count,
                ending: stopped.ending,
            });
        }
        TryEnd::Ended(ended)
    }

    /// Whether what the try that ended with `outcome` left running is stopped now: after a
    /// failure by its status, and after a success by its status that has not printed the match
    /// of `--until-output` (not ready, so another try follows, and tries never overlap). A
    /// success that leaves a `--consecutive` streak short is not done either (`try_end`).
    fn stops_leftovers(&mut self, outcome: Outcome, io: &mut TryIo) -> bool {
        let policy = &self.config.policy;
        // The tries of a repeat never overlap, whatever they came to: each one is a run of its
        // own, and what it started must not meddle with the next.
        self.state.repeat().is_some()
            || policy.stops_leftovers(outcome)
            || (policy.classifier.until_output.is_some() && !self.watch.stdio.ready_so_far(io))
    }
}
