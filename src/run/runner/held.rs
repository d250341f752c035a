//! The lease of `--lock redis://…` or the claim of `--once redis://…` once granted
//! (docs/processes.md#one-run-at-a-time): renewed from the runner's loop while the run lives,
//! a `--once` key marked done with it, and let go when dropped, unless it was lost or settled.

use std::time::Duration;

use crate::policy::lock::LockHolder;
use crate::run::clock::Moment;
use crate::run::keep::{Keep, Renewal};
use crate::run::watchdog::Watchdog;
use crate::store::lock_lease::{EXCHANGE_DEADLINE, LockLease};
use crate::store::redis::DEADLINE;

/// The lease of `--lock` once granted: renewed while the run lives, let go when dropped.
pub struct HeldLease {
    lease: LockLease,
    token: u64,
    renewal: Renewal,
    /// The end of the run's budget: no renewal waits past it.
    run_end: Option<Moment>,
    /// What stops the try under way if `retry` dies without warning: another run may hold
    /// the lease within its length, and must not meet this run's try.
    watchdog: Option<Watchdog>,
    /// `--once`: the key was marked done, which let go of the claim.
    settled: bool,
}

impl HeldLease {
    /// Marks the `--once` key claimed done by `me`, for the command of digest `command`, kept
    /// `kept`: `Err` with why when it could not be (the claim lost, Redis not reached).
    pub fn mark_done(
        &mut self,
        me: &LockHolder,
        command: &str,
        kept: Duration,
    ) -> Result<(), String> {
        if let Some(why) = self.renewal.lost() {
            return Err(why.to_string());
        }
        let within = self.within();
        match self.lease.mark_done(self.token, me, command, kept, within) {
            Ok(true) => {
                self.settled = true;
                Ok(())
            }
            Ok(false) => Err(format!(
                "its claim lapsed and another run holds it now, or Redis lost it (token {} is \
                 no longer the holder's)",
                self.token
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl HeldLease {
    /// How long an exchange may take now: until the lease may lapse, but never less than a
    /// quota's decision may take (a lease that lapsed and that no one took is still this
    /// run's), nor past the end of the budget.
    fn within(&self) -> Duration {
        let within = self.renewal.time_left().clamp(DEADLINE, EXCHANGE_DEADLINE);
        self.run_end.map_or(within, |end| {
            within.min(end.saturating_duration_since(Moment::now()))
        })
    }
}

impl Keep for HeldLease {
    fn due(&self) -> Option<Moment> {
        self.renewal.due()
    }

    fn renew(&mut self) -> Result<(), String> {
        if let Some(why) = self.renewal.lost() {
            return Err(why.to_string());
        }
        let asked = Moment::now();
        let (length, within) = (self.renewal.length(), self.within());
        let name = self.lease.name().to_string();
        match self.lease.renew(self.token, length, within) {
            Ok(true) => {
                self.renewal.renewed(asked);
                Ok(())
            }
            Ok(false) => Err(self.renewal.lose(format!(
                "the lock '{name}' was lost: its lease lapsed and another run holds it now, \
                 or Redis lost it (token {} is no longer the holder's)",
                self.token
            ))),
            Err(e) => self
                .renewal
                .failed(e)
                .map_err(|why| format!("the lock '{name}' was lost: {why}")),
        }
    }

    fn token(&self) -> Option<u64> {
        Some(self.token)
    }

    fn guard(&mut self, group: Option<i32>) {
        if let Some(watchdog) = &self.watchdog {
            watchdog.guard(group);
        }
    }
}

impl Drop for HeldLease {
    /// Lets go of the lease, unless it was lost: briefly, since a lease not let go lapses.
    fn drop(&mut self) {
        if self.renewal.lost().is_none() && !self.settled {
            let _ = self.lease.release(self.token, DEADLINE);
        }
    }
}

impl HeldLease {
    /// The lease `lease`, granted with `token`, renewed as `renewal` says, never past the end
    /// of the budget `run_end`; with its watchdog started.
    pub fn new(
        lease: LockLease,
        token: u64,
        renewal: Renewal,
        run_end: Option<Moment>,
    ) -> HeldLease {
        HeldLease {
            lease,
            token,
            renewal,
            run_end,
            watchdog: Watchdog::start().ok(),
            settled: false,
        }
    }
}
