//! The store a run's `--quota` names, opened once, and the one place where a Redis quota falls
//! back to the same bucket on this machine (spec 15.3): when Redis cannot be reached at the
//! start, and when it stops answering during the run. What happened is returned as facts, for
//! the runner to report; nothing here writes to the log.

use std::ffi::OsString;
use std::time::Instant;

use crate::policy::quota::{QuotaSpec, QuotaStore};
use crate::store::file::LocalStore;
use crate::store::quota::{BucketStore, Unanswered, Update};
use crate::store::redis::{RedisStore, Settings};

/// Reads one environment variable.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// What a run does with the quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// A first try deposits its share.
    Deposit,
    /// A retry takes a token.
    Take,
}

/// The local store of the quota's name, under the directory the environment gives.
pub fn local(spec: &QuotaSpec, var: Env<'_>) -> Result<LocalStore, String> {
    LocalStore::new(&spec.name, spec.params, var).map_err(|e| e.to_string())
}

/// The store `--quota` names: the local file, or a connection to Redis, which never waits past
/// `until` (the end of the run's budget).
pub fn connect(
    spec: &QuotaSpec,
    until: Option<Instant>,
    var: Env<'_>,
) -> Result<Box<dyn BucketStore + Send>, String> {
    match &spec.store {
        QuotaStore::Local => Ok(Box::new(local(spec, var)?)),
        QuotaStore::Redis { url } => {
            let settings = Settings::from_env(var, until);
            match RedisStore::connect_with(url, &spec.name, spec.params, settings) {
                Ok(store) => Ok(Box::new(store)),
                Err(e) => Err(e.to_string()),
            }
        }
    }
}

/// The quota's tokens now, read without taking or adding any (the dry run's view); Redis is
/// asked when it names Redis, with no fallback.
pub fn peek(spec: &QuotaSpec, now_ms: u64, var: Env<'_>) -> Result<f64, String> {
    let store = connect(spec, None, var)?;
    let update = store.peek(now_ms).map_err(|e| e.to_string())?;
    Ok(update.tokens)
}

/// The quota's store, with the same bucket on this machine ready for when Redis goes away.
pub struct Shared {
    store: Box<dyn BucketStore + Send>,
    /// For a Redis quota: the local store, used once Redis cannot be reached.
    fallback: Option<LocalStore>,
}

/// What opening the quota found.
pub struct Opened {
    /// Why Redis could not be reached, when the local store is used in its place from the
    /// start.
    pub unreachable: Option<String>,
    /// The store, or why no store can be used (the run's own limits still apply).
    pub shared: Result<Shared, String>,
}

/// What one operation found.
pub struct Applied {
    /// Why Redis stopped answering, when the local store answered in its place, from now on.
    pub fell_back: Option<String>,
    /// The store's answer. `Unanswered::Failed` means that no store is left: the run goes on
    /// without the quota.
    pub answer: Result<Update, Unanswered>,
}

impl Shared {
    /// Opens the store of `spec`. A Redis quota keeps the local store ready for later, or uses
    /// it at once when Redis cannot be reached.
    pub fn open(spec: &QuotaSpec, until: Option<Instant>, var: Env<'_>) -> Opened {
        let redis = matches!(spec.store, QuotaStore::Redis { .. });
        match connect(spec, until, var) {
            Ok(store) => Opened {
                unreachable: None,
                shared: Ok(Shared {
                    store,
                    fallback: redis.then(|| local(spec, var).ok()).flatten(),
                }),
            },
            Err(why) if redis => Opened {
                unreachable: Some(why),
                shared: local(spec, var).map(Shared::local),
            },
            Err(why) => Opened {
                unreachable: None,
                shared: Err(why),
            },
        }
    }

    /// A local store with nothing to fall back on.
    pub fn local(store: LocalStore) -> Shared {
        Shared {
            store: Box::new(store),
            fallback: None,
        }
    }

    /// Deposits or takes. A store that fails is replaced by the fallback, once, and the
    /// operation done there.
    pub fn apply(&mut self, what: Use, now_ms: u64) -> Applied {
        let answer = self.once(what, now_ms);
        match (answer, self.fallback.take()) {
            (Err(Unanswered::Failed(why)), Some(local)) => {
                self.store = Box::new(local);
                Applied {
                    fell_back: Some(why),
                    answer: self.once(what, now_ms),
                }
            }
            (answer, fallback) => {
                self.fallback = fallback;
                Applied {
                    fell_back: None,
                    answer,
                }
            }
        }
    }

    fn once(&self, what: Use, now_ms: u64) -> Result<Update, Unanswered> {
        match what {
            Use::Deposit => self.store.deposit(now_ms),
            Use::Take => self.store.take(now_ms),
        }
    }
}
