//! `--simulate` (docs/simulation.md#simulation): many clients following one policy against a
//! modelled dependency, on a virtual clock. Each client is a [`Schedule`] over the run's
//! [`Policy`], drawing its waits through the same calls a real run makes (`stagger`, `start_try`,
//! the decision after a failure, the quota's `deposit` and `take`), with time passed in as numbers.
//! Nothing here sleeps, spawns or reads a clock: one event queue over the clients (a binary heap of
//! the time of each client's next event) moves the clock from one event to the next.
//!
//! The same policy, scenario and seed give the same figures. Memory grows with the clients, not
//! with the simulated time: each client has one pending event, and the tries per interval are
//! kept in a fixed number of bins that widen as the time goes on.

mod client;
pub mod clock;
pub mod occ;
pub mod outage;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::policy::quota::{Bucket, QuotaParams, QuotaRefusal};
use crate::policy::schedule::stagger;
use crate::policy::throttle::ThrottleSpec;
use crate::policy::{Decision, Jitter, Outcome, Policy, Schedule};
use client::{Client, Phase};
use clock::{millis, nanos};

pub use client::Cause;
pub use occ::Occ;
pub use outage::Outage;

/// The most clients one simulation takes: about 100 MB of state. A usage error above it.
pub const MAX_CLIENTS: u32 = 1_000_000;

/// The most tries one simulation makes before it stops and reports the clients still going:
/// a policy without a try limit against a dependency that never recovers would go on for ever.
pub const MAX_TRIES: u64 = 20_000_000;

/// The window over which the peak rate is counted. A second would hide what jitter changes: a
/// thousand clients retrying in the same millisecond and a thousand spread over one second both
/// make a thousand tries in that second.
pub const PEAK_WINDOW: Duration = Duration::from_millis(100);

/// Bins kept for the tries per interval; past them, neighbouring bins are merged.
const MAX_BINS: usize = 4000;

/// The width of a bin at the start: one millisecond.
const FIRST_BIN_NS: u64 = 1_000_000;

/// What the clients retry against.
#[derive(Clone, Debug, PartialEq)]
pub enum Model {
    Outage(Outage),
    Occ,
}

impl Model {
    pub fn name(&self) -> &'static str {
        match self {
            Model::Outage(_) => "outage",
            Model::Occ => "occ",
        }
    }
}

/// Everything but the policy and the seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub clients: u32,
    pub model: Model,
    /// `--stagger`: each client's first try waits a random time up to this.
    pub stagger: Option<Duration>,
    /// `--quota`: one bucket shared by every client, starting full as a new one does.
    pub quota: Option<QuotaParams>,
    /// `--throttle`: admission control through the quota's figures.
    pub throttle: Option<ThrottleSpec>,
    /// `--every`: the clients arrive again this often (a cron fleet), else once.
    pub every: Option<Duration>,
}

/// Failed tries by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    pub outage: u64,
    pub overload: u64,
    pub conflict: u64,
    pub timeout: u64,
}

impl Failures {
    fn count(&mut self, why: Cause) {
        let n = match why {
            Cause::Outage => &mut self.outage,
            Cause::Overload => &mut self.overload,
            Cause::Conflict => &mut self.conflict,
            Cause::Timeout => &mut self.timeout,
        };
        *n = n.saturating_add(1);
    }
}

/// The busiest [`PEAK_WINDOW`]: how many tries started in it, and when it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    pub tries: u64,
    pub at: Duration,
}

impl Peak {
    /// The peak as tries per second.
    pub fn per_second(&self) -> f64 {
        self.tries as f64 / PEAK_WINDOW.as_secs_f64()
    }
}

/// Tries started per interval, from time 0 on: `tries[i]` started in `[i × width, (i+1) ×
/// width)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub width: Duration,
    pub tries: Vec<u64>,
}

impl Series {
    /// The same series in intervals `factor` times wider.
    pub fn merged(&self, factor: usize) -> Series {
        let factor = factor.max(1);
        Series {
            width: self
                .width
                .saturating_mul(u32::try_from(factor).unwrap_or(u32::MAX)),
            tries: self.tries.chunks(factor).map(|c| c.iter().sum()).collect(),
        }
    }
}

/// What one simulation found.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub clients: u32,
    /// Tries in all, first tries included.
    pub tries: u64,
    pub failures: Failures,
    /// The busiest window of tries, first tries included.
    pub peak: Peak,
    /// The busiest window of retries alone: what the policy's waits decide.
    pub peak_retries: Peak,
    /// When the last client to finish (succeed or give up) finished.
    pub last_finish: Duration,
    pub succeeded: u32,
    /// Clients that gave up, by the reason a real run would log (`tries`, `budget`, `quota`).
    pub gave_up: Vec<(&'static str, u32)>,
    /// Clients still retrying when the simulation stopped at [`MAX_TRIES`].
    pub unfinished: u32,
    /// Clients whose next try or answer would come past the end of the virtual clock
    /// ([`clock::CLOCK_END`]): they neither succeeded nor gave up within it.
    pub past_clock: u32,
    pub series: Series,
}

impl Figures {
    /// Tries per client: how many times over the retries multiply the load.
    pub fn per_client(&self) -> f64 {
        self.tries as f64 / f64::from(self.clients.max(1))
    }

    pub fn gave_up_in_all(&self) -> u32 {
        self.gave_up.iter().map(|(_, n)| n).sum()
    }
}

/// Runs one simulation.
pub fn simulate(policy: &Policy, scenario: &Scenario, seed: u64) -> Figures {
    simulate_up_to(policy, scenario, seed, MAX_TRIES)
}

/// One row of `--compare`: the jitter, and whether the quota was used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub jitter: Jitter,
    pub quota: bool,
}

/// `--compare`: the same scenario and seed once per jitter kind, and with and without the quota
/// when there is one. Decorrelated jitter is left out when the policy lists its waits
/// (`--delays`), which it cannot be combined with.
pub fn compare(policy: &Policy, scenario: &Scenario, seed: u64) -> Vec<(Variant, Figures)> {
    let listed = matches!(policy.waits.backoff, crate::policy::Backoff::List(_));
    let quotas: &[bool] = if scenario.quota.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    let mut rows = Vec::new();
    for jitter in [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
    ] {
        if listed && jitter == Jitter::Decorrelated {
            continue;
        }
        let mut variant_policy = policy.clone();
        variant_policy.waits.jitter = jitter;
        for &quota in quotas {
            let variant_scenario = Scenario {
                quota: scenario.quota.filter(|_| quota),
                ..scenario.clone()
            };
            let figures = simulate(&variant_policy, &variant_scenario, seed);
            rows.push((Variant { jitter, quota }, figures));
        }
    }
    rows
}

/// The dependency's state.
enum Dependency {
    Outage(outage::Server),
    Occ(occ::Record),
}

/// Runs one simulation, stopping after `max_tries` tries.
fn simulate_up_to(policy: &Policy, scenario: &Scenario, seed: u64, max_tries: u64) -> Figures {
    let mut run = Run::new(policy, scenario, seed, max_tries);
    while let Some(Reverse((now, id))) = run.queue.pop() {
        run.step(now, id);
    }
    run.figures()
}

/// One simulation under way: the clients, the queue of their next events, the dependency and
/// the shared quota, and what has been counted so far.
struct Run<'p> {
    rng: StdRng,
    clients: Vec<Client<'p>>,
    /// The time of each client's next event, earliest first.
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    dependency: Dependency,
    quota: Option<(QuotaParams, Bucket)>,
    recorder: Recorder,
    tally: Totals,
    max_tries: u64,
}

impl<'p> Run<'p> {
    /// The clients at their first try, each after its stagger, and the dependency's start.
    fn new(policy: &'p Policy, scenario: &Scenario, seed: u64, max_tries: u64) -> Run<'p> {
        let n = scenario.clients.min(MAX_CLIENTS);
        let mut run = Run {
            rng: StdRng::seed_from_u64(seed),
            clients: Vec::with_capacity(n as usize),
            queue: BinaryHeap::with_capacity(n as usize),
            dependency: match &scenario.model {
                Model::Outage(o) => Dependency::Outage(outage::Server::new(o)),
                Model::Occ => Dependency::Occ(occ::Record::default()),
            },
            quota: scenario.quota.map(|p| (p, Bucket::full(&p, 0))),
            recorder: Recorder::new(),
            tally: Totals {
                // The reasons a simulated run can give up, always listed, in this order.
                gave_up: vec![("tries", 0), ("budget", 0), ("quota", 0)],
                ..Totals::default()
            },
            max_tries,
        };
        for id in 0..n {
            // As in a real run, the stagger is the first draw; the clients draw in turn.
            let start = scenario
                .stagger
                .map_or(0, |most| nanos(stagger(most, &mut run.rng)));
            run.clients.push(Client {
                schedule: Schedule::new(policy),
                phase: Phase::Start,
                result: Ok(()),
                stop_at: u64::MAX,
                read_at: 0,
            });
            run.queue_at(Some(start), id);
        }
        run
    }

    /// Client `id`'s event at `now`: the start of a try, its write, or its end.
    fn step(&mut self, now: u64, id: u32) {
        let Some(client) = self.clients.get_mut(id as usize) else {
            return;
        };
        let next = match client.phase {
            Phase::Start if self.recorder.tries >= self.max_tries => {
                // No new try: this client is still going. The tries under way run to their
                // end, so that every try is counted as a success or a failure.
                self.tally.unfinished = self.tally.unfinished.saturating_add(1);
                None
            }
            Phase::Start => {
                let first = client.schedule.tries() == 0;
                if let Some((params, bucket)) = self.quota.as_mut().filter(|_| first) {
                    bucket.deposit(params, millis(now));
                }
                let limit = client.schedule.start_try(Duration::from_nanos(now));
                client.stop_at = limit.map_or(u64::MAX, |l| now.saturating_add(nanos(l)));
                self.recorder.try_started(now, first);
                match &mut self.dependency {
                    Dependency::Outage(server) => server.start(client, now),
                    Dependency::Occ(record) => record.start(client, now, &mut self.rng),
                }
            }
            Phase::Write => match &mut self.dependency {
                Dependency::Occ(record) => record.write(client, now, &mut self.rng),
                // Only the occ model has a write phase.
                Dependency::Outage(_) => end_now(client, now),
            },
            Phase::End => {
                let next = decide(
                    client,
                    now,
                    &mut self.rng,
                    self.quota.as_mut(),
                    &mut self.tally,
                );
                if client.phase == Phase::Done {
                    self.recorder.reach(now);
                    self.tally.last_finish = self.tally.last_finish.max(now);
                }
                next
            }
            Phase::Done => None,
        };
        self.queue_at(next, id);
    }

    /// Queues client `id`'s next event, if it has one.
    fn queue_at(&mut self, next: Option<u64>, id: u32) {
        match next {
            // Saturated: the event would come after the clock's end, and cannot be held.
            Some(u64::MAX) => self.tally.past_clock = self.tally.past_clock.saturating_add(1),
            Some(at) => self.queue.push(Reverse((at, id))),
            None => {}
        }
    }

    fn figures(mut self) -> Figures {
        Figures {
            clients: u32::try_from(self.clients.len()).unwrap_or(u32::MAX),
            tries: self.recorder.tries,
            failures: self.tally.failures,
            peak: self.recorder.peak.result(),
            peak_retries: self.recorder.peak_retries.result(),
            last_finish: Duration::from_nanos(self.tally.last_finish),
            succeeded: self.tally.succeeded,
            gave_up: self.tally.gave_up,
            unfinished: self.tally.unfinished,
            past_clock: self.tally.past_clock,
            series: self.recorder.series(),
        }
    }
}

/// What the clients did, beyond the tries.
#[derive(Default)]
struct Totals {
    failures: Failures,
    succeeded: u32,
    gave_up: Vec<(&'static str, u32)>,
    last_finish: u64,
    /// Clients still going when the tries ran out.
    unfinished: u32,
    /// Clients whose next event would come past the clock's end.
    past_clock: u32,
}

impl Totals {
    fn gave_up(&mut self, word: &'static str) {
        match self.gave_up.iter_mut().find(|(w, _)| *w == word) {
            Some((_, n)) => *n = n.saturating_add(1),
            None => self.gave_up.push((word, 1)),
        }
    }
}

/// The reason a run gives up when the quota has no token (`GiveUp::Quota`'s word).
/// The end of a client's try at `now`: success, or the decision a real run makes after a
/// transient failure, then the quota's token for the retry. Returns when its next try starts.
fn decide(
    client: &mut Client<'_>,
    now: u64,
    rng: &mut StdRng,
    quota: Option<&mut (QuotaParams, Bucket)>,
    tally: &mut Totals,
) -> Option<u64> {
    let Err(why) = client.result else {
        tally.succeeded = tally.succeeded.saturating_add(1);
        return done(client);
    };
    tally.failures.count(why);
    let now_since_start = Duration::from_nanos(now);
    let decision = match why {
        // A timeout is an outcome a real run sees too: it is classified as one would
        // (`--stop-on timeout` makes it permanent).
        Cause::Timeout => {
            client
                .schedule
                .after_try(Outcome::Timeout, now_since_start, rng)
                .1
        }
        // What the dependency refused is a failure a real run would retry, as the dry run
        // assumes: which exit statuses those are is the classification options' business.
        _ => client
            .schedule
            .after_transient_failure(now_since_start, rng),
    };
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
            tally.succeeded = tally.succeeded.saturating_add(1);
            done(client)
        }
        Decision::Stop(_) => unreachable!("the schedule never stops a repeat"),
    }
}

/// The client has succeeded or given up: it has no next event.
fn done(client: &mut Client<'_>) -> Option<u64> {
    client.phase = Phase::Done;
    None
}

/// Ends the client's try at once (a phase the model does not have).
fn end_now(client: &mut Client<'_>, now: u64) -> Option<u64> {
    client.phase = Phase::End;
    Some(now)
}

/// The busiest window seen so far, and the window being counted.
#[derive(Default)]
struct PeakCounter {
    window: u64,
    count: u64,
    best: Peak,
}

impl PeakCounter {
    fn add(&mut self, now: u64) {
        let window = now / nanos(PEAK_WINDOW);
        if window != self.window {
            self.close();
            self.window = window;
            self.count = 0;
        }
        self.count += 1;
    }

    fn close(&mut self) {
        if self.count > self.best.tries {
            self.best = Peak {
                tries: self.count,
                at: Duration::from_nanos(self.window.saturating_mul(nanos(PEAK_WINDOW))),
            };
        }
    }

    fn result(&mut self) -> Peak {
        self.close();
        self.best
    }
}

/// Counts the tries as they start, in time order.
struct Recorder {
    tries: u64,
    peak: PeakCounter,
    peak_retries: PeakCounter,
    width: u64,
    /// The factor of the next widening: 2 and 5 in turn, so that the widths stay round (1ms,
    /// 2ms, 10ms, 20ms, 100ms, ...).
    next_factor: u64,
    bins: Vec<u64>,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            tries: 0,
            peak: PeakCounter::default(),
            peak_retries: PeakCounter::default(),
            width: FIRST_BIN_NS,
            next_factor: 2,
            bins: Vec::with_capacity(MAX_BINS),
        }
    }

    fn try_started(&mut self, now: u64, first: bool) {
        self.tries = self.tries.saturating_add(1);
        self.peak.add(now);
        if !first {
            self.peak_retries.add(now);
        }
        let bin = self.reach(now);
        self.bins[bin] += 1;
    }

    /// Makes the series reach `now`; returns its bin.
    fn reach(&mut self, now: u64) -> usize {
        let mut bin = now / self.width;
        while bin >= MAX_BINS as u64 {
            self.widen();
            bin = now / self.width;
        }
        // Below MAX_BINS, so it fits a usize.
        let bin = bin as usize;
        if bin >= self.bins.len() {
            self.bins.resize(bin + 1, 0);
        }
        bin
    }

    /// Merges every `next_factor` neighbouring bins into one, in place: nothing is allocated
    /// while the simulation runs.
    fn widen(&mut self) {
        let f = self.next_factor as usize;
        let merged = self.bins.len().div_ceil(f);
        for i in 0..merged {
            // Bin i is written after the bins from i × f on are read, and i ≤ i × f.
            let end = ((i + 1) * f).min(self.bins.len());
            let sum = self.bins[i * f..end].iter().sum();
            self.bins[i] = sum;
        }
        self.bins.truncate(merged);
        self.width = self.width.saturating_mul(self.next_factor);
        self.next_factor = if f == 2 { 5 } else { 2 };
    }

    fn series(&self) -> Series {
        Series {
            width: Duration::from_nanos(self.width),
            tries: self.bins.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
