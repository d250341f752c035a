//! The decision after each try (docs/policy.md#the-policy): retry after a wait, or finish. The dry
//! run and the real run drive this same state machine, so with the same seed they choose the same
//! waits.

use std::time::Duration;

use rand::{Rng, RngExt};

use super::backoff::{Wait, WaitPolicy};
use super::budget::{self, BudgetExceeded, Limit};
use super::classify::{Classifier, Item, Outcome, OutputMatch, Reason, Verdict};
use super::httpdate::TimeSource;
use super::lock::LockHolder;
use super::pushback;
use super::quota::QuotaRefusal;
use super::signal::Signal;

/// The whole retry policy: everything a decision depends on, except time and randomness.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `None` means no limit.
    pub max_tries: Option<u64>,
    pub waits: WaitPolicy,
    pub classifier: Classifier,
    pub timeout: Option<Duration>,
    pub limit: Option<Limit>,
    /// `--consecutive`: the successful tries in a row the run needs (docs/policy.md#consecutive).
    pub consecutive: Option<u64>,
}

impl Policy {
    /// How long a hook starting at `now` may run: as long as a try starting then, so that a
    /// hook never outlives the budget (docs/log.md#hooks).
    pub fn hook_limit(&self, now: Duration) -> Option<Duration> {
        budget::try_limit(self.limit, now, self.timeout)
    }

    /// True when what a try that ended with `outcome` left running is stopped before anything
    /// else happens (docs/processes.md#leftover-processes): after a failure by its status, since a
    /// success never has anything killed. Its output is not all in yet, so the output patterns
    /// cannot decide.
    pub fn stops_leftovers(&self, outcome: Outcome) -> bool {
        !self.classifier.succeeds_by_status(outcome)
    }
}

/// Why the run gave up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// The last failure will not pass.
    Permanent,
    /// The tries ran out.
    Tries,
    /// One more try does not fit in the budget or before the deadline.
    Budget(BudgetExceeded),
    /// Ctrl-C reached the command.
    Interrupted,
    /// Standard input could not be kept for another try (no temporary file, memory cap).
    Input,
    /// The retry quota shared with other runs had no token for this retry
    /// (docs/herd.md#shared-retry-quota).
    Quota(QuotaRefusal),
    /// The last try was held back by `--throttle` (docs/herd.md#admission-control).
    Held,
    /// The tries or the budget ran out before `--consecutive` successful tries in a row.
    Consecutive,
    /// Another run had the lock of `--lock` (for all of `--lock-wait`): no try ran
    /// (docs/processes.md#one-run-at-a-time).
    Locked(Box<LockHolder>),
    /// The lease of `--lock redis://…` was lost while the run held it (a renewal refused, or
    /// impossible until it lapsed), for the reason given: the try under way was stopped.
    LockLost(String),
    /// The Redis of `--lock redis://…` could not be reached when the run started, for the
    /// reason given: no try ran (the lock fails closed).
    LockUnreachable(String),
}

impl GiveUp {
    /// The `reason` field of the JSON log.
    pub fn word(&self) -> &'static str {
        match self {
            GiveUp::Permanent => "permanent",
            GiveUp::Tries => "tries",
            GiveUp::Budget(_) => "budget",
            GiveUp::Interrupted => "interrupted",
            GiveUp::Input => "input",
            GiveUp::Quota(_) => "quota",
            GiveUp::Held => "held",
            GiveUp::Consecutive => "consecutive",
            GiveUp::Locked(_) => "locked",
            GiveUp::LockLost(_) => "lock_lost",
            GiveUp::LockUnreachable(_) => "lock_unreachable",
        }
    }
}

/// Why a repeat ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepeatEnd {
    /// Every try asked for ran.
    Done,
    /// A try failed, and `--keep-going` was not given.
    Failed,
    /// The next try does not fit in the budget, or the end of the budget cut one short.
    Budget(Option<BudgetExceeded>),
    /// A stopping signal reached `retry`.
    Interrupted(Signal),
}

impl RepeatEnd {
    pub fn word(&self) -> &'static str {
        match self {
            RepeatEnd::Done => "done",
            RepeatEnd::Failed => "failed",
            RepeatEnd::Budget(_) => "budget",
            RepeatEnd::Interrupted(_) => "interrupted",
        }
    }
}

/// What to do after a try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Wait, then run the next try.
    Retry(Wait),
    Succeed,
    GiveUp(GiveUp),
    /// `--repeat` ends after this try (docs/flaky.md#repeating-a-command); a `Retry` there is the
    /// next try of it.
    Stop(RepeatEnd),
}

impl Decision {
    /// The decision once what the run found around it is known (docs/stdin.md#standard-input,
    /// docs/herd.md#shared-retry-quota): a retry whose input cannot be given again gives up
    /// (`Input`), before any quota token is taken for it; then a retry that the shared quota
    /// refuses (`take_token` answers the refusal) gives up (`Quota`). `take_token` is called only
    /// for a retry that would otherwise go ahead, and other decisions stand as they are.
    pub fn confirmed(
        self,
        input_kept: bool,
        take_token: impl FnOnce() -> Option<QuotaRefusal>,
    ) -> Decision {
        match self {
            Decision::Retry(_) if !input_kept => Decision::GiveUp(GiveUp::Input),
            Decision::Retry(wait) => match take_token() {
                Some(refusal) => Decision::GiveUp(GiveUp::Quota(refusal)),
                None => Decision::Retry(wait),
            },
            other => other,
        }
    }

    /// The decision with the clock that measured its wait's request, when the output asked for
    /// a moment (an HTTP-date, docs/herd.md#pushback), so that the log can name it.
    pub fn measured_by(self, clock: Option<TimeSource>) -> Decision {
        match self {
            Decision::Retry(wait) => Decision::Retry(Wait {
                clock: wait.requested.and(clock),
                ..wait
            }),
            other => other,
        }
    }
}

/// The state of one run: how many tries ran, the previous wait, the time spent waiting.
#[derive(Clone, Debug)]
pub struct Schedule<'p> {
    policy: &'p Policy,
    tries: u64,
    /// Tries since the last successful one: the backoff's step, which starts again after a
    /// success (`--consecutive`).
    since_success: u64,
    /// Successful tries in a row, the last included.
    in_a_row: u64,
    previous_wait: Option<Duration>,
    waited: Duration,
    /// The wait the budget or the deadline left no room for, when that ended the run.
    refused: Option<Wait>,
}

impl<'p> Schedule<'p> {
    pub fn new(policy: &'p Policy) -> Self {
        Schedule {
            policy,
            tries: 0,
            since_success: 0,
            in_a_row: 0,
            previous_wait: None,
            waited: Duration::ZERO,
            refused: None,
        }
    }

    /// Tries started so far.
    pub fn tries(&self) -> u64 {
        self.tries
    }

    /// Successful tries in a row so far, the last included.
    pub fn in_a_row(&self) -> u64 {
        self.in_a_row
    }

    /// Time spent in waits so far.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The wait drawn after the last try that the budget or the deadline left no room for, when
    /// the run gave up on it: the dry run shows it, not waited.
    pub fn refused(&self) -> Option<Wait> {
        self.refused
    }

    /// Starts the next try at `now`; returns how long it may run, if it is bounded.
    pub fn start_try(&mut self, now: Duration) -> Option<Duration> {
        self.tries = self.tries.saturating_add(1);
        self.since_success = self.since_success.saturating_add(1);
        budget::try_limit(self.policy.limit, now, self.policy.timeout)
    }

    /// True when a try started at `now` is bounded by the end of the run rather than by its
    /// timeout.
    pub fn limit_ends_try(&self, now: Duration) -> bool {
        budget::limit_ends_try(self.policy.limit, now, self.policy.timeout)
    }

    /// May the retry planned after the last try still start, `wait` from `now`? Asked again
    /// when something (a hook) took time between the decision and the wait.
    pub fn still_fits(&self, now: Duration, wait: Duration) -> Result<(), BudgetExceeded> {
        budget::check_retry(self.policy.limit, now, wait, self.policy.timeout)
    }

    /// Whether a try may still start at `now`: not once the budget or deadline has ended.
    pub fn not_over(&self, now: Duration) -> Result<(), BudgetExceeded> {
        budget::check_retry(self.policy.limit, now, Duration::ZERO, None)
    }

    /// Decides what follows the try that ended at `now` with `outcome`.
    pub fn after_try<R: Rng + ?Sized>(
        &mut self,
        outcome: Outcome,
        now: Duration,
        rng: &mut R,
    ) -> (Verdict, Decision) {
        self.after_try_with_output(outcome, OutputMatch::default(), now, rng)
    }

    /// `after_try` for a try whose output was matched against the output patterns.
    pub fn after_try_with_output<R: Rng + ?Sized>(
        &mut self,
        outcome: Outcome,
        output: OutputMatch,
        now: Duration,
        rng: &mut R,
    ) -> (Verdict, Decision) {
        let verdict = self.policy.classifier.verdict_with_output(outcome, output);
        if !matches!(verdict, Verdict::Success(_)) {
            self.in_a_row = 0;
        }
        let decision = match verdict {
            Verdict::Success(_) => self.after_success(now),
            Verdict::Interrupted => Decision::GiveUp(GiveUp::Interrupted),
            // No classifier says it: the runner gives it to a try it stopped, with why.
            Verdict::LockLost => Decision::GiveUp(GiveUp::LockLost(String::new())),
            Verdict::Permanent(_) => Decision::GiveUp(GiveUp::Permanent),
            Verdict::Transient(_) => self.after_transient_failure_asked(now, output.requested, rng),
        };
        (verdict, decision)
    }

    /// `after_try_with_output` for a try that the end of the run (the budget or the deadline)
    /// stopped: it is the budget's, not a failure that `--retry-on` did not name nor a timeout
    /// that `--stop-on` did (they judge how a try ends by itself, or by its own `--timeout`),
    /// and the run gives up for the budget.
    pub fn after_cut_by_limit<R: Rng + ?Sized>(
        &mut self,
        outcome: Outcome,
        output: OutputMatch,
        now: Duration,
        rng: &mut R,
    ) -> (Verdict, Decision) {
        let (verdict, decision) = self.after_try_with_output(outcome, output, now, rng);
        let listed = matches!(
            verdict,
            Verdict::Permanent(Reason::NotInRetryOn | Reason::StopOn(Item::Timeout))
        );
        match self.policy.limit {
            Some(limit) if listed && outcome == Outcome::Timeout => (
                Verdict::Transient(Reason::EndOfRun(limit.source)),
                self.after_transient_failure(now, rng),
            ),
            _ => (verdict, decision),
        }
    }

    /// Decides what follows a successful try that ended at `now`: the run succeeds, unless
    /// `--consecutive` asks for more successes in a row; then the next try follows after
    /// `--delay`, and the backoff starts again from its first step after a failure. Tries or a
    /// budget that run out first give up (`Consecutive`).
    fn after_success(&mut self, now: Duration) -> Decision {
        self.since_success = 0;
        self.previous_wait = None;
        self.in_a_row = self.in_a_row.saturating_add(1);
        let Some(needed) = self.policy.consecutive.filter(|&n| self.in_a_row < n) else {
            return Decision::Succeed;
        };
        debug_assert!(needed > self.in_a_row);
        if self.policy.max_tries.is_some_and(|max| self.tries >= max) {
            return Decision::GiveUp(GiveUp::Consecutive);
        }
        let delay = self.policy.waits.delay;
        if budget::check_retry(self.policy.limit, now, delay, self.policy.timeout).is_err() {
            return Decision::GiveUp(GiveUp::Consecutive);
        }
        self.waited = self.waited.saturating_add(delay);
        Decision::Retry(Wait {
            base: delay,
            delay,
            requested: None,
            clock: None,
        })
    }

    /// Decides what follows a transient failure that ended at `now`: a wait, or giving up when
    /// the tries or the budget run out. The dry run calls this directly, since it assumes every
    /// try fails.
    pub fn after_transient_failure<R: Rng + ?Sized>(
        &mut self,
        now: Duration,
        rng: &mut R,
    ) -> Decision {
        self.after_transient_failure_asked(now, None, rng)
    }

    /// Decides what follows a try that `--throttle` held back at `now`: the wait that follows a
    /// transient failure, or, when the tries or the budget run out, giving up as held.
    pub fn after_held<R: Rng + ?Sized>(&mut self, now: Duration, rng: &mut R) -> Decision {
        match self.after_transient_failure(now, rng) {
            Decision::GiveUp(GiveUp::Tries | GiveUp::Budget(_)) => Decision::GiveUp(GiveUp::Held),
            other => other,
        }
    }

    /// `after_transient_failure` for a try whose output asked for a wait (`requested`,
    /// docs/herd.md#pushback): the wait is then at least that long, jitter and `--max-delay`
    /// notwithstanding, and when that wait does not fit in the budget the run gives up at once,
    /// naming the request. The policy's own wait, not the request, is what decorrelated jitter
    /// grows from next: the other side's pushback bends one wait, not the backoff.
    pub fn after_transient_failure_asked<R: Rng + ?Sized>(
        &mut self,
        now: Duration,
        requested: Option<Duration>,
        rng: &mut R,
    ) -> Decision {
        if self.policy.max_tries.is_some_and(|max| self.tries >= max) {
            return Decision::GiveUp(GiveUp::Tries);
        }
        let own = self
            .policy
            .waits
            .wait(self.since_success, self.previous_wait, rng);
        let wait = pushback::apply(own, requested);
        if let Err(mut exceeded) =
            budget::check_retry(self.policy.limit, now, wait.delay, self.policy.timeout)
        {
            exceeded.requested = wait.set_by_request();
            self.refused = Some(wait);
            return Decision::GiveUp(GiveUp::Budget(exceeded));
        }
        self.previous_wait = Some(own.delay);
        self.waited = self.waited.saturating_add(wait.delay);
        Decision::Retry(wait)
    }
}

/// The wait before the first try that `--stagger` asks for: uniform in `[0, most]`, drawn from
/// the run's seeded source before any other draw, so that the dry run shows the same wait.
pub fn stagger<R: Rng + ?Sized>(most: Duration, rng: &mut R) -> Duration {
    let nanos = u64::try_from(most.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.random_range(0..=nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::backoff::{Backoff, Jitter};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn policy(
        max_tries: Option<u64>,
        timeout: Option<Duration>,
        budget: Option<Duration>,
    ) -> Policy {
        Policy {
            max_tries,
            waits: WaitPolicy {
                backoff: Backoff::Constant,
                delay: s(1),
                max_delay: s(60),
                jitter: Jitter::None,
            },
            classifier: Classifier::default(),
            timeout,
            limit: Limit::earliest(budget, None),
            consecutive: None,
        }
    }

    #[test]
    fn a_hook_may_run_as_long_as_a_try_starting_then() {
        let p = policy(None, Some(s(8)), Some(s(30)));
        assert_eq!(p.hook_limit(s(0)), Some(s(8)));
        assert_eq!(p.hook_limit(s(25)), Some(s(5)));
        assert_eq!(p.hook_limit(s(40)), Some(Duration::ZERO));
        assert_eq!(policy(None, None, None).hook_limit(s(5)), None);
        let mut sched = Schedule::new(&p);
        assert_eq!(sched.start_try(s(25)), p.hook_limit(s(25)));
    }

    #[test]
    fn only_a_try_that_failed_by_its_status_has_its_leftovers_stopped() {
        let mut p = policy(None, None, None);
        assert!(!p.stops_leftovers(Outcome::Exit(0)));
        assert!(p.stops_leftovers(Outcome::Exit(1)));
        assert!(p.stops_leftovers(Outcome::Timeout));
        p.classifier.success_on = "3".parse().unwrap();
        assert!(!p.stops_leftovers(Outcome::Exit(3)));
    }

    #[test]
    fn gives_up_when_the_tries_run_out_with_no_wait_after_the_last() {
        let p = policy(Some(3), None, None);
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(0);
        let mut decisions = Vec::new();
        for _ in 0..3 {
            sched.start_try(Duration::ZERO);
            decisions.push(
                sched
                    .after_try(Outcome::Exit(7), Duration::ZERO, &mut rng)
                    .1,
            );
        }
        let wait = Decision::Retry(Wait {
            base: s(1),
            delay: s(1),
            requested: None,
            clock: None,
        });
        assert_eq!(
            decisions,
            [wait.clone(), wait, Decision::GiveUp(GiveUp::Tries)]
        );
        assert_eq!(sched.waited(), s(2));
    }

    #[test]
    fn success_and_permanent_failures_finish_at_once() {
        let p = policy(Some(5), None, None);
        let mut rng = StdRng::seed_from_u64(0);
        let mut sched = Schedule::new(&p);
        sched.start_try(Duration::ZERO);
        assert_eq!(
            sched.after_try(Outcome::Exit(0), s(1), &mut rng).1,
            Decision::Succeed
        );
        let mut sched = Schedule::new(&p);
        sched.start_try(Duration::ZERO);
        assert_eq!(
            sched.after_try(Outcome::NotFound, s(1), &mut rng).1,
            Decision::GiveUp(GiveUp::Permanent)
        );
        assert_eq!(
            sched.after_try(Outcome::Exit(130), s(1), &mut rng).1,
            Decision::GiveUp(GiveUp::Interrupted)
        );
    }

    #[test]
    fn the_budget_stops_a_run_that_would_not_fit_another_full_try() {
        // -n 10 -d 1s --backoff constant -j none -t 8s -B 30s, every try taking its timeout.
        let p = policy(Some(10), Some(s(8)), Some(s(30)));
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(0);
        let mut now = Duration::ZERO;
        loop {
            let limit = sched.start_try(now).unwrap();
            now += limit;
            match sched.after_try(Outcome::Timeout, now, &mut rng).1 {
                Decision::Retry(w) => now += w.delay,
                Decision::GiveUp(GiveUp::Budget(e)) => {
                    assert_eq!(sched.tries(), 3);
                    assert_eq!(
                        e.to_string(),
                        "budget: 26s used + 1s wait + 8s timeout > 30s"
                    );
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn unlimited_tries_go_on() {
        let p = policy(None, None, None);
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(0);
        for _ in 0..1000 {
            sched.start_try(Duration::ZERO);
            assert!(matches!(
                sched
                    .after_try(Outcome::Exit(1), Duration::ZERO, &mut rng)
                    .1,
                Decision::Retry(_)
            ));
        }
    }

    /// A policy of jittered waits: `-d 1s -m 2s -j full`, exponential, with `limit` as budget.
    fn jittered(budget: Option<Duration>, timeout: Option<Duration>) -> Policy {
        Policy {
            max_tries: Some(5),
            waits: WaitPolicy {
                backoff: Backoff::Exponential { factor: 2.0 },
                delay: s(1),
                max_delay: s(2),
                jitter: Jitter::Full,
            },
            classifier: Classifier::default(),
            timeout,
            limit: Limit::earliest(budget, None),
            consecutive: None,
        }
    }

    fn retry_wait(decision: Decision) -> Wait {
        match decision {
            Decision::Retry(wait) => wait,
            other => panic!("expected a retry, got {other:?}"),
        }
    }

    fn asked(requested: Duration) -> OutputMatch {
        OutputMatch {
            requested: Some(requested),
            ..OutputMatch::default()
        }
    }

    #[test]
    fn a_requested_wait_is_never_jittered_below() {
        let p = jittered(None, None);
        for seed in 0..50 {
            let mut sched = Schedule::new(&p);
            let mut rng = StdRng::seed_from_u64(seed);
            sched.start_try(Duration::ZERO);
            let (_, decision) =
                sched.after_try_with_output(Outcome::Exit(1), asked(s(1)), s(0), &mut rng);
            let wait = retry_wait(decision);
            assert!(wait.delay >= s(1), "seed {seed}: {wait:?}");
            assert_eq!(wait.requested, Some(s(1)));
            // Full jitter drew at most 1s: the request is the wait unless the draw was 1s.
            assert_eq!(wait.delay, s(1), "seed {seed}: {wait:?}");
            assert!(wait.set_by_request());
            assert_eq!(sched.waited(), s(1));
        }
    }

    #[test]
    fn a_requested_wait_shorter_than_the_policys_changes_nothing_but_is_kept() {
        let p = policy(Some(3), None, None);
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(7);
        sched.start_try(Duration::ZERO);
        let short = Duration::from_millis(200);
        let (_, decision) =
            sched.after_try_with_output(Outcome::Exit(1), asked(short), s(0), &mut rng);
        let wait = retry_wait(decision);
        assert_eq!(
            (wait.base, wait.delay, wait.requested),
            (s(1), s(1), Some(short))
        );
        assert!(!wait.set_by_request());
    }

    #[test]
    fn a_requested_wait_is_not_capped_by_max_delay() {
        // -m 2s: retry's own waits never pass 2s, the server's 30s is waited all the same.
        let p = jittered(None, None);
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(1);
        sched.start_try(Duration::ZERO);
        let (_, decision) =
            sched.after_try_with_output(Outcome::Exit(1), asked(s(30)), s(0), &mut rng);
        let wait = retry_wait(decision);
        assert_eq!(wait.delay, s(30));
        assert!(wait.base <= s(2), "{wait:?}");
        // The next wait, asked for nothing, is the policy's own again.
        sched.start_try(s(30));
        let (_, decision) = sched.after_try(Outcome::Exit(1), s(30), &mut rng);
        let wait = retry_wait(decision);
        assert!(wait.delay <= s(2) && wait.requested.is_none(), "{wait:?}");
    }

    #[test]
    fn the_same_seed_draws_the_same_jitter_with_or_without_a_request() {
        // The request bends one wait; the random draws, and so every later wait, stay as the
        // dry run computes them.
        let p = Policy {
            waits: WaitPolicy {
                jitter: Jitter::Decorrelated,
                max_delay: s(60),
                ..jittered(None, None).waits
            },
            ..jittered(None, None)
        };
        let waits = |requests: [Option<Duration>; 4]| {
            let mut sched = Schedule::new(&p);
            let mut rng = StdRng::seed_from_u64(42);
            requests.map(|requested| {
                sched.start_try(Duration::ZERO);
                let output = OutputMatch {
                    requested,
                    ..OutputMatch::default()
                };
                let (_, d) = sched.after_try_with_output(Outcome::Exit(1), output, s(0), &mut rng);
                retry_wait(d).delay
            })
        };
        let plain = waits([None; 4]);
        let pushed = waits([None, Some(s(50)), None, None]);
        assert_eq!(pushed[1], s(50));
        assert_eq!(
            (pushed[0], pushed[2], pushed[3]),
            (plain[0], plain[2], plain[3])
        );
    }

    #[test]
    fn a_requested_wait_that_does_not_fit_the_budget_gives_up_at_once_naming_it() {
        let ms = Duration::from_millis;
        // -B 1500ms: after a try ending at 1.05s, a 1s request cannot start before the end.
        let p = jittered(Some(ms(1500)), None);
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(3);
        sched.start_try(Duration::ZERO);
        let (verdict, decision) =
            sched.after_try_with_output(Outcome::Exit(1), asked(s(1)), ms(1050), &mut rng);
        assert_eq!(verdict.word(), "transient");
        let Decision::GiveUp(GiveUp::Budget(exceeded)) = decision else {
            panic!("expected to give up on the budget, got {decision:?}");
        };
        assert!(exceeded.requested);
        assert_eq!(
            exceeded.to_string(),
            "the output asked for 1s (--delay-from-output), more than the 450ms the budget leaves (budget: 1.05s used + 1s wait ≥ 1.5s)"
        );
        assert_eq!(sched.waited(), Duration::ZERO);
        // With --timeout, the whole next try must fit after the requested wait too.
        let p = jittered(Some(s(30)), Some(s(8)));
        let mut sched = Schedule::new(&p);
        sched.start_try(Duration::ZERO);
        let (_, decision) =
            sched.after_try_with_output(Outcome::Exit(1), asked(s(20)), s(5), &mut rng);
        let Decision::GiveUp(GiveUp::Budget(exceeded)) = decision else {
            panic!("expected to give up on the budget, got {decision:?}");
        };
        assert_eq!(exceeded.timeout, Some(s(8)));
        assert!(
            exceeded
                .to_string()
                .contains("more than the 17s the budget leaves")
        );
        // A request that fits is waited.
        let mut sched = Schedule::new(&p);
        sched.start_try(Duration::ZERO);
        let (_, decision) =
            sched.after_try_with_output(Outcome::Exit(1), asked(s(17)), s(5), &mut rng);
        assert_eq!(retry_wait(decision).delay, s(17));
    }

    #[test]
    fn a_policy_wait_that_does_not_fit_does_not_blame_a_shorter_request() {
        let p = policy(Some(5), None, Some(s(10)));
        let mut sched = Schedule::new(&p);
        let mut rng = StdRng::seed_from_u64(0);
        sched.start_try(Duration::ZERO);
        let short = Duration::from_millis(10);
        let (_, decision) =
            sched.after_try_with_output(Outcome::Exit(1), asked(short), s(9), &mut rng);
        let Decision::GiveUp(GiveUp::Budget(exceeded)) = decision else {
            panic!("expected to give up on the budget, got {decision:?}");
        };
        assert!(!exceeded.requested);
        assert_eq!(exceeded.to_string(), "budget: 9s used + 1s wait ≥ 10s");
    }

    #[test]
    fn a_request_changes_neither_a_success_nor_a_permanent_failure_nor_the_last_try() {
        let p = policy(Some(2), None, None);
        let mut rng = StdRng::seed_from_u64(0);
        let mut sched = Schedule::new(&p);
        sched.start_try(Duration::ZERO);
        let (_, d) = sched.after_try_with_output(Outcome::Exit(0), asked(s(5)), s(0), &mut rng);
        assert_eq!(d, Decision::Succeed);
        let (_, d) = sched.after_try_with_output(Outcome::NotFound, asked(s(5)), s(0), &mut rng);
        assert_eq!(d, Decision::GiveUp(GiveUp::Permanent));
        sched.start_try(Duration::ZERO);
        let (_, d) = sched.after_try_with_output(Outcome::Exit(1), asked(s(5)), s(0), &mut rng);
        assert_eq!(d, Decision::GiveUp(GiveUp::Tries));
    }
}
