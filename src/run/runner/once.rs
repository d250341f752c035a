//! `--once KEY` (docs/processes.md#once-only): before the first try the key is looked up, on
//! this machine (a file kept as `--lock`'s is, `store/run_lock.rs`) or on the fleet's Redis (the
//! lease of `--lock`, `store/lock_lease.rs`, beside the key's done record). Done within
//! `--once-for`: the command does not run, and the run ends with 0. Claimed by another run: as a
//! held lock. Bound to another command line: a usage error. Otherwise this run claims it, keeps
//! the claim as `--lock` keeps its lock, marks the key done when it succeeds, and lets go of the
//! claim when it gives up, so that the next run runs the command.

use std::time::{Duration, SystemTime};

use super::run_end::End;
use super::state::Runner;
use crate::exit::ExitStatus;
use crate::outcome::RunVerdict;
use crate::policy::GiveUp;
use crate::policy::lock::{DoneBefore, LeaseSpec, LockHolder, LockSpec, OnceSpec};
use crate::report::event::{Event, Failure, Warning};
use crate::run::clock::Moment;
use crate::run::keep::Renewal;
use crate::store::lock_lease::{EXCHANGE_DEADLINE, LockLease, Taken};
use crate::store::run_lock::{LockFile, OnceTaken};

/// Milliseconds since the epoch of `at`.
fn epoch_ms(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Runner<'_> {
    /// Looks `--once`'s key up and claims it: `Ok` when this run holds the claim and runs the
    /// command, else `Err` with the run's end (done before, claimed by another run, bound to
    /// another command, the key's store not usable).
    pub(super) fn take_once(&mut self, spec: &LockSpec, once: &OnceSpec) -> Result<(), End> {
        let now = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let me = self.holder_of(spec, now);
        if let Some(at) = &spec.lease {
            return self.claim_on_redis(spec, once, at, me);
        }
        let Some(place) = self.lock_place.take() else {
            return Ok(());
        };
        let file = LockFile::open(&place, &spec.name).map_err(|e| self.lock_failed(spec, &e))?;
        let since = epoch_ms(SystemTime::now()).saturating_sub(epoch_ms_of(once.within));
        match file.try_take_once(&me, &once.command, since) {
            Ok(OnceTaken::Granted(token)) => {
                self.env.set_fencing_token(token);
                self.once_claim = Some((token, me));
                self.lock = Some(file);
                Ok(())
            }
            Ok(OnceTaken::Held(holder)) => Err(self.turned_away(GiveUp::Locked(Box::new(holder)))),
            Ok(OnceTaken::Done(done)) => Err(self.done_before(&spec.name, done)),
            Ok(OnceTaken::Other(_)) => Err(self.another_command(&spec.name)),
            Err(e) => Err(self.lock_failed(spec, &e)),
        }
    }

    /// `--once redis://…/KEY`: the key looked up and claimed in one script.
    fn claim_on_redis(
        &mut self,
        spec: &LockSpec,
        once: &OnceSpec,
        at: &LeaseSpec,
        me: LockHolder,
    ) -> Result<(), End> {
        if at.address.password().is_some() {
            self.log.warn(Warning::PasswordInUrl {
                option: "--once",
                variable: crate::store::redis::PASSWORD_VAR,
            });
        }
        let given = crate::store::redis::Settings::from_env(|n| std::env::var_os(n), None);
        let owner = crate::store::fleet::consumer_name();
        let mut lease = LockLease::open_once(&at.address, given.credentials, owner);
        let within = self.run_end().map_or(EXCHANGE_DEADLINE, |end| {
            end.saturating_duration_since(Moment::now())
                .min(EXCHANGE_DEADLINE)
        });
        let asked = Moment::now();
        let (taken, theirs) = match lease.take_once(&me, &once.command, at.length, within) {
            Ok(taken) => taken,
            Err(e) => return Err(self.lease_failed(&at.address.to_string(), e)),
        };
        if !theirs.is_empty() && theirs != once.command {
            // Granted to this run only when the key was free: its command is this run's.
            return Err(self.another_command(&spec.name));
        }
        match taken {
            Taken::Granted(token) => {
                self.hold(lease, token, Renewal::new(at.length, asked));
                self.once_claim = Some((token, me));
                Ok(())
            }
            Taken::Held(holder) => Err(self.turned_away(GiveUp::Locked(Box::new(holder)))),
            Taken::Done(record) => {
                let done = record.done_since(0).unwrap_or_default();
                Err(self.done_before(&spec.name, done))
            }
        }
    }

    /// The key was done by the run `done` names: the command does not run, and the run ends
    /// with 0.
    fn done_before(&mut self, key: &str, done: DoneBefore) -> End {
        self.state.end_at(0);
        self.log.emit(Event::DoneBefore {
            key: key.to_string(),
            done: Box::new(done.clone()),
        });
        End {
            status: ExitStatus::Success,
            verdict: RunVerdict::DoneBefore(Box::new(done)),
        }
    }

    /// The key is bound to another command line: a usage error, as an idempotency key reused
    /// for another request is refused.
    fn another_command(&mut self, key: &str) -> End {
        self.log.emit(Event::Error(Failure::Internal(
            crate::report::words::once_bound_elsewhere(key),
        )));
        End::internal()
    }

    /// Marks `--once`'s key done when the run `end` says succeeded; the claim is let go in any
    /// case when the runner is dropped. A key that cannot be marked leaves the run's end as it
    /// is, with a warning: the next run will run the command again.
    pub(super) fn settle_once(&mut self, end: &End) {
        let Some((token, me)) = self.once_claim.take() else {
            return;
        };
        let (Some(spec), Some(once)) = (
            &self.config.lock,
            self.config.lock.as_ref().and_then(|s| s.once.as_ref()),
        ) else {
            return;
        };
        // A `--repeat` whose every try succeeded did the work as surely as one success.
        let succeeded = matches!(
            end.verdict,
            RunVerdict::Succeeded
                | RunVerdict::Flaky { failed: false }
                | RunVerdict::Repeated { failed: 0, .. }
        );
        if !succeeded || end.status != ExitStatus::Success {
            return;
        }
        let marked = match (&self.lock, &self.lease) {
            (Some(file), _) => file
                .mark_done(&me, token, &once.command, epoch_ms(SystemTime::now()))
                .map_err(|e| e.to_string()),
            (None, Some(held)) => held.borrow_mut().mark_done(&me, &once.command, once.within),
            (None, None) => Ok(()),
        };
        if let Err(why) = marked {
            self.log.warn(Warning::NotMarkedDone {
                key: spec.name.clone(),
                why,
            });
        }
    }
}

/// `within` in milliseconds.
fn epoch_ms_of(within: Duration) -> u64 {
    u64::try_from(within.as_millis()).unwrap_or(u64::MAX)
}
