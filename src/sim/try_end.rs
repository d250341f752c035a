//! How a simulated try ends for its client: the success, or the decision that a real run makes
//! after a failure (the wait, the quota's token, or giving up, and why), the throttle's count of
//! the outcome; and what the clients did, counted as they finish.

use rand::rngs::StdRng;

use crate::policy::quota::{Bucket, QuotaParams, QuotaRefusal};
use crate::policy::throttle::Counted;
use crate::policy::{Decision, Outcome, Verdict};

use super::admission::Store;
use super::client::{Cause, Client, Failures, Phase};
use super::clock::{millis, nanos};

/// What the clients did, beyond the tries.
#[derive(Default)]
pub(super) struct Totals {
    pub(super) failures: Failures,
    /// Runs that arrived, every wave's.
    pub(super) arrived: u32,
    pub(super) succeeded: u32,
    pub(super) gave_up: Vec<(&'static str, u32)>,
    pub(super) last_finish: u64,
    /// Clients still going when the tries ran out.
    pub(super) unfinished: u32,
    /// Clients whose next event would come past the clock's end.
    pub(super) past_clock: u32,
    /// Runs of a wave left out, as the most clients were under way.
    pub(super) turned_away: u64,
    /// Runs that arrived once `p` had recovered after the outage, and those of them that
    /// succeeded.
    pub(super) after_recovery: u32,
    pub(super) succeeded_after_recovery: u32,
}

impl Totals {
    pub(super) fn gave_up(&mut self, word: &'static str) {
        match self.gave_up.iter_mut().find(|(w, _)| *w == word) {
            Some((_, n)) => *n = n.saturating_add(1),
            None => self.gave_up.push((word, 1)),
        }
    }

    /// `client`'s run succeeded.
    fn succeeded(&mut self, client: &Client<'_>) {
        self.succeeded = self.succeeded.saturating_add(1);
        if client.after_recovery {
            self.succeeded_after_recovery = self.succeeded_after_recovery.saturating_add(1);
        }
    }
}

/// The reason a run gives up when the quota has no token (`GiveUp::Quota`'s word).
pub(super) const GIVE_UP_QUOTA: &str = "quota";

/// The reason a run gives up when its last try was held back.
const GIVE_UP_HELD: &str = "held";

/// The end of a client's try at `now`: success, or the decision a real run makes after a
/// transient failure, then the quota's token for the retry. The throttle's window counts the
/// outcome: accepted when the dependency answered for good, refused when it failed
/// transiently. Returns when its next try starts.
pub(super) fn decide(
    client: &mut Client<'_>,
    now: u64,
    rng: &mut StdRng,
    quota: Option<&mut (QuotaParams, Bucket)>,
    throttle: Option<&mut Store>,
    tally: &mut Totals,
) -> Option<u64> {
    let Err(why) = client.result else {
        if let Some(store) = throttle {
            store.count(Counted::Accepted, now);
        }
        tally.succeeded(client);
        return done(client);
    };
    tally.failures.count(why);
    let now_since_start = client.elapsed(now);
    let (transient, decision) = match why {
        // A timeout is an outcome a real run sees too: it is classified as one would
        // (`--stop-on timeout` makes it permanent).
        Cause::Timeout => {
            let (verdict, decision) =
                client
                    .schedule
                    .after_try(Outcome::Timeout, now_since_start, rng);
            (matches!(verdict, Verdict::Transient(_)), decision)
        }
        // What the dependency refused is a failure a real run would retry, as the dry run
        // assumes: which exit statuses those are is the classification options' business.
        _ => (
            true,
            client
                .schedule
                .after_transient_failure(now_since_start, rng),
        ),
    };
    if let Some(store) = throttle {
        let counted = if transient {
            Counted::Refused
        } else {
            Counted::Accepted
        };
        store.count(counted, now);
    }
    // As in a real run, the token is taken once the retry is decided; without one the run
    // gives up at once, reason `quota`.
    let decision = decision.confirmed(true, || {
        let (params, bucket) = quota?;
        (!bucket.take(params, millis(now))).then(|| QuotaRefusal {
            quota: String::new(),
            tokens: Some(bucket.tokens),
            params: *params,
        })
    });
    match decision {
        Decision::Retry(wait) => {
            client.phase = Phase::Start;
            Some(now.saturating_add(nanos(wait.delay)))
        }
        Decision::GiveUp(why) => {
            tally.gave_up(why.word());
            done(client)
        }
        // After a failure the schedule retries or gives up.
        Decision::Succeed => {
            tally.succeeded(client);
            done(client)
        }
        Decision::Stop(_) => unreachable!("the schedule never stops a repeat"),
    }
}

/// After a try held back at `now`: the wait that follows a failure, or, when the tries or the
/// budget are spent, the run gives up, reason `held`.
pub(super) fn after_held(
    client: &mut Client<'_>,
    now: u64,
    rng: &mut StdRng,
    tally: &mut Totals,
) -> Option<u64> {
    match client
        .schedule
        .after_transient_failure(client.elapsed(now), rng)
    {
        Decision::Retry(wait) => Some(now.saturating_add(nanos(wait.delay))),
        // After a failure the schedule retries or gives up: it gave up.
        _ => {
            tally.gave_up(GIVE_UP_HELD);
            done(client)
        }
    }
}

/// The client has succeeded or given up: it has no next event.
pub(super) fn done(client: &mut Client<'_>) -> Option<u64> {
    client.phase = Phase::Done;
    None
}

/// Ends the client's try at once (a phase the model does not have).
pub(super) fn end_now(client: &mut Client<'_>, now: u64) -> Option<u64> {
    client.phase = Phase::End;
    Some(now)
}
