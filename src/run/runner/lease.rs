//! `--lock redis://…/NAME` (docs/processes.md#one-run-at-a-time): the fleet's lock, a lease
//! (`store/lock_lease.rs`) taken before the first try, waited for up to `--lock-wait` and never
//! past the budget, renewed from the runner's own loop (`run/keep.rs`) every third of its length,
//! and let go when the runner is dropped, after the run's records are written; never while a
//! try runs. A lease lost meanwhile stops the try as a timeout does, and ends the run with
//! reason `lock_lost`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::lock::{POLL, Waited};
use super::run_end::End;
use super::state::Runner;
use crate::exit::ExitStatus;
use crate::outcome::RunVerdict;
use crate::policy::GiveUp;
use crate::policy::lock::{LeaseSpec, LockHolder, LockSpec};
use crate::report::event::{During, Event, Failure};
use crate::run::clock::Moment;
use crate::run::keep::{Keep, Renewal};
use crate::run::watchdog::Watchdog;
use crate::store::fleet::{FleetError, FleetErrorKind};
use crate::store::lock_lease::{EXCHANGE_DEADLINE, LockLease, Taken};
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
        if self.renewal.lost().is_none() {
            let _ = self.lease.release(self.token, DEADLINE);
        }
    }
}

/// Who holds the lease of `at` now, for the dry run, and why Redis could not be asked if it
/// could not (the run would not start); `Err` with the line to exit 125 with when Redis refused
/// the credentials.
pub fn peek_lease(at: &LeaseSpec) -> Result<(Option<LockHolder>, Option<String>), String> {
    let given = crate::store::redis::Settings::from_env(|n| std::env::var_os(n), None);
    let owner = crate::store::fleet::consumer_name();
    let mut lease = LockLease::open(&at.address, given.credentials, owner);
    match lease.peek(EXCHANGE_DEADLINE) {
        Ok(holder) => Ok((holder, None)),
        Err(e) if e.kind == FleetErrorKind::Refused => {
            Err(format!("error: --lock {}: {e}", at.address))
        }
        Err(e) => Ok((None, Some(e.to_string()))),
    }
}

impl Runner<'_> {
    /// Takes the lease of `--lock redis://…`: as `take_lock` does the lock of a file.
    pub(super) fn take_lease(&mut self, spec: &LockSpec, at: &LeaseSpec) -> Result<Waited, End> {
        if at.address.password().is_some() {
            self.log.warn(crate::report::event::Warning::PasswordInUrl {
                option: "--lock",
                variable: crate::store::redis::PASSWORD_VAR,
            });
        }
        let given = crate::store::redis::Settings::from_env(|n| std::env::var_os(n), None);
        let owner = crate::store::fleet::consumer_name();
        let mut lease = LockLease::open(&at.address, given.credentials, owner);
        let run_end = self.run_end();
        let budget_left = || run_end.map(|end| end.saturating_duration_since(Moment::now()));
        let wait = budget_left().map_or(spec.wait, |left| left.min(spec.wait));
        let waiting = Moment::now();
        let me = LockHolder {
            name: spec.name.clone(),
            host: crate::store::fleet::host_name(),
            pid: Some(std::process::id()),
            run_id: self.env.run_id().to_string(),
            since: String::new(),
        };
        // Who held the lease at the last look, while the run waits for it.
        let mut last_holder: Option<LockHolder> = None;
        let spent = || budget_left().is_some_and(|left| left.is_zero());
        loop {
            // The budget ended while the run waited: it was turned away by the holder, not by
            // a Redis that could not answer in no time.
            if let Some(holder) = last_holder.take_if(|_| spent()) {
                return Err(self.turned_away(GiveUp::Locked(Box::new(holder))));
            }
            let asked = Moment::now();
            let within = budget_left().map_or(EXCHANGE_DEADLINE, |l| l.min(EXCHANGE_DEADLINE));
            let holder = match lease.take(&me, at.length, within) {
                Ok(Taken::Granted(token)) => {
                    self.hold(lease, token, Renewal::new(at.length, asked));
                    return Ok(match last_holder {
                        Some(_) => Waited::Yes,
                        None => Waited::No,
                    });
                }
                Ok(Taken::Held(holder)) => holder,
                // The budget ended during the exchange of a run that waits: as above.
                Err(_) if last_holder.is_some() && spent() => {
                    let holder = last_holder.take().unwrap_or_default();
                    return Err(self.turned_away(GiveUp::Locked(Box::new(holder))));
                }
                Err(e) => return Err(self.lease_failed(&at.address.to_string(), e)),
            };
            let waited = waiting.elapsed();
            if waited >= wait {
                return Err(self.turned_away(GiveUp::Locked(Box::new(holder))));
            }
            last_holder = Some(holder);
            if let Some(signal) = self.watch.sleep(&mut self.log, POLL.min(wait - waited), 1) {
                return Err(self.interrupted(0, signal, During::Start));
            }
        }
    }

    /// The lease is this run's, with `token`: each try gets the token, and the runner's loop
    /// renews the lease from now on.
    fn hold(&mut self, lease: LockLease, token: u64, renewal: Renewal) {
        self.env.set_fencing_token(token);
        let held = HeldLease {
            lease,
            token,
            renewal,
            run_end: self.run_end(),
            watchdog: Watchdog::start().ok(),
        };
        let kept: crate::run::keep::Kept = Rc::new(RefCell::new(held));
        self.watch.hold_lease(kept.clone(), self.config.signal);
        self.lease = Some(kept);
    }

    /// The lease could not be asked for: credentials refused are a misconfiguration (125);
    /// anything else leaves the run unstarted, with reason `lock_unreachable` (the lock fails
    /// closed).
    fn lease_failed(&mut self, url: &str, e: FleetError) -> End {
        if e.kind == FleetErrorKind::Refused {
            self.log.emit(Event::Error(Failure::Internal(format!(
                "--lock {url}: {e}"
            ))));
            return End::internal();
        }
        let why = format!("the lock {url} could not be taken: {e}");
        self.turned_away(GiveUp::LockUnreachable(why))
    }

    /// The lease of `--lock` was lost while the run held it (`why`): the try under way has
    /// been stopped as on a timeout; no further try or hook runs, and the run ends with 75 and
    /// reason `lock_lost` after try `attempt`.
    pub(super) fn lease_lost(&mut self, attempt: u64, why: String) -> End {
        let why = GiveUp::LockLost(why);
        self.state.end_at(attempt);
        self.log.emit(Event::GaveUp {
            tries: attempt,
            elapsed: self.start.elapsed(),
            why: why.clone(),
            status: ExitStatus::Locked,
            last: self.state.last_ran(),
            signal: None,
            streak: self.state.streak(),
        });
        End {
            status: ExitStatus::Locked,
            verdict: RunVerdict::GaveUp(why),
        }
    }
}
