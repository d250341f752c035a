//! How a run ends: giving up, a repeat's end, a signal, output that could not be written, and
//! the run's outcome made from them once, which the event that ends the run carries to every
//! record (docs/log.md#every-record-of-a-run-agrees).

use super::around::RunEnd;
use super::state::Runner;
use super::try_end::{Ended, Try};
use crate::exit::ExitStatus;
use crate::outcome::{RunOutcome, RunVerdict};
use crate::policy::{Decision, GiveUp, Outcome, RepeatEnd, Signal, Verdict};
use crate::report::event::{During, Event, Failure};
use crate::run::stdio::TryIo;

/// How a run ends, said once by the function that ends it and kept by the run loop alone: the
/// status `retry` exits with, and the verdict every record reads.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct End {
    pub status: ExitStatus,
    pub verdict: RunVerdict,
}

impl End {
    /// `retry` itself failed during the run.
    pub fn internal() -> End {
        End {
            status: ExitStatus::Usage,
            verdict: RunVerdict::Internal,
        }
    }
}

impl Runner<'_> {
    /// Runs the command to the run's end, and makes the run's outcome, once: it plays back what
    /// `--output-on-failure` withheld, records a run that gave up in `--dead-letter`, and reports
    /// the outcome in the event every record reads.
    pub fn run(mut self, seed: u64) -> RunEnd {
        let end = self.run_loop(seed);
        self.settle_once(&end);
        let outcome = self.outcome(end);
        // The end is announced as it is known, among what --output-on-failure withholds.
        self.log.conclude(&outcome);
        // A signal while the withheld output is played back, or while the reports are written,
        // changes nothing the announcement said: the outcome stands, every record reads it,
        // the signal is told beside it, and retry dies of it.
        let attempt = self.state.counts().counted;
        let signals = &mut self.watch.signals;
        let mut received = self.watch.stdio.end_run(outcome.plays_back(), signals);
        if let Some(signal) = received {
            self.log.emit(Event::Received {
                signal,
                attempt,
                during: During::Playback,
            });
        }
        let run_end = self.run_end();
        self.dead_letter.record(&mut self.log, &outcome, run_end);
        self.log.emit(Event::RunEnded(Box::new(outcome.clone())));
        if received.is_none() {
            received = self.watch.signals.pending_stop();
            if let Some(signal) = received {
                self.log.emit(Event::Received {
                    signal,
                    attempt,
                    during: During::Report,
                });
            }
        }
        RunEnd {
            outcome,
            received,
            signals: self.watch.signals,
        }
    }

    /// The run's outcome, as it ended (`end`): the one value every record reads.
    fn outcome(&self, end: End) -> RunOutcome {
        RunOutcome {
            status: end.status,
            verdict: end.verdict,
            tries: self.state.counts(),
            streak: self.state.streak(),
            last: self.state.last_ran(),
            elapsed: self.start.elapsed(),
        }
    }

    /// `--repeat` ends after try `attempt`, for `why`: 0 when no try failed, else the status
    /// giving up after the first failed one would have given, and 124 when none ran to its end.
    pub(super) fn end_repeat(&mut self, attempt: u64, why: RepeatEnd) -> End {
        let Some(repeat) = self.state.repeat() else {
            return End::internal();
        };
        let count = repeat.count().clone();
        let status = ExitStatus::of_repeat(repeat.failed_outcome(), count.tries);
        self.state.end_at(attempt);
        let verdict = RunVerdict::Repeated {
            why: why.clone(),
            failed: count.failed,
        };
        self.log.emit(Event::RepeatEnded {
            count,
            why,
            status,
            elapsed: self.start.elapsed(),
        });
        End { status, verdict }
    }

    /// The reader of the successful try `attempt`'s output went away before it had all of it:
    /// never 0 after losing output; `retry` dies of SIGPIPE, as the command would have, and the
    /// run ends as quietly as the pipeline would.
    pub(super) fn reader_gone(&mut self, attempt: u64) -> End {
        let signal = Signal::PIPE;
        let verdict = RunVerdict::Interrupted {
            signal,
            during: During::Output,
        };
        let status = ExitStatus::Reraise(signal);
        self.log.emit(Event::GaveUp {
            tries: attempt,
            elapsed: self.start.elapsed(),
            why: GiveUp::Interrupted,
            status,
            last: self.state.last_ran(),
            signal: Some(signal),
            streak: self.state.streak(),
        });
        End { status, verdict }
    }

    /// Reports try `t`, which `retry` stopped as `ended` because its output could not be
    /// written: it ran, and it is not one of the command's failures.
    pub(super) fn stopped_for_output(&mut self, t: &Try, ended: Ended) {
        self.state.stopped(ended.outcome);
        let decision = Decision::GiveUp(GiveUp::Interrupted);
        let took = t.start.elapsed();
        let verdict = Verdict::Interrupted;
        let report = ended.report(t.attempt, t.start, took, verdict, decision, None);
        self.log.emit(Event::TryInterrupted(report));
    }

    /// A try's output could not be written: say why; the run ends with status 1, as `cat` does.
    pub(super) fn output_failed(&mut self, io: &TryIo) -> End {
        if let Some(failure) = &io.failed {
            self.log
                .emit(Event::Error(Failure::Output(failure.to_string())));
        }
        End {
            status: ExitStatus::OutputFailed,
            verdict: RunVerdict::OutputFailed,
        }
    }

    /// Gives up after try `attempt`, for `why`; `last` is how the last try that ran ended
    /// (`None` when every try was held back by the throttle). The log, then `--on-give-up`
    /// when the last try ran and failed.
    pub(super) fn give_up(&mut self, attempt: u64, why: &GiveUp, last: Option<Outcome>) -> End {
        let status = last.map_or(ExitStatus::Held, |o| ExitStatus::of_giving_up(why, o));
        let elapsed = self.start.elapsed();
        self.state.end_at(attempt);
        let verdict = match why {
            // Ctrl-C reached the command, and so the terminal's foreground group: retry too.
            GiveUp::Interrupted => RunVerdict::Interrupted {
                signal: Signal::INT,
                during: During::Try,
            },
            why => RunVerdict::GaveUp(why.clone()),
        };
        self.log.emit(Event::GaveUp {
            tries: attempt,
            elapsed,
            why: why.clone(),
            status,
            last,
            signal: None,
            streak: self.state.streak(),
        });
        // A signal during the hook ends the run as an interrupted one.
        if let Some(end) = self.on_give_up(attempt, status) {
            return end;
        }
        End { status, verdict }
    }

    pub(super) fn interrupted(&mut self, attempt: u64, signal: Signal, during: During) -> End {
        // Not a signal that reached `retry`: the lease of `--lock` was lost.
        if let Some(why) = self.watch.lease_lost() {
            return self.lease_lost(attempt, why.to_string());
        }
        self.state.end_at(attempt);
        let verdict = match self.state.repeat() {
            // A repeat ends as a repeat, cut short by the signal: its summary says so.
            Some(repeat) => RunVerdict::Repeated {
                why: RepeatEnd::Interrupted(signal),
                failed: repeat.count().failed,
            },
            None => RunVerdict::Interrupted { signal, during },
        };
        self.log.emit(Event::Received {
            signal,
            attempt,
            during,
        });
        let status = ExitStatus::Reraise(signal);
        if let Some(repeat) = self.state.repeat() {
            let count = repeat.count().clone();
            self.log.emit(Event::RepeatEnded {
                count,
                why: RepeatEnd::Interrupted(signal),
                status,
                elapsed: self.start.elapsed(),
            });
            return End { status, verdict };
        }
        self.log.emit(Event::GaveUp {
            tries: attempt,
            elapsed: self.start.elapsed(),
            why: GiveUp::Interrupted,
            status,
            last: None,
            signal: Some(signal),
            streak: self.state.streak(),
        });
        End { status, verdict }
    }
}
