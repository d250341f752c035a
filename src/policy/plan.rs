//! The plan of a run that `--dry-run` shows (docs/dry-run.md#dry-run): the schedule the policy
//! gives when every try fails and takes its whole timeout (or no time), computed by the same
//! [`Schedule`] calls as a real run, with the random source passed in. Pure: rendering it is the
//! report's job.

use std::time::Duration;

use rand::Rng;

use super::backoff::Wait;
use super::conflict::{Conflict, conflicts};
use super::schedule::{Decision, GiveUp, Policy, Schedule, stagger};
use super::worst::{WorstCase, worst_case};

/// Rows kept before the rest of a long schedule is summarised.
pub const SHOWN_ROWS: u64 = 50;
/// Tries simulated past the shown rows to find where a long run ends.
pub const SIMULATED_TRIES: u64 = 100_000;

/// One planned try and the wait after it (none after the last).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedTry {
    pub attempt: u64,
    /// The latest the try starts: every earlier try took its whole timeout.
    pub start: Duration,
    pub wait: Option<Wait>,
    /// After the last try, the wait the budget or the deadline left no room for: not waited,
    /// the run stops instead.
    pub refused: Option<Wait>,
    /// Total waited once this row's wait is over.
    pub waited: Duration,
}

/// How the planned run ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// It gives up after this try.
    GivesUp {
        attempt: u64,
        why: GiveUp,
        waited: Duration,
    },
    /// It goes past what was simulated; `max_tries` is the try limit if there is one.
    Beyond { max_tries: Option<u64> },
}

/// Everything the dry run shows of a policy, computed once.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The wait `--stagger` drew before the first try, if it was given.
    pub stagger: Option<Duration>,
    /// True when the random source decides some wait, so that its seed is worth showing.
    pub random: bool,
    /// The options that defeat each other.
    pub conflicts: Vec<Conflict>,
    /// At most [`SHOWN_ROWS`] rows, from the first try on.
    pub rows: Vec<PlannedTry>,
    pub end: End,
    /// The worst case of the run, after the longest wait `--stagger` can draw.
    pub worst: WorstCase,
}

/// Plans the run of `policy` after a `--stagger` of at most `most_stagger`, drawing its waits
/// from `rng` as a real run seeded the same way would.
pub fn plan<R: Rng + ?Sized>(policy: &Policy, most_stagger: Option<Duration>, rng: &mut R) -> Plan {
    // The stagger is the first draw of a real run too, so the waits after it are the same.
    let drawn = most_stagger.map(|most| stagger(most, rng));
    let (rows, end) = tries(policy, drawn.unwrap_or_default(), rng);
    Plan {
        stagger: drawn,
        random: is_random(policy) || most_stagger.is_some(),
        conflicts: conflicts(policy),
        rows,
        end,
        worst: worst_case(policy, most_stagger.unwrap_or_default()),
    }
}

/// True when the random source decides some wait of the policy's own: a jitter with room to
/// move, and more than one try to wait between.
pub fn is_random(policy: &Policy) -> bool {
    policy.max_tries != Some(1) && policy.waits.is_random()
}

/// The try after which planning stops. Without a budget only the try limit ends the run; when
/// that is far off, simulating further finds nothing more than the limit itself.
fn horizon(policy: &Policy) -> u64 {
    let far_off = policy.limit.is_none()
        && policy
            .max_tries
            .is_none_or(|n| n > SHOWN_ROWS + SIMULATED_TRIES);
    if far_off {
        SHOWN_ROWS
    } else {
        SHOWN_ROWS + SIMULATED_TRIES
    }
}

/// Every try from the first, starting at `now`, each failing: the shown rows and the end.
fn tries<R: Rng + ?Sized>(
    policy: &Policy,
    mut now: Duration,
    rng: &mut R,
) -> (Vec<PlannedTry>, End) {
    let mut schedule = Schedule::new(policy);
    let mut rows = Vec::new();
    let horizon = horizon(policy);
    loop {
        let attempt = schedule.tries() + 1;
        if attempt > horizon {
            let max_tries = policy.max_tries;
            return (rows, End::Beyond { max_tries });
        }
        let (row, decision) = fail_once(policy, &mut schedule, &mut now, rng);
        let waited = row.waited;
        if attempt <= SHOWN_ROWS {
            rows.push(row);
        }
        match decision {
            Decision::Retry(_) => {}
            Decision::GiveUp(why) => {
                let end = End::GivesUp {
                    attempt,
                    why,
                    waited,
                };
                return (rows, end);
            }
            Decision::Succeed => unreachable!("a dry run assumes every try fails"),
            Decision::Stop(_) => unreachable!("the schedule never stops a repeat"),
        }
    }
}

/// One try starting at `now` that takes its whole timeout and fails, and the decision after
/// it; `now` moves on to the start of the next try.
fn fail_once<R: Rng + ?Sized>(
    policy: &Policy,
    schedule: &mut Schedule<'_>,
    now: &mut Duration,
    rng: &mut R,
) -> (PlannedTry, Decision) {
    let attempt = schedule.tries() + 1;
    let start = *now;
    let limit = schedule.start_try(*now);
    if policy.timeout.is_some() {
        *now = now.saturating_add(limit.unwrap_or(Duration::ZERO));
    }
    let decision = schedule.after_transient_failure(*now, rng);
    let (wait, refused) = match decision {
        Decision::Retry(wait) => (Some(wait), None),
        Decision::GiveUp(GiveUp::Budget(_)) => (None, schedule.refused()),
        _ => (None, None),
    };
    if let Some(wait) = wait {
        *now = now.saturating_add(wait.delay);
    }
    let row = PlannedTry {
        attempt,
        start,
        wait,
        refused,
        waited: schedule.waited(),
    };
    (row, decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Backoff, Classifier, Jitter, Limit, WaitPolicy};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn policy(tries: Option<u64>, backoff: Backoff, delay: u64, jitter: Jitter) -> Policy {
        Policy {
            max_tries: tries,
            waits: WaitPolicy {
                backoff,
                delay: s(delay),
                max_delay: s(60),
                jitter,
            },
            classifier: Classifier::default(),
            timeout: None,
            limit: None,
            consecutive: None,
        }
    }

    fn exponential(tries: Option<u64>, delay: u64) -> Policy {
        policy(
            tries,
            Backoff::Exponential { factor: 2.0 },
            delay,
            Jitter::None,
        )
    }

    fn plan_of(policy: &Policy, stagger: Option<Duration>) -> Plan {
        plan(policy, stagger, &mut StdRng::seed_from_u64(1))
    }

    fn waits(plan: &Plan) -> Vec<u64> {
        plan.rows
            .iter()
            .filter_map(|r| r.wait.map(|w| w.delay.as_secs()))
            .collect()
    }

    #[test]
    fn the_seed_example_waits_122_seconds_in_all() {
        let p = plan_of(&exponential(Some(7), 2), None);
        assert_eq!(waits(&p), [2, 4, 8, 16, 32, 60]);
        assert_eq!(
            p.end,
            End::GivesUp {
                attempt: 7,
                why: GiveUp::Tries,
                waited: s(122)
            }
        );
        let p = plan_of(&exponential(Some(6), 2), None);
        assert_eq!(waits(&p), [2, 4, 8, 16, 32]);
        assert!(matches!(p.end, End::GivesUp { waited, .. } if waited == s(62)));
        assert!(!p.random);
        assert_eq!(p.stagger, None);
    }

    #[test]
    fn latest_starts_add_up_timeouts_and_waits() {
        let mut p = policy(Some(10), Backoff::Constant, 1, Jitter::None);
        p.timeout = Some(s(8));
        p.limit = Limit::earliest(Some(s(30)), None);
        let p = plan_of(&p, None);
        let starts: Vec<u64> = p.rows.iter().map(|r| r.start.as_secs()).collect();
        assert_eq!(starts, [0, 9, 18]);
        match &p.end {
            End::GivesUp {
                attempt: 3,
                why: GiveUp::Budget(e),
                ..
            } => assert_eq!(
                e.to_string(),
                "budget: 26s used + 1s wait + 8s timeout > 30s"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_stagger_is_the_first_draw_and_the_first_start() {
        let p = plan_of(&exponential(Some(3), 1), Some(s(10)));
        let drawn = stagger(s(10), &mut StdRng::seed_from_u64(1));
        assert_eq!(p.stagger, Some(drawn));
        assert_eq!(p.rows[0].start, drawn);
        // The stagger alone makes the seed worth showing.
        assert!(p.random);
        // The worst case counts the longest stagger, not the one drawn.
        assert_eq!(worst_case(&exponential(Some(3), 1), s(10)), p.worst);
    }

    #[test]
    fn long_runs_keep_fifty_rows_and_say_what_follows() {
        let mut far = exponential(Some(4_000_000_000), 1);
        far.waits.backoff = Backoff::Exponential { factor: 10.0 };
        let p = plan_of(&far, None);
        assert_eq!(p.rows.len(), 50);
        assert_eq!(
            p.end,
            End::Beyond {
                max_tries: Some(4_000_000_000)
            }
        );
        let p = plan_of(&exponential(None, 1), None);
        assert_eq!(p.rows.len(), 50);
        assert_eq!(p.end, End::Beyond { max_tries: None });
        let p = plan_of(&exponential(Some(500), 1), None);
        assert_eq!(p.rows.len(), 50);
        assert!(matches!(p.end, End::GivesUp { attempt: 500, .. }));
    }

    #[test]
    fn a_budget_ends_an_unlimited_run_past_the_shown_rows() {
        let mut p = policy(None, Backoff::Constant, 1, Jitter::None);
        p.limit = Limit::earliest(Some(s(100)), None);
        let p = plan_of(&p, None);
        assert_eq!(p.rows.len(), 50);
        // Tries take no time, so tries start at 0s, 1s, … 99s: the hundredth is the last.
        assert!(
            matches!(
                p.end,
                End::GivesUp {
                    attempt: 100,
                    why: GiveUp::Budget(_),
                    ..
                }
            ),
            "{:?}",
            p.end
        );
    }

    #[test]
    fn one_try_or_no_jitter_draws_nothing_worth_a_seed() {
        let jittered = policy(Some(3), Backoff::Constant, 1, Jitter::Full);
        assert!(is_random(&jittered));
        assert!(!is_random(&Policy {
            max_tries: Some(1),
            ..jittered.clone()
        }));
        assert!(!is_random(&exponential(Some(3), 1)));
    }
}
