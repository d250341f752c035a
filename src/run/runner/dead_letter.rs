//! The dead-letter file (`--dead-letter`): where a run that gives up is recorded, for
//! `--replay` to run it again later.

use crate::outcome::{RunOutcome, RunVerdict};
use crate::policy::GiveUp;
use crate::report::event::{Event, Warning};
use crate::report::log::Log;
use crate::run::clock::Moment;
use crate::store::deadletter::DeadLetter;
use crate::store::unsent::{self, Sent};

/// Where the run is recorded if it gives up, if anywhere.
pub struct Recorder {
    letter: Option<DeadLetter>,
}

impl Recorder {
    pub fn new(letter: Option<DeadLetter>) -> Recorder {
        Recorder { letter }
    }

    /// Appends the run to `--dead-letter` when its outcome says it gave up: for every reason
    /// but input that could not be kept (`retry`'s own failure, status 125) and a lock held by
    /// another run (the command did not run, and the holder is running it); an interrupted
    /// run is not recorded (nobody wants it run again by surprise). A failure to append is
    /// told, and changes nothing else: the status still says what the command did. `run_end`
    /// is the end of the run's budget or deadline, if it has one.
    pub fn record(&self, log: &mut Log, outcome: &RunOutcome, run_end: Option<Moment>) {
        let Some(letter) = &self.letter else {
            return;
        };
        let RunVerdict::GaveUp(why) = &outcome.verdict else {
            return;
        };
        let lock = matches!(
            why,
            GiveUp::Locked(_) | GiveUp::LockLost(_) | GiveUp::LockUnreachable(_)
        );
        if lock || *why == GiveUp::Input {
            return;
        }
        let code = u64::try_from(outcome.status.code()).unwrap_or_default();
        let left = run_end.map(|end| end.saturating_duration_since(Moment::now()));
        let tries = outcome.tries.counted;
        if let Some(address) = &letter.fleet {
            let record = letter.ended(code, why.word(), tries, outcome.elapsed);
            let var = |name: &str| std::env::var_os(name);
            match unsent::send(address, &record, &var) {
                Ok(Sent::Stream { moved }) => {
                    log.emit(Event::DeadLettered {
                        path: letter.path.clone(),
                    });
                    // The runs kept here before it stay where no replay sees them: say so.
                    if let Err(why) = moved {
                        log.warn(Warning::DeadLetterKeptNotMoved {
                            path: letter.path.clone(),
                            why,
                        });
                    }
                }
                Ok(Sent::Kept { file, why }) => log.warn(Warning::DeadLetterKeptLocally {
                    path: letter.path.clone(),
                    file,
                    why: why.to_string(),
                }),
                Err(e) => log.warn(Warning::DeadLetterNotWritten {
                    path: letter.path.clone(),
                    why: e.to_string(),
                }),
            }
            return;
        }
        match letter.append(code, why.word(), tries, outcome.elapsed, left) {
            Ok(()) => log.emit(Event::DeadLettered {
                path: letter.path.clone(),
            }),
            Err(e) => log.warn(Warning::DeadLetterNotWritten {
                path: letter.path.clone(),
                why: e.to_string(),
            }),
        }
    }
}
