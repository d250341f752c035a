//! A replay's claims on the runs of a fleet's store (docs/dead-letters.md#claims): a lease on
//! the run it runs now, and on each run that failed again (claimed until the replay ends, so that
//! a replay running meanwhile does not run it again), renewed together every third of their
//! length while the replay lives.

use std::time::Duration;

use crate::run::clock::Moment;
use crate::run::keep::{Keep, Renewal};
use crate::run::watchdog::Watchdog;
use crate::store::deadletter::Pending;
use crate::store::fleet::{Claim, Fleet, Settle, Settled};

/// The claims of one replay.
pub struct Claims {
    fleet: Fleet,
    owner: String,
    /// The runs claimed: run id and fencing token, the one under way last.
    claimed: Vec<(String, u64)>,
    /// When the leases are renewed together, and whether they were lost.
    renewal: Renewal,
    /// What stops the try under way if the replay dies without warning.
    watchdog: Option<Watchdog>,
}

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
            claimed: Vec::new(),
            renewal: Renewal::new(length, Moment::now()),
            watchdog,
        }
    }

    /// Claims the run `p` for this replay.
    pub fn claim(&mut self, p: &Pending) -> Result<Claim, String> {
        let asked = Moment::now();
        let claim = self
            .fleet
            .claim(&p.record.id, &self.owner, self.renewal.length(), p.attempts)
            .map_err(|e| e.to_string())?;
        if let Claim::Granted { token, .. } = &claim {
            // Renewed together from now on: the new lease lapses last.
            if self.claimed.is_empty() {
                self.renewal.renewed(asked);
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
        self.renewal.lost()
    }
}

impl Keep for Claims {
    fn due(&self) -> Option<Moment> {
        if self.claimed.is_empty() {
            return None;
        }
        self.renewal.due()
    }

    fn renew(&mut self) -> Result<(), String> {
        if let Some(why) = self.renewal.lost() {
            return Err(why.to_string());
        }
        let asked = Moment::now();
        let length = self.renewal.length();
        match self.fleet.renew(&self.owner, length, &self.claimed) {
            Ok(still) => {
                if let Some(k) = still.iter().position(|mine| !mine) {
                    let why = format!(
                        "run {} is held by another replay now: this replay's lease lapsed and was granted to it",
                        self.claimed[k].0
                    );
                    return Err(self.renewal.lose(why));
                }
                self.renewal.renewed(asked);
                Ok(())
            }
            Err(e) => self.renewal.failed(e),
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
