//! `--lock` (docs/processes.md#one-run-at-a-time): the lock a run takes before its first try
//! (and before the stagger), waiting for it up to `--lock-wait` and never past the budget, and
//! keeps until the runner is dropped, after the run's records are written.

use std::time::{Duration, SystemTime};

use super::run_end::End;
use super::state::Runner;
use crate::exit::ExitStatus;
use crate::outcome::RunVerdict;
use crate::policy::GiveUp;
use crate::policy::lock::{LockHolder, LockSpec};
use crate::report::event::{During, Event, Failure};
use crate::run::clock::Moment;
use crate::store::run_lock::LockFile;

/// How often a run waiting for the lock tries it again.
pub const POLL: Duration = Duration::from_millis(50);

/// Whether a run found the lock taken and waited for it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Waited {
    No,
    Yes,
}

impl Runner<'_> {
    /// This run as the holder of the lock `spec` names, since `since` (RFC 3339; empty where
    /// the store writes its own time).
    pub(super) fn holder_of(&self, spec: &LockSpec, since: String) -> LockHolder {
        LockHolder {
            name: spec.name.clone(),
            host: crate::store::fleet::host_name(),
            pid: Some(std::process::id()),
            run_id: self.env.run_id().to_string(),
            since,
        }
    }

    /// Takes the lock of `--lock`, if the run has one, and says whether the run waited for it:
    /// `Err` with the run's end when it does not get it (turned away, a signal while it waits,
    /// a lock file it must not use).
    pub(super) fn take_lock(&mut self) -> Result<Waited, End> {
        let config = self.config;
        if let Some(spec) = &config.lock {
            if let Some(once) = &spec.once {
                return self.take_once(spec, once).map(|()| Waited::No);
            }
            if let Some(at) = &spec.lease {
                return self.take_lease(spec, at);
            }
        }
        let (Some(spec), Some(place)) = (&config.lock, self.lock_place.take()) else {
            return Ok(Waited::No);
        };
        let file = LockFile::open(&place, &spec.name).map_err(|e| self.lock_failed(spec, &e))?;
        let budget_left = self
            .run_end()
            .map(|end| end.saturating_duration_since(Moment::now()));
        let wait = budget_left.map_or(spec.wait, |left| left.min(spec.wait));
        let waiting = Moment::now();
        let mut first_look_failed = false;
        loop {
            let now = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
            let me = self.holder_of(spec, now);
            match file.try_take(&me) {
                Ok(Some(token)) => {
                    self.env.set_fencing_token(token);
                    self.lock = Some(file);
                    return Ok(if first_look_failed {
                        Waited::Yes
                    } else {
                        Waited::No
                    });
                }
                Ok(None) => first_look_failed = true,
                Err(e) => return Err(self.lock_failed(spec, &e)),
            }
            let waited = waiting.elapsed();
            if waited >= wait {
                return Err(self.turned_away(GiveUp::Locked(Box::new(file.holder()))));
            }
            if let Some(signal) = self.watch.sleep(&mut self.log, POLL.min(wait - waited), 1) {
                return Err(self.interrupted(0, signal, During::Start));
            }
        }
    }

    /// Another run holds the lock (`why` is `Locked`, naming the holder), or its Redis could
    /// not be reached: the command does not run, no hook runs, and the run ends with 75.
    pub(super) fn turned_away(&mut self, why: GiveUp) -> End {
        self.state.end_at(0);
        self.log.emit(Event::GaveUp {
            tries: 0,
            elapsed: self.start.elapsed(),
            why: why.clone(),
            status: ExitStatus::Locked,
            last: None,
            signal: None,
            streak: 0,
        });
        End {
            status: ExitStatus::Locked,
            verdict: RunVerdict::GaveUp(why),
        }
    }

    /// The lock's file cannot be used: the run does not start (the lock fails closed).
    pub(super) fn lock_failed(
        &mut self,
        spec: &LockSpec,
        e: &crate::store::file::StoreError,
    ) -> End {
        self.log.emit(Event::Error(Failure::Internal(format!(
            "{} {}: {e}",
            spec.option(),
            spec.name
        ))));
        End::internal()
    }
}
