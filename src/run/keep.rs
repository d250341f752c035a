//! What a run keeps alive while it runs: a lease (a replay's claim on the run it runs now, and
//! on those that failed again), renewed from the runner's own loop, so that no thread can
//! outlive the decision to stop, and a lost lease stops the run.

use std::time::Duration;

use crate::run::clock::Moment;

/// A lease that the runner renews while it waits, whatever it waits for (a try, a hook, the
/// wait between tries, the grace of a stop).
pub trait Keep {
    /// When the next renewal is due; `None` when nothing is claimed, or it is lost.
    fn due(&self) -> Option<Moment>;
    /// Renews what is claimed: `Err` with why, once it is lost (another owner holds it now, or it
    /// could not be renewed before it would lapse). A failed exchange that leaves time before
    /// the lease lapses is no loss: the next renewal is due soon.
    fn renew(&mut self) -> Result<(), String>;
    /// The fencing token of the lease on the run under way, for its tries.
    fn token(&self) -> Option<u64>;
    /// A try started in process group `group`, or ended (`None`): what must not outlive
    /// `retry` if it dies now.
    fn guard(&mut self, group: Option<i32>);
}

/// A shared handle on what a run keeps: the replay owns it, and lends it to each run.
pub type Kept = std::rc::Rc<std::cell::RefCell<dyn Keep>>;

/// When a lease is renewed, and when it is lost: every third of its length from the last
/// grant or renewal, again soon after a failed exchange, and lost once an exchange fails when
/// the lease may have lapsed by the server's clock (its length from when the last renewal was
/// sent, less a margin for the exchange).
#[derive(Clone, Debug)]
pub struct Renewal {
    length: Duration,
    /// When the lease was last granted or renewed, on the run's clock, sent before the
    /// server's time was read: it lapses no earlier than this and its length.
    renewed: Moment,
    /// When a renewal that failed is tried again.
    retry_at: Option<Moment>,
    /// Why the lease was lost, once it was.
    lost: Option<String>,
}

impl Renewal {
    /// A lease of `length`, granted by a request sent at `asked`.
    pub fn new(length: Duration, asked: Moment) -> Renewal {
        Renewal {
            length,
            renewed: asked,
            retry_at: None,
            lost: None,
        }
    }

    pub fn length(&self) -> Duration {
        self.length
    }

    /// A grant or renewal was asked for at `asked` and given.
    pub fn renewed(&mut self, asked: Moment) {
        self.renewed = asked;
        self.retry_at = None;
    }

    /// When the next renewal is due; `None` once the lease is lost.
    pub fn due(&self) -> Option<Moment> {
        if self.lost.is_some() {
            return None;
        }
        let every = crate::store::lease::renew_every(self.length);
        let due = self.renewed.checked_add(every).unwrap_or_else(Moment::now);
        Some(self.retry_at.map_or(due, |at| at.min(due)))
    }

    /// The margin kept for a slow exchange: a lease is taken for lost this long before it
    /// would lapse.
    fn margin(&self) -> Duration {
        (self.length / 6).min(Duration::from_secs(1))
    }

    /// How long an exchange may take before the lease may lapse: the time to `lapses`.
    pub fn time_left(&self) -> Duration {
        self.renewed
            .checked_add(self.length.saturating_sub(self.margin()))
            .map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(Moment::now())
            })
    }

    /// A renewal failed with `e`: lost (`Err` with why) when the lease may have lapsed, else
    /// tried again soon.
    pub fn failed(&mut self, e: impl std::fmt::Display) -> Result<(), String> {
        if self.time_left().is_zero() {
            return Err(self.lose(format!("it could not be renewed before it lapsed: {e}")));
        }
        let again = Duration::from_millis(500).min(self.length / 6);
        self.retry_at = Moment::now().checked_add(again);
        Ok(())
    }

    /// The lease is lost, for `why`, which is returned.
    pub fn lose(&mut self, why: String) -> String {
        self.lost = Some(why.clone());
        why
    }

    /// Why the lease was lost, if it was.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }
}
