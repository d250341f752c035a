//! A replay's claims on the runs of a fleet's store (docs/dead-letters.md#claims): a lease on
//! the run it runs now, and on each run that failed again (claimed until the replay ends, so that
//! a replay running meanwhile does not run it again), renewed together every third of their
//! length while the replay lives.

use std::time::Duration;

use crate::run::clock::Moment;
use crate::run::keep::Keep;
use crate::run::watchdog::Watchdog;
use crate::store::deadletter::Pending;
use crate::store::fleet::{Claim, Fleet, Settle, Settled};
use crate::store::lease;

/// The claims of one replay.
pub struct Claims {
    fleet: Fleet,
    owner: String,
    length: Duration,
    /// The runs claimed: run id and fencing token, the one under way last.
    claimed: Vec<(String, u64)>,
    /// When the leases were last granted or renewed, on the run's clock, sent before the
    /// server's time was read: each lapses no earlier than this and its length.
    renewed: Moment,
    /// When a renewal that failed is tried again.
    retry_at: Option<Moment>,
    /// Why the leases were lost, once they were.
    lost: Option<String>,
    /// What stops the try under way if the replay dies without warning.
    watchdog: Option<Watchdog>,
}

/// Ends a lease before it lapses by the server's clock: the margin kept for a slow exchange.
const MARGIN: Duration = Duration::from_secs(1);

impl Claims {
    pub fn new(
        fleet: Fleet,
        owner: String,
        length: Duration,
        watchdog: Option<Watchdog>,
    ) -> Claims {
        Claims {
            fleet,
            owner,
            length,
            claimed: Vec::new(),
            renewed: Moment::now(),
            retry_at: None,
            lost: None,
            watchdog,
        }
    }

    /// Claims the run `p` for this replay.
    pub fn claim(&mut self, p: &Pending) -> Result<Claim, String> {
        let asked = Moment::now();
        let claim = self
            .fleet
            .claim(&p.record.id, &self.owner, self.length, p.attempts)
            .map_err(|e| e.to_string())?;
        if let Claim::Granted { token, .. } = &claim {
            // Renewed together from now on: the new lease lapses last.
            if self.claimed.is_empty() {
                self.renewed = asked;
            }
            self.claimed.push((p.record.id.clone(), *token));
        }
        Ok(claim)
    }

    /// Settles the run `id`, claimed by this replay: resolved (its lease let go) or failed again
    /// (its lease renewed until the replay ends).
    pub fn settle(&mut self, id: &str, resolved: bool) -> Result<Settled, String> {
        let Some(k) = self.claimed.iter().position(|(claimed, _)| claimed == id) else {
            return Ok(Settled::Lost);
        };
        let token = self.claimed[k].1;
        let how = match resolved {
            true => Settle::Resolved,
            false => Settle::Failed,
        };
        let settled = self
            .fleet
            .settle(id, &self.owner, token, how)
            .map_err(|e| e.to_string())?;
        if resolved || settled != Settled::Done {
            self.claimed.remove(k);
        }
        Ok(settled)
    }

    /// Lets go of the run `id` without settling it (a lost claim, a run not run).
    pub fn forget_claimed(&mut self, id: &str) {
        self.claimed.retain(|(claimed, _)| claimed != id);
    }

    /// The replay ends: the runs that failed again are let go, pending for the next replay.
    pub fn release_all(&mut self) -> Result<(), String> {
        let claimed = std::mem::take(&mut self.claimed);
        for (id, token) in &claimed {
            self.fleet
                .settle(id, &self.owner, *token, Settle::Release)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Why the claims were lost, if they were.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }
}

impl Keep for Claims {
    fn due(&self) -> Option<Moment> {
        if self.lost.is_some() || self.claimed.is_empty() {
            return None;
        }
        let every = lease::renew_every(self.length);
        let due = self.renewed.checked_add(every).unwrap_or_else(Moment::now);
        Some(self.retry_at.map_or(due, |at| at.min(due)))
    }

    fn renew(&mut self) -> Result<(), String> {
        if let Some(why) = &self.lost {
            return Err(why.clone());
        }
        let asked = Moment::now();
        let lapses = self.renewed.checked_add(self.length.saturating_sub(MARGIN));
        match self.fleet.renew(&self.owner, self.length, &self.claimed) {
            Ok(still) => {
                if let Some(k) = still.iter().position(|mine| !mine) {
                    let why = format!(
                        "run {} is held by another replay now: this replay's lease lapsed and was granted to it",
                        self.claimed[k].0
                    );
                    self.lost = Some(why.clone());
                    return Err(why);
                }
                self.renewed = asked;
                self.retry_at = None;
                Ok(())
            }
            Err(e) if lapses.is_none_or(|at| Moment::now() >= at) => {
                let why = format!("it could not be renewed before it lapsed: {e}");
                self.lost = Some(why.clone());
                Err(why)
            }
            Err(_) => {
                // Time is left before the lease lapses: try again in a moment.
                self.retry_at = Moment::now().checked_add(Duration::from_millis(500));
                Ok(())
            }
        }
    }

    fn token(&self) -> Option<u64> {
        self.claimed.last().map(|(_, token)| *token)
    }

    fn guard(&mut self, group: Option<i32>) {
        if let Some(watchdog) = &self.watchdog {
            watchdog.guard(group);
        }
    }
}
