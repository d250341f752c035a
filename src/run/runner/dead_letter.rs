//! The dead-letter file (`--dead-letter`): where a run that gives up is recorded, for
//! `--replay` to run it again later.

use std::time::Duration;

use crate::exit::ExitStatus;
use crate::policy::GiveUp;
use crate::report::event::{Event, Warning};
use crate::report::log::Log;
use crate::run::clock::Moment;
use crate::store::deadletter::DeadLetter;

/// Where the run is recorded if it gives up, if anywhere.
pub struct Recorder {
    letter: Option<DeadLetter>,
}

impl Recorder {
    pub fn new(letter: Option<DeadLetter>) -> Recorder {
        Recorder { letter }
    }

    /// Appends the run, which gives up after `attempt` tries, to `--dead-letter`: for every
    /// reason but an interrupt (nobody wants it run again) and input that could not be kept
    /// (`retry`'s own failure, status 125). A failure to append is told, and changes nothing
    /// else: the status still says what the command did. `run_end` is the end of the run's
    /// budget or deadline, if it has one.
    pub fn record(
        &self,
        log: &mut Log,
        attempt: u64,
        why: &GiveUp,
        status: ExitStatus,
        elapsed: Duration,
        run_end: Option<Moment>,
    ) {
        let Some(letter) = &self.letter else {
            return;
        };
        if matches!(why, GiveUp::Interrupted | GiveUp::Input) {
            return;
        }
        let code = u64::try_from(status.code()).unwrap_or_default();
        let left = run_end.map(|end| end.saturating_duration_since(Moment::now()));
        match letter.append(code, why.word(), attempt, elapsed, left) {
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
