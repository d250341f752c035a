//! What a run keeps alive while it runs: a lease (a replay's claim on the run it runs now, and
//! on those that failed again), renewed from the runner's own loop, so that no thread can
//! outlive the decision to stop, and a lost lease stops the run.

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
