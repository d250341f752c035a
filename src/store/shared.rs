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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::quota::QuotaParams;
    use std::cell::Cell;
    use std::path::PathBuf;

    /// A store that always gives the same answer, and counts the operations it got.
    struct Fixed {
        answer: Result<Update, Unanswered>,
        asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl BucketStore for Fixed {
        fn deposit(&self, _: u64) -> Result<Update, Unanswered> {
            self.peek(0)
        }
        fn take(&self, _: u64) -> Result<Update, Unanswered> {
            self.peek(0)
        }
        fn peek(&self, _: u64) -> Result<Update, Unanswered> {
            self.asked
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.answer.clone()
        }
    }

    thread_local!(static DIRS: Cell<u32> = const { Cell::new(0) });

    /// A local store in a directory of its own, not created yet.
    fn local_store() -> (LocalStore, PathBuf) {
        let n = DIRS.with(|d| {
            d.set(d.get() + 1);
            d.get()
        });
        let dir = std::env::temp_dir().join(format!(
            "retry-shared-{}-{:?}-{n}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let params = QuotaParams {
            ratio: 0.5,
            floor: 0.0,
            cap: 2.0,
        };
        let store = LocalStore::in_dir(dir.clone(), "q", params).expect("a valid name");
        (store, dir)
    }

    fn shared(
        answer: Result<Update, Unanswered>,
        fallback: Option<LocalStore>,
    ) -> (Shared, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let asked = std::sync::Arc::default();
        let store = Fixed {
            answer,
            asked: std::sync::Arc::clone(&asked),
        };
        let shared = Shared {
            store: Box::new(store),
            fallback,
        };
        (shared, asked)
    }

    const T0: u64 = 1_764_480_000_000;

    #[test]
    fn a_store_that_fails_is_replaced_by_the_local_one_once_and_for_good() {
        let (local, dir) = local_store();
        let failed = Err(Unanswered::Failed("Redis is gone".into()));
        let (mut quota, asked) = shared(failed, Some(local));
        let first = quota.apply(Use::Take, T0);
        assert_eq!(first.fell_back.as_deref(), Some("Redis is gone"));
        // The local bucket starts full (2 tokens): the retry gets one.
        let update = first.answer.expect("the local store answers");
        assert!(update.granted);
        assert_eq!(update.tokens, 1.0);
        let second = quota.apply(Use::Take, T0);
        assert_eq!(second.fell_back, None);
        assert_eq!(second.answer.map(|u| u.tokens), Ok(0.0));
        // Redis was asked once, then never again.
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_store_that_fails_with_nothing_to_fall_back_on_is_unusable() {
        let failed = Err(Unanswered::Failed("no such file".into()));
        let (mut quota, _) = shared(failed.clone(), None);
        let applied = quota.apply(Use::Deposit, T0);
        assert_eq!(applied.fell_back, None);
        assert_eq!(applied.answer, failed);
    }

    #[test]
    fn a_busy_store_is_kept_and_its_fallback_too() {
        let (local, dir) = local_store();
        let busy = Err(Unanswered::Busy("the lock is held".into()));
        let (mut quota, asked) = shared(busy.clone(), Some(local));
        for _ in 0..2 {
            let applied = quota.apply(Use::Take, T0);
            assert_eq!(applied.fell_back, None);
            assert_eq!(applied.answer, busy);
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert!(quota.fallback.is_some());
        // Nothing was written on this machine.
        assert!(!dir.exists());
    }

    #[test]
    fn a_redis_quota_that_cannot_be_reached_is_kept_on_this_machine_from_the_start() {
        let spec: QuotaSpec = "redis://127.0.0.1:1/q".parse().expect("a valid quota");
        // Nothing in the environment: no password, the local store under /tmp (not created
        // until it is used).
        let opened = Shared::open(&spec, None, &|_| None);
        let why = opened.unreachable.expect("port 1 does not answer");
        assert!(why.contains("127.0.0.1:1"), "{why}");
        let quota = opened.shared.expect("the local store is used instead");
        assert!(quota.fallback.is_none());
    }
}
