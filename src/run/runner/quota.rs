//! The retry quota a run shares with others (`--quota`): a first try's deposit, a retry's
//! token, and what the log says of them; a store that fails is left, and the run's own limits
//! still hold.

use std::time::SystemTime;

use crate::policy::quota::{QuotaRefusal, QuotaSpec};
use crate::report::event::{Event, QuotaAction, Warning};
use crate::report::log::Log;
use crate::store::quota::{Unanswered, Update, unix_ms};
use crate::store::shared::{Shared, Use as QuotaUse};

/// A retry quota and the store that keeps it.
pub struct SharedQuota {
    pub spec: QuotaSpec,
    pub store: Shared,
}

/// The run's use of the shared retry quota.
pub struct Quota {
    /// The shared retry quota, while its store answers; dropped (with a warning) when it fails,
    /// and only the run's own limits apply then.
    shared: Option<SharedQuota>,
}

impl Quota {
    pub fn new(shared: Option<SharedQuota>) -> Quota {
        Quota { shared }
    }

    /// Deposits a first try's share in the quota, or takes a token for a retry: the refusal
    /// when there is none. A store that fails is warned about once and left: the run's own
    /// limits still hold.
    pub fn use_quota(&mut self, what: QuotaUse, log: &mut Log) -> Option<QuotaRefusal> {
        let quota = self.shared.as_mut()?;
        let applied = quota.store.apply(what, unix_ms(SystemTime::now()));
        let (shown, params) = (quota.spec.shown(), quota.spec.params);
        if let Some(fallback) = applied.fell_back {
            // Redis gone or refusing: the same bucket, kept on this machine from now on.
            let warning = Warning::of_fallback(&quota.spec, fallback);
            log.warn(warning);
        }
        let refused = |tokens| QuotaRefusal {
            quota: shown.clone(),
            tokens,
            params,
        };
        match applied.answer {
            Ok(update) => {
                let refusal = (!update.granted).then(|| refused(Some(update.tokens)));
                quota_updated(log, what, shown, update);
                refusal
            }
            // Held by other runs for longer than a run may wait, as when many retry at once on
            // a loaded machine: a first try goes on without depositing, and a retry counts it as
            // no token, so that the quota holds when it is needed most.
            Err(Unanswered::Busy(why)) => match what {
                QuotaUse::Deposit => {
                    log.warn(Warning::QuotaBusy { quota: shown, why });
                    None
                }
                QuotaUse::Take => Some(refused(None)),
            },
            Err(Unanswered::Failed(why)) => {
                log.warn(Warning::QuotaUnusable { quota: shown, why });
                self.shared = None;
                None
            }
        }
    }
}

/// Reports what a quota operation did.
fn quota_updated(log: &mut Log, what: QuotaUse, quota: String, update: Update) {
    if let Some(note) = update.note {
        log.warn(Warning::QuotaNote(note));
    }
    let action = match what {
        QuotaUse::Deposit => QuotaAction::FirstTry,
        QuotaUse::Take => QuotaAction::Retry,
    };
    log.emit(Event::Quota {
        quota,
        action,
        granted: update.granted,
        tokens: update.tokens,
    });
}
