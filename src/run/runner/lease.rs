//! `--lock redis://…/NAME` (docs/processes.md#one-run-at-a-time): the fleet's lock, a lease
//! (`store/lock_lease.rs`) taken before the first try, waited for up to `--lock-wait` and never
//! past the budget, renewed from the runner's own loop (`run/keep.rs`) every third of its length,
//! and let go when the runner is dropped, after the run's records are written; never while a
//! try runs. A lease lost meanwhile stops the try as a timeout does, and ends the run with
//! reason `lock_lost`.

use std::cell::RefCell;
use std::rc::Rc;

use super::held::HeldLease;
use super::lock::{POLL, Waited};
use super::run_end::End;
use super::state::Runner;
use crate::exit::ExitStatus;
use crate::outcome::RunVerdict;
use crate::policy::GiveUp;
use crate::policy::lock::{LeaseSpec, LockHolder, LockSpec};
use crate::report::event::{During, Event, Failure};
use crate::run::clock::Moment;
use crate::run::keep::Renewal;
use crate::store::fleet::{FleetError, FleetErrorKind};
use crate::store::lock_lease::{EXCHANGE_DEADLINE, LockLease, Taken};

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

/// What a run of `--once redis://…` would find now, for the dry run, as `peek_lease` says
/// who holds a lock: the run that did it when it is done, else who holds it.
pub fn peek_once_lease(at: &LeaseSpec) -> Result<(OncePeek, Option<String>), String> {
    let given = crate::store::redis::Settings::from_env(|n| std::env::var_os(n), None);
    let owner = crate::store::fleet::consumer_name();
    let mut lease = LockLease::open_once(&at.address, given.credentials, owner);
    match lease.peek_once(EXCHANGE_DEADLINE) {
        Ok(None) | Ok(Some((Taken::Granted(_), _))) => Ok(((None, None, String::new()), None)),
        Ok(Some((Taken::Held(holder), bound))) => Ok(((Some(holder), None, bound), None)),
        Ok(Some((Taken::Done(record), bound))) => Ok(((None, record.done_since(0), bound), None)),
        Err(e) if e.kind == FleetErrorKind::Refused => {
            Err(format!("error: --once {}: {e}", at.address))
        }
        Err(e) => Ok(((None, None, String::new()), Some(e.to_string()))),
    }
}

/// Who holds a `--once` key now, the run that did it when it is done, and the digest of the
/// command that the key is bound to while it is held or done (empty when it is free).
pub type OncePeek = (
    Option<LockHolder>,
    Option<crate::policy::lock::DoneBefore>,
    String,
);

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
        let me = self.holder_of(spec, String::new());
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
                Ok(Taken::Done(_)) => LockHolder::default(),
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
    pub(super) fn hold(&mut self, lease: LockLease, token: u64, renewal: Renewal) {
        self.env.set_fencing_token(token);
        let held = HeldLease::new(lease, token, renewal, self.run_end());
        let held = Rc::new(RefCell::new(held));
        let kept: crate::run::keep::Kept = held.clone();
        self.watch.hold_lease(kept, self.config.signal);
        self.lease = Some(held);
    }

    /// The lease could not be asked for: credentials refused are a misconfiguration (125);
    /// anything else leaves the run unstarted, with reason `lock_unreachable` (the lock fails
    /// closed).
    pub(super) fn lease_failed(&mut self, url: &str, e: FleetError) -> End {
        if e.kind == FleetErrorKind::Refused {
            let option = self.config.lock.as_ref().map_or("--lock", |s| s.option());
            self.log.emit(Event::Error(Failure::Internal(format!(
                "{option} {url}: {e}"
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
