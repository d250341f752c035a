//! The store a run's `--quota` names, opened once, and the one place where a Redis quota falls
//! back to the same bucket on this machine (docs/herd.md#shared-retry-quota): when Redis cannot be
//! reached at the start, and when it stops answering during the run. What happened is returned as
//! facts, for the runner to report; nothing here writes to the log.

use std::ffi::OsString;
use std::time::Instant;

use crate::policy::quota::{QuotaSpec, QuotaStore};
use crate::policy::throttle::ThrottleSpec;
use crate::store::file::LocalStore;
use crate::store::quota::{BucketStore, Exchange, Op, Throttled, Unanswered, Update};
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

/// The store `--quota` names: the local file, or the quota on a Redis server, not connected
/// yet (its first operation connects), whose exchanges never wait past `until` (the end of the
/// run's budget).
fn connect(spec: &QuotaSpec, until: Option<Instant>, var: Env<'_>) -> Result<Primary, String> {
    match &spec.store {
        QuotaStore::Local => Ok(Primary::Plain(Box::new(local(spec, var)?))),
        QuotaStore::Redis(address) => {
            let settings = Settings::from_env(var, until);
            let store = RedisStore::open(address, spec.params, settings);
            Ok(Primary::Redis(Box::new(store)))
        }
    }
}

/// Why the quota's store did not answer the dry run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    /// Why, in one line.
    pub why: String,
    /// The code word when Redis refused the password or the user: a misconfiguration.
    pub refused: Option<&'static str>,
}

/// The quota's tokens now, and the throttle's figures when `throttle` is given, read without
/// changing anything (the dry run's view); Redis is asked when it names Redis, with no fallback.
pub fn peek(
    spec: &QuotaSpec,
    throttle: Option<ThrottleSpec>,
    now_ms: u64,
    var: Env<'_>,
) -> Result<Update, Unread> {
    let unread = |why| Unread { why, refused: None };
    let store = connect(spec, None, var).map_err(unread)?;
    let exchange = Exchange {
        op: Op::Peek,
        throttle: throttle.map(|spec| Throttled {
            spec,
            counted: None,
            draw: 1.0,
        }),
    };
    match store.apply(&exchange, now_ms) {
        Ok(update) => Ok(update),
        Err(NoAnswer::Busy(why)) => Err(unread(why)),
        Err(NoAnswer::Failed { why, refused }) => Err(Unread { why, refused }),
    }
}

/// The store a run uses first.
enum Primary {
    /// A store that refuses no one: the local file.
    Plain(Box<dyn BucketStore + Send>),
    /// The quota on a Redis server, which may refuse the password or the user.
    Redis(Box<RedisStore>),
}

/// Why a store did not answer: [`Unanswered`], and for Redis whether it refused the password
/// or the user.
enum NoAnswer {
    Busy(String),
    Failed {
        why: String,
        refused: Option<&'static str>,
    },
}

impl From<Unanswered> for NoAnswer {
    fn from(e: Unanswered) -> NoAnswer {
        match e {
            Unanswered::Busy(why) => NoAnswer::Busy(why),
            Unanswered::Failed(why) => NoAnswer::Failed { why, refused: None },
        }
    }
}

impl From<NoAnswer> for Unanswered {
    fn from(e: NoAnswer) -> Unanswered {
        match e {
            NoAnswer::Busy(why) => Unanswered::Busy(why),
            NoAnswer::Failed { why, .. } => Unanswered::Failed(why),
        }
    }
}

impl Primary {
    /// The store's answer; a failure of Redis says whether it was a refusal.
    fn apply(&self, exchange: &Exchange, now_ms: u64) -> Result<Update, NoAnswer> {
        match self {
            Primary::Plain(store) => store.exchange(exchange, now_ms).map_err(NoAnswer::from),
            Primary::Redis(store) => store.exchange(exchange).map_err(|e| NoAnswer::Failed {
                refused: e.refusal(),
                why: e.to_string(),
            }),
        }
    }
}

/// The quota's store, with the same bucket on this machine ready for when Redis goes away.
pub struct Shared {
    store: Primary,
    /// For a Redis quota: the local store, used once Redis cannot be reached.
    fallback: Option<LocalStore>,
    /// Whether the store has answered in this run.
    answered: bool,
    /// The run left its store for the local one: from then on the throttle is off, and only
    /// the bucket is asked (fail open: the local figures are not the fleet's).
    fell_back: bool,
}

/// Why a run left the quota's store for the local one, from now on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// Why, in one line.
    pub why: String,
    /// The code word (`WRONGPASS`, `NOAUTH`, `NOPERM`) when Redis refused the password or the
    /// user: a misconfiguration, not an outage.
    pub refused: Option<&'static str>,
    /// Whether the store had answered earlier in the run.
    pub answered_before: bool,
}

/// What one operation found.
pub struct Applied {
    /// Why Redis stopped answering, when the local store answered in its place, from now on.
    pub fell_back: Option<Fallback>,
    /// The store's answer. `Unanswered::Failed` means that no store is left: the run goes on
    /// without the quota.
    pub answer: Result<Update, Unanswered>,
}

impl Shared {
    /// Opens the store of `spec`, or says why no store can be used (the run's own limits
    /// still apply). A Redis quota sends nothing yet (its address was read when `--quota`
    /// was), and keeps the local store ready for when Redis does not answer.
    pub fn open(spec: &QuotaSpec, until: Option<Instant>, var: Env<'_>) -> Result<Shared, String> {
        let redis = matches!(spec.store, QuotaStore::Redis(_));
        let store = connect(spec, until, var)?;
        Ok(Shared {
            store,
            fallback: redis.then(|| local(spec, var).ok()).flatten(),
            answered: false,
            fell_back: false,
        })
    }

    /// One exchange (a deposit, a take, the throttle's count). A store that fails is replaced
    /// by the fallback, once, and the exchange done there for the bucket alone: the throttle is
    /// off from the first exchange that failed to the end of the run, and the bucket's answer
    /// stands (a run never gives up `quota` while the bucket it asked has a token).
    pub fn apply(&mut self, exchange: &Exchange, now_ms: u64) -> Applied {
        if self.fell_back {
            let bucket_only = Exchange::plain(exchange.op);
            return Applied::answered(
                self.store
                    .apply(&bucket_only, now_ms)
                    .map_err(Unanswered::from),
            );
        }
        let answer = self.store.apply(exchange, now_ms);
        self.answered |= answer.is_ok();
        let (why, refused) = match answer {
            Err(NoAnswer::Failed { why, refused }) if self.fallback.is_some() => (why, refused),
            answer => return Applied::answered(answer.map_err(Unanswered::from)),
        };
        if let Some(local) = self.fallback.take() {
            self.store = Primary::Plain(Box::new(local));
        }
        self.fell_back = true;
        let bucket_only = Exchange::plain(exchange.op);
        Applied {
            fell_back: Some(Fallback {
                why,
                refused,
                answered_before: self.answered,
            }),
            answer: self
                .store
                .apply(&bucket_only, now_ms)
                .map_err(Unanswered::from),
        }
    }
}

impl Applied {
    /// The answer of the store the run was using.
    fn answered(answer: Result<Update, Unanswered>) -> Applied {
        Applied {
            fell_back: None,
            answer,
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
        fn exchange(&self, _: &Exchange, _: u64) -> Result<Update, Unanswered> {
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
            store: Primary::Plain(Box::new(store)),
            fallback,
            answered: false,
            fell_back: false,
        };
        (shared, asked)
    }

    const T0: u64 = 1_764_480_000_000;

    #[test]
    fn a_store_that_fails_is_replaced_by_the_local_one_once_and_for_good() {
        let (local, dir) = local_store();
        let failed = Err(Unanswered::Failed("Redis is gone".into()));
        let (mut quota, asked) = shared(failed, Some(local));
        let first = quota.apply(&Exchange::plain(Op::Take), T0);
        let fell_back = first.fell_back.expect("the local store took over");
        assert_eq!(fell_back.why, "Redis is gone");
        assert_eq!(
            (fell_back.refused, fell_back.answered_before),
            (None, false)
        );
        // The local bucket starts full (2 tokens): the retry gets one.
        let update = first.answer.expect("the local store answers");
        assert!(update.granted);
        assert_eq!(update.tokens, 1.0);
        let second = quota.apply(&Exchange::plain(Op::Take), T0);
        assert_eq!(second.fell_back, None);
        assert_eq!(second.answer.map(|u| u.tokens), Ok(0.0));
        // Redis was asked once, then never again.
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn after_a_fallback_the_throttle_is_off_and_the_buckets_answer_stands() {
        use crate::policy::throttle::Counted;
        use crate::policy::throttle::ThrottleSpec;
        use crate::store::quota::Throttled;
        let (local, dir) = local_store();
        // A draw of 0 holds any try whose p is above 0 back.
        let throttled = |op, counted| Exchange {
            op,
            throttle: Some(Throttled {
                spec: ThrottleSpec::default(),
                counted,
                draw: 0.0,
            }),
        };
        // This machine's own figures say every try failed: on them, p is at its most.
        for _ in 0..50 {
            let _ = local.exchange(&throttled(Op::Count, Some(Counted::Refused)), T0);
        }
        let failed = Err(Unanswered::Failed("the connection was closed".into()));
        let (mut quota, _) = shared(failed, Some(local));
        let throttled = |op| throttled(op, None);
        for _ in 0..2 {
            let applied = quota.apply(&throttled(Op::Take), T0);
            let update = applied.answer.expect("the local bucket answers");
            assert!(update.granted, "the bucket had a token: {update:?}");
            assert_eq!(
                update.admission, None,
                "no throttle on this machine's figures"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_store_that_fails_with_nothing_to_fall_back_on_is_unusable() {
        let failed = Err(Unanswered::Failed("no such file".into()));
        let (mut quota, _) = shared(failed.clone(), None);
        let applied = quota.apply(&Exchange::plain(Op::Deposit), T0);
        assert_eq!(applied.fell_back, None);
        assert_eq!(applied.answer, failed);
    }

    #[test]
    fn a_busy_store_is_kept_and_its_fallback_too() {
        let (local, dir) = local_store();
        let busy = Err(Unanswered::Busy("the lock is held".into()));
        let (mut quota, asked) = shared(busy.clone(), Some(local));
        for _ in 0..2 {
            let applied = quota.apply(&Exchange::plain(Op::Take), T0);
            assert_eq!(applied.fell_back, None);
            assert_eq!(applied.answer, busy);
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert!(quota.fallback.is_some());
        // Nothing was written on this machine.
        assert!(!dir.exists());
    }

    #[test]
    fn a_redis_quota_is_opened_without_a_word_sent_and_falls_back_at_its_first_decision() {
        let spec: QuotaSpec = "redis://127.0.0.1:1/q".parse().expect("a valid quota");
        // No password; the local store in a directory of the test's own.
        let (_, dir) = local_store();
        std::fs::create_dir(&dir).expect("a new directory");
        let runtime = dir.clone().into_os_string();
        let var = move |name: &str| (name == "XDG_RUNTIME_DIR").then(|| runtime.clone());
        let mut quota = Shared::open(&spec, None, &var).expect("a store");
        assert!(quota.fallback.is_some());
        let Some(fallback) = quota.apply(&Exchange::plain(Op::Deposit), T0).fell_back else {
            panic!("port 1 does not answer")
        };
        assert!(fallback.why.contains("127.0.0.1:1"), "{}", fallback.why);
        assert_eq!((fallback.refused, fallback.answered_before), (None, false));
        let _ = std::fs::remove_dir_all(dir);
    }
}
