//! What every store of the retry quota offers (docs/herd.md#shared-retry-quota): the local file
//! ([`super::file`]) and Redis ([`super::redis`]) keep the bucket of `policy::quota` and answer the
//! same three operations with the same [`Update`]; [`super::shared`] picks one and falls back from
//! Redis to the file.

use std::fmt;
use std::path::PathBuf;
use std::time::SystemTime;

/// A store of one quota's bucket.
pub trait BucketStore {
    /// A first try: deposit the ratio. First tries are never held back, so `granted` is true.
    fn deposit(&self, now_ms: u64) -> Result<Update, Unanswered>;
    /// A retry: take a token. `granted` false means that the run must give up (reason `quota`).
    fn take(&self, now_ms: u64) -> Result<Update, Unanswered>;
    /// The quota as it stands, changing nothing (the dry run's view).
    fn peek(&self, now_ms: u64) -> Result<Update, Unanswered>;
}

/// Why a store did not answer, in one line for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// Held by other runs for longer than a run may wait: worth trying again later.
    Busy(String),
    /// Failed: a store that will not do better on the next operation.
    Failed(String),
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unanswered::Busy(why) | Unanswered::Failed(why) => f.write_str(why),
        }
    }
}

/// What an operation did: whether the retry may run (always true for a first try), the tokens
/// left after it, and a note for the log when the store had to repair the quota.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    pub granted: bool,
    pub tokens: f64,
    pub note: Option<Note>,
}

/// Something the log should warn about although the operation succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// The file held no record that `retry` writes: the bucket was reset to full.
    Damaged { path: PathBuf },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Damaged { path } => write!(
                f,
                "the quota file '{}' was damaged; it was reset to a full bucket",
                path.display()
            ),
        }
    }
}

/// Milliseconds since the Unix epoch, the time the bucket is kept in (0 before the epoch).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
