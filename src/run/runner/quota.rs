//! The retry quota a run shares with others (`--quota`), and its throttle (`--throttle`): the
//! exchange before each try (a first try's deposit, a retry's token, the throttle's decision),
//! the last try's outcome counted as the run ends, and what the log says of them; a store that
//! fails is left, and the run's own limits still hold.

use std::time::SystemTime;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::policy::Decision;
use crate::policy::quota::{QuotaRefusal, QuotaSpec};
use crate::policy::throttle::{Admission, Counted, ThrottleSpec};
use crate::report::event::{Event, HeldReport, QuotaAction, Warning};
use crate::report::log::Log;
use crate::store::quota::{Exchange, Op, Throttled, Unanswered, Update, unix_ms};
use crate::store::shared::Shared;

/// A retry quota and the store that keeps it.
pub struct SharedQuota {
    pub spec: QuotaSpec,
    pub store: Shared,
}

/// What the exchange before a try decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Admit {
    /// The try runs.
    Run,
    /// The throttle held the try back: it does not run.
    Held(Admission),
    /// The quota had no token for the retry: the run gives up.
    Refused(QuotaRefusal),
}

/// What the store answered an exchange.
enum Answer {
    Update(Update),
    /// Held by other runs for longer than a run may wait.
    Busy,
    /// No store (any more).
    None,
}

/// The throttle's state in a run.
struct Throttle {
    spec: ThrottleSpec,
    /// The draws that decide the tries, a stream of their own: the waits' draws stay those of
    /// the dry run.
    draws: StdRng,
    /// The outcome of the last try that ran, not sent to the store yet.
    pending: Option<Counted>,
    /// The quota's record counts over a window other than the run's: said once.
    told_window: bool,
}

/// The run's use of the shared retry quota.
pub struct Quota {
    /// The shared retry quota, while its store answers; dropped (with a warning) when it fails,
    /// and only the run's own limits apply then.
    shared: Option<SharedQuota>,
    /// `--throttle`, while the store it keeps its figures in answers.
    throttle: Option<Throttle>,
    /// Whether a try of the run was let through: until then the run is new to the quota, and
    /// its first try that runs deposits rather than takes.
    admitted: bool,
    /// Whether the last try that ran failed: only the try that retries it takes a token. A try
    /// after a success (the next of a `--consecutive` streak, of a `--repeat`) deposits, as the
    /// first try of a run does.
    after_failure: bool,
}

/// What the throttle's stream of draws is seeded with: the run's seed, mixed so that it never
/// repeats the waits' stream.
fn draw_seed(seed: u64) -> u64 {
    seed ^ 0x7468_726f_7474_6c65
}

impl Quota {
    pub fn new(shared: Option<SharedQuota>, throttle: Option<ThrottleSpec>) -> Quota {
        let throttle = throttle.filter(|_| shared.is_some()).map(|spec| Throttle {
            spec,
            draws: StdRng::seed_from_u64(draw_seed(0)),
            pending: None,
            told_window: false,
        });
        Quota {
            shared,
            throttle,
            admitted: false,
            after_failure: false,
        }
    }

    /// The run starts with `seed`: the throttle's draws follow from it.
    pub fn start(&mut self, seed: u64) {
        if let Some(throttle) = &mut self.throttle {
            throttle.draws = StdRng::seed_from_u64(draw_seed(seed));
        }
    }

    /// The throttle the run uses, while its store answers.
    pub fn throttle(&self) -> Option<ThrottleSpec> {
        self.throttle.as_ref().map(|t| t.spec)
    }

    /// The quota's name as the log shows it.
    pub fn shown(&self) -> Option<String> {
        self.shared.as_ref().map(|q| q.spec.shown())
    }

    /// Counts how the try that ran ended, sent with the next exchange; `failed` when it did
    /// not succeed, so that the next try is a retry.
    pub fn ended(&mut self, counted: Option<Counted>, failed: bool) {
        self.after_failure = failed;
        if let Some(throttle) = &mut self.throttle {
            throttle.pending = counted;
        }
    }

    /// The exchange before a try: the throttle's decision, then the deposit of a run's first
    /// try that runs (or of a try after a success), or a retry's token. A store that fails is
    /// warned about once and left: the run's own limits still hold, and the throttle holds
    /// nothing back.
    pub fn before_try(&mut self, log: &mut Log) -> Admit {
        let (op, action) = match (self.admitted, self.after_failure) {
            (false, _) => (Op::Deposit, QuotaAction::FirstTry),
            (true, false) => (Op::Deposit, QuotaAction::AfterSuccess),
            (true, true) => (Op::Take, QuotaAction::Retry),
        };
        let update = match self.exchange(op, action, log) {
            Answer::Update(update) => update,
            Answer::Busy if op == Op::Take => return Admit::Refused(self.refusal(None)),
            Answer::Busy | Answer::None => return Admit::Run,
        };
        self.tell_window(update.admission.as_ref(), log);
        if let Some(admission) = update.admission.filter(|a| a.held) {
            return Admit::Held(admission);
        }
        if !update.granted && op == Op::Take {
            return Admit::Refused(self.refusal(Some(update.tokens)));
        }
        self.admitted = true;
        Admit::Run
    }

    /// Warns once when the quota's record counts over another window than the run named: the
    /// record keeps its own, and the run decides on its figures as they are.
    fn tell_window(&mut self, admission: Option<&Admission>, log: &mut Log) {
        let (Some(throttle), Some(admission)) = (self.throttle.as_mut(), admission) else {
            return;
        };
        if admission.window == throttle.spec.window || throttle.told_window {
            return;
        }
        throttle.told_window = true;
        let quota = self
            .shared
            .as_ref()
            .map(|q| q.spec.shown())
            .unwrap_or_default();
        log.warn(Warning::ThrottleWindow {
            quota,
            own: admission.window,
            asked: throttle.spec.window,
        });
    }

    /// As the run ends: the last try's outcome, counted in one more exchange.
    pub fn finish(&mut self, log: &mut Log) {
        if self.throttle.as_ref().is_some_and(|t| t.pending.is_some()) {
            let _ = self.exchange(Op::Count, QuotaAction::Counted, log);
        }
    }

    fn refusal(&self, tokens: Option<f64>) -> QuotaRefusal {
        let spec = self.shared.as_ref().map(|q| &q.spec);
        QuotaRefusal {
            quota: spec.map(QuotaSpec::shown).unwrap_or_default(),
            tokens,
            params: spec.map(|s| s.params).unwrap_or_default(),
        }
    }

    /// Sends one exchange and reports it.
    fn exchange(&mut self, op: Op, action: QuotaAction, log: &mut Log) -> Answer {
        let Some(quota) = self.shared.as_mut() else {
            return Answer::None;
        };
        let throttle = self.throttle.as_mut().map(|t| Throttled {
            spec: t.spec,
            counted: t.pending.take(),
            draw: t.draws.random::<f64>(),
        });
        let exchange = Exchange { op, throttle };
        let applied = quota.store.apply(&exchange, unix_ms(SystemTime::now()));
        let shown = quota.spec.shown();
        if let Some(fallback) = applied.fell_back {
            // Redis gone or refusing: the same bucket, kept on this machine from now on; the
            // throttle's figures were the fleet's, and are not kept on one machine.
            log.warn(Warning::of_fallback(&quota.spec, fallback));
            self.throttle = None;
        }
        match applied.answer {
            Ok(mut update) => {
                if self.throttle.is_none() {
                    update.admission = None;
                }
                quota_updated(log, action, shown, &update, self.throttle());
                Answer::Update(update)
            }
            // Held by other runs for longer than a run may wait, as when many retry at once on
            // a loaded machine: a first try goes on without depositing, and a retry counts it as
            // no token, so that the quota holds when it is needed most.
            Err(Unanswered::Busy(why)) => {
                match op {
                    Op::Deposit => log.warn(Warning::QuotaBusy { quota: shown, why }),
                    Op::Count => log.warn(Warning::CountBusy { quota: shown, why }),
                    Op::Take | Op::Peek => {}
                }
                Answer::Busy
            }
            Err(Unanswered::Failed(why)) => {
                log.warn(Warning::QuotaUnusable { quota: shown, why });
                self.shared = None;
                self.throttle = None;
                Answer::None
            }
        }
    }
}

/// The report of try `attempt`, held back on `admission`, with what follows it.
pub fn held_report(
    quota: &Quota,
    attempt: u64,
    admission: Admission,
    decision: Decision,
) -> HeldReport {
    HeldReport {
        attempt,
        quota: quota.shown().unwrap_or_default(),
        spec: quota.throttle().unwrap_or_default(),
        admission,
        decision,
    }
}

/// Reports what a quota operation did.
fn quota_updated(
    log: &mut Log,
    action: QuotaAction,
    quota: String,
    update: &Update,
    throttle: Option<ThrottleSpec>,
) {
    if let Some(note) = &update.note {
        log.warn(Warning::QuotaNote(note.clone()));
    }
    // A try held back touched no token: its own event says why.
    if update.admission.is_some_and(|a| a.held) {
        return;
    }
    log.emit(Event::Quota {
        quota,
        action,
        granted: update.granted,
        tokens: update.tokens,
        throttle: throttle.zip(update.admission),
    });
}
