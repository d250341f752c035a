//! What every store of the retry quota offers (docs/herd.md#shared-retry-quota): the local file
//! ([`super::file`]) and Redis ([`super::redis`]) keep the bucket of `policy::quota` and answer the
//! same three operations with the same [`Update`]; [`super::shared`] picks one and falls back from
//! Redis to the file.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::policy::quota::{Bucket, QuotaParams};
use crate::policy::throttle::{Admission, Ask, Counted, ThrottleSpec, Window, admit};

/// A store of one quota's bucket, and of its throttle's figures when runs use `--throttle`.
pub trait BucketStore {
    /// One exchange, done in one atomic step: the throttle's count and decision (if any), then
    /// the operation on the bucket unless the try was held back.
    fn exchange(&self, exchange: &Exchange, now_ms: u64) -> Result<Update, Unanswered>;

    /// A first try: deposit the ratio. `granted` is true.
    fn deposit(&self, now_ms: u64) -> Result<Update, Unanswered> {
        self.exchange(&Exchange::plain(Op::Deposit), now_ms)
    }
    /// A retry: take a token. `granted` false means that the run must give up (reason `quota`).
    fn take(&self, now_ms: u64) -> Result<Update, Unanswered> {
        self.exchange(&Exchange::plain(Op::Take), now_ms)
    }
    /// The quota as it stands, changing nothing (the dry run's view).
    fn peek(&self, now_ms: u64) -> Result<Update, Unanswered> {
        self.exchange(&Exchange::plain(Op::Peek), now_ms)
    }
}

/// What an exchange does with the bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A run's first try that runs deposits the ratio.
    Deposit,
    /// A retry takes a token.
    Take,
    /// Reads the quota (and the throttle's figures) and changes nothing.
    Peek,
    /// Only counts the outcome of the run's last try, as the run ends.
    Count,
}

impl Op {
    /// The operation as the Redis script names it.
    pub fn word(self) -> &'static str {
        match self {
            Op::Deposit => "deposit",
            Op::Take => "take",
            Op::Peek => "peek",
            Op::Count => "count",
        }
    }
}

/// One exchange of a run with the store.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exchange {
    pub op: Op,
    /// With `--throttle`: the outcome to count and the draw that decides the next try.
    pub throttle: Option<Throttled>,
}

impl Exchange {
    /// An exchange without a throttle.
    pub fn plain(op: Op) -> Exchange {
        Exchange { op, throttle: None }
    }
}

/// The throttle's part of an exchange.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttled {
    pub spec: ThrottleSpec,
    /// The outcome of the run's last try that ran, not counted yet.
    pub counted: Option<Counted>,
    /// Uniform in `[0, 1)`: below `p`, the try that `Deposit` or `Take` is for is held back.
    pub draw: f64,
}

impl Throttled {
    /// The store's step on its `window` at `now_ms`: counts the outcome, then, for an
    /// operation that a try goes with, decides on the try (`Peek` only reads the figures).
    /// `None` for `Count`.
    ///
    /// The figures are counted over the record's own window: a record that has none yet takes
    /// the run's, and a run that names another counts into them as they are.
    pub fn step(&self, op: Op, window: &mut Window, now_ms: u64) -> Option<Admission> {
        if window.window_ms == 0 {
            window.window_ms = self.spec.window_ms();
        }
        let spec = ThrottleSpec {
            window: Duration::from_millis(window.window_ms),
            ..self.spec
        };
        let window_ms = spec.window_ms();
        if let Some(counted) = self.counted.filter(|_| op != Op::Peek) {
            window.count(counted, window_ms, now_ms);
        }
        match op {
            Op::Deposit | Op::Take => {
                let ask = Ask {
                    spec,
                    draw: self.draw,
                };
                Some(admit(window, &ask, now_ms))
            }
            Op::Peek => {
                let mut seen = *window;
                seen.advance(window_ms, now_ms);
                let figures = seen.figures(window_ms, now_ms);
                let p = spec.p(figures);
                Some(Admission {
                    figures,
                    p,
                    held: false,
                    window: spec.window,
                })
            }
            Op::Count => None,
        }
    }
}

/// What one exchange's arithmetic came to: whether the try may run, the tokens left, and the
/// throttle's decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Applied {
    pub granted: bool,
    pub tokens: f64,
    pub admission: Option<Admission>,
}

/// One exchange on a quota's `bucket` and its throttle's `window` at `now_ms`, as a store does
/// it in one atomic step: the throttle counts and decides first, then the bucket refills and
/// takes the operation unless the try was held back. `Peek` changes neither. The file store
/// runs it under its lock; the Redis script is its twin in Lua, and a test drives both with
/// the same operations and compares every answer.
pub fn apply(
    exchange: &Exchange,
    params: &QuotaParams,
    bucket: &mut Bucket,
    window: &mut Window,
    now_ms: u64,
) -> Applied {
    if exchange.op == Op::Peek {
        let (mut bucket, mut window) = (*bucket, *window);
        let admission = exchange
            .throttle
            .and_then(|t| t.step(Op::Peek, &mut window, now_ms));
        bucket.refill(params, now_ms);
        let tokens = bucket.tokens;
        return Applied {
            granted: bucket.take(params, now_ms),
            tokens,
            admission,
        };
    }
    let admission = exchange
        .throttle
        .and_then(|t| t.step(exchange.op, window, now_ms));
    bucket.refill(params, now_ms);
    let granted = match exchange.op {
        _ if admission.is_some_and(|a| a.held) => false,
        Op::Deposit => {
            bucket.deposit(params, now_ms);
            true
        }
        Op::Take => bucket.take(params, now_ms),
        Op::Peek | Op::Count => true,
    };
    Applied {
        granted,
        tokens: bucket.tokens,
        admission,
    }
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
/// left after it, and a note for the log when the store had to repair the quota. A try that
/// the throttle held back is not granted, and takes and deposits nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    pub granted: bool,
    pub tokens: f64,
    pub note: Option<Note>,
    /// With `--throttle`: what it decided, on which figures.
    pub admission: Option<Admission>,
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
