//! Where state that outlives a run is kept: the dead-letter file of runs that gave up
//! (docs/dead-letters.md#dead-letters-and-replay), the history file of every run
//! (docs/flaky.md#history-and-statistics), the retry quota's bucket in a local file or in Redis
//! (docs/herd.md#shared-retry-quota), and the lock that the dead-letter file and the quota's local
//! store take.
//!
//! `quota` is what every quota store offers, `file` and `redis` (over `resp`) the
//! two stores, `shared` the one that a run opens and its fallback from Redis to the file.
//! `open` opens the files that outlive a run by their rules (`refusal` says why one is
//! refused), and `lock` takes their locks.

pub mod deadletter;
pub mod file;
pub mod fleet;
pub mod fleet_history;
pub mod fleet_replies;
pub mod fleet_scripts;
pub mod history;
pub mod lease;
pub mod lines;
pub mod lock;
pub mod lock_lease;
pub mod metrics;
pub mod open;
pub mod pick;
pub mod place;
pub mod prune;
pub mod quota;
pub mod record;
pub mod redis;
pub mod refusal;
pub mod run_lock;
pub mod shared;
pub mod unsent;
mod written;

// The dead-letter file names these by their paths here.
pub use lock::{LockError, flock_within};
pub use refusal::{Refusal, refusal};
