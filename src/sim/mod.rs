//! `--simulate` (docs/simulation.md#simulation): many clients following one policy against a
//! modelled dependency, on a virtual clock. Each client is a [`Schedule`] over the run's
//! [`Policy`], drawing its waits through the same calls a real run makes (`stagger`, `start_try`,
//! the decision after a failure, the quota's `deposit` and `take`, the throttle's `admit`), with
//! time passed in as numbers. Nothing here sleeps, spawns or reads a clock: one event queue over
//! the clients (a heap of the time of each client's next event, [`queue`]) moves the clock from
//! one event to the next.
//!
//! The same policy, scenario and seed give the same figures. Memory grows with the clients under
//! way, not with the simulated time: each client has one pending event, a client that finished
//! leaves its place to a run of a later wave (`--every`), and the tries per interval are kept in
//! a fixed number of bins that widen as the time goes on.

mod admission;
pub mod arrivals;
mod client;
pub mod clock;
pub mod occ;
pub mod outage;
mod queue;
mod recorder;
mod try_end;

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::policy::quota::{Bucket, QuotaParams};
use crate::policy::schedule::stagger;
use crate::policy::throttle::ThrottleSpec;
use crate::policy::{Jitter, Policy};
use admission::Store;
use arrivals::{Arrivals, Next};
use client::{Client, Phase};
use clock::{millis, nanos};
use recorder::Recorder;
use try_end::{GIVE_UP_QUOTA, Totals, after_held, decide, done, end_now};

pub use admission::{P_RECOVERED, StoreClock};
pub use client::{Cause, Failures};
pub use occ::Occ;
pub use outage::Outage;
pub use recorder::{PEAK_WINDOW, Peak, Series};

/// The most clients under way at once: about 100 MB of state. `--clients` above it is a usage
/// error; with `--every`, a wave that arrives while runs of earlier waves are still going is cut
/// to what fits, and the runs left out are counted as turned away.
pub const MAX_CLIENTS: u32 = 1_000_000;

/// The most tries one simulation makes, held ones included, before it stops and reports the
/// clients still going: a policy without a try limit against a dependency that never recovers
/// would go on for ever. No wave arrives after it. Runs turned away are no tries, and do not
/// count.
pub const MAX_TRIES: u64 = 20_000_000;

/// The most waves one simulation has (`--every`): each is an event, even one whose runs were all
/// turned away, and a tiny period under a long outage would otherwise not end.
pub const MAX_WAVES: u32 = 20_000_000;

/// A limit of the simulator that stopped a simulation early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// [`MAX_TRIES`].
    Tries,
    /// [`MAX_WAVES`].
    Waves,
    /// The end of the virtual clock ([`clock::CLOCK_END`]).
    Clock,
}

impl Bound {
    /// The bound's name in the JSON figures (`stopped_by`).
    pub fn word(self) -> &'static str {
        match self {
            Bound::Tries => "tries",
            Bound::Waves => "waves",
            Bound::Clock => "clock",
        }
    }
}

/// Which limit stopped a simulation early, and where the waves were then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// The first limit reached.
    pub by: Bound,
    /// The waves that had arrived: the simulation stopped at the last of them.
    pub wave: u32,
    /// When that wave arrived.
    pub at: Duration,
    /// Waves were still due before the horizon and did not come.
    pub cut: bool,
}

/// The queue's id of the next wave's arrival (`--every`), past every client's.
const WAVE: u32 = u32::MAX;

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
    /// The clock of the throttle's store against the simulated one: right, unless a bench
    /// steps it ([`StoreClock`]).
    pub store_clock: StoreClock,
}

impl Scenario {
    /// When the outage ends (model `outage`); 0 for a model without one.
    pub fn outage_end(&self) -> Duration {
        match &self.model {
            Model::Outage(o) => o.until,
            Model::Occ => Duration::ZERO,
        }
    }

    /// With `--every`, the moment from which no wave arrives ([`arrivals::horizon`]).
    pub fn horizon(&self) -> Option<Duration> {
        let window = self.throttle.map(|t| t.window);
        self.every
            .map(|every| arrivals::horizon(self.outage_end(), every, window))
    }
}

/// What one simulation found.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    /// Runs in all: `--clients` times the waves that arrived.
    pub clients: u32,
    /// Tries sent to the dependency, first tries included; held ones are not.
    pub tries: u64,
    pub failures: Failures,
    /// The busiest window of tries, first tries included.
    pub peak: Peak,
    /// The busiest window of retries alone: what the policy's waits decide.
    pub peak_retries: Peak,
    /// When the last client to finish (succeed or give up) finished.
    pub last_finish: Duration,
    pub succeeded: u32,
    /// Clients that gave up, by the reason a real run would log (`tries`, `budget`, `quota`,
    /// and `held` with `--throttle`).
    pub gave_up: Vec<(&'static str, u32)>,
    /// Clients still retrying when the simulation stopped at [`MAX_TRIES`].
    pub unfinished: u32,
    /// Clients whose next try or answer would come past the end of the virtual clock
    /// ([`clock::CLOCK_END`]): they neither succeeded nor gave up within it.
    pub past_clock: u32,
    /// The limit of the simulator that stopped it early, if one did.
    pub stopped: Option<Stopped>,
    pub series: Series,
    /// The figures of `--throttle` and `--every`, which the report shows when they are given.
    pub fleet: Fleet,
}

/// What a fleet of runs did over the outage (`--throttle`, `--every`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fleet {
    /// Waves of `--clients` runs that arrived: 1 without `--every`.
    pub waves: u32,
    /// Tries sent before the end of the outage, and from it on.
    pub in_outage: u64,
    pub after_outage: u64,
    /// Tries that the throttle held back: tries of their runs that were not sent.
    pub held: u64,
    /// With `--throttle`: how long after the end of the outage `p` first fell below
    /// [`P_RECOVERED`], if it did before the simulation ended.
    pub recovered: Option<Duration>,
    /// With `--throttle` and `--every`: the runs of the waves that arrived once `p` had fallen
    /// below [`P_RECOVERED`], and those of them that succeeded.
    pub after_recovery: u32,
    pub succeeded_after_recovery: u32,
    /// Runs of a wave that did not arrive, as [`MAX_CLIENTS`] were under way.
    pub turned_away: u64,
    /// When the simulation's last event came: with [`Scenario::outage_end`], whether the
    /// outage ended before the simulation did.
    pub end: Duration,
}

impl Figures {
    /// Tries per client: how many times over the retries multiply the load.
    pub fn per_client(&self) -> f64 {
        self.tries as f64 / f64::from(self.clients.max(1))
    }

    pub fn gave_up_in_all(&self) -> u32 {
        self.gave_up.iter().map(|(_, n)| n).sum()
    }

    /// Clients that gave up for `reason`.
    pub fn gave_up_for(&self, reason: &str) -> u32 {
        self.gave_up
            .iter()
            .find(|(why, _)| *why == reason)
            .map_or(0, |(_, n)| *n)
    }
}

/// Runs one simulation.
pub fn simulate(policy: &Policy, scenario: &Scenario, seed: u64) -> Figures {
    simulate_up_to(policy, scenario, seed, MAX_TRIES)
}

/// One row of `--compare`: the jitter, whether the quota was used, and the throttle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub jitter: Jitter,
    pub quota: bool,
    pub throttle: bool,
}

/// `--compare`: the same scenario and seed once per jitter kind, and with and without the quota
/// when there is one. Decorrelated jitter is left out when the policy lists its waits
/// (`--delays`), which it cannot be combined with. With `--throttle`, the herd controls are
/// compared instead, with the policy's own jitter: neither, the quota alone, the quota and the
/// throttle.
pub fn compare(policy: &Policy, scenario: &Scenario, seed: u64) -> Vec<(Variant, Figures)> {
    if scenario.throttle.is_some() {
        return compare_throttle(policy, scenario, seed);
    }
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
            let variant = Variant {
                jitter,
                quota,
                throttle: false,
            };
            rows.push((variant, simulate(&variant_policy, &variant_scenario, seed)));
        }
    }
    rows
}

/// `--compare --throttle`: no quota, the quota alone, and the quota with the throttle.
fn compare_throttle(policy: &Policy, scenario: &Scenario, seed: u64) -> Vec<(Variant, Figures)> {
    let jitter = policy.waits.jitter;
    [(false, false), (true, false), (true, true)]
        .into_iter()
        .map(|(quota, throttle)| {
            let variant_scenario = Scenario {
                quota: scenario.quota.filter(|_| quota),
                throttle: scenario.throttle.filter(|_| throttle),
                ..scenario.clone()
            };
            let variant = Variant {
                jitter,
                quota,
                throttle,
            };
            // The rows' waves stop together, at the horizon of the throttle's row.
            let horizon = scenario.horizon();
            let figures = simulate_with(policy, &variant_scenario, seed, MAX_TRIES, horizon);
            (variant, figures)
        })
        .collect()
}

/// The dependency's state.
enum Dependency {
    Outage(outage::Server),
    Occ(occ::Record),
}

/// Runs one simulation, stopping after `max_tries` tries.
fn simulate_up_to(policy: &Policy, scenario: &Scenario, seed: u64, max_tries: u64) -> Figures {
    simulate_with(policy, scenario, seed, max_tries, scenario.horizon())
}

/// Runs one simulation whose waves (`--every`) stop at `horizon`, stopping after `max_tries`
/// tries.
fn simulate_with(
    policy: &Policy,
    scenario: &Scenario,
    seed: u64,
    max_tries: u64,
    horizon: Option<Duration>,
) -> Figures {
    let mut run = Run::new(policy, scenario, seed, max_tries, horizon);
    while let Some((now, id)) = run.queue.pop() {
        run.step(now, id);
    }
    run.figures()
}

/// One simulation under way: the clients, the queue of their next events, the dependency, the
/// shared quota and throttle, the waves to come, and what has been counted so far.
struct Run<'p> {
    policy: &'p Policy,
    rng: StdRng,
    clients: Vec<Client<'p>>,
    /// The places of clients that finished, for the runs of later waves.
    free: Vec<u32>,
    /// The time of each client's next event, earliest first, and the next wave's ([`WAVE`]).
    queue: queue::Queue,
    dependency: Dependency,
    quota: Option<(QuotaParams, Bucket)>,
    throttle: Option<Store>,
    arrivals: Option<Arrivals>,
    /// `--clients`: the runs of each wave.
    per_wave: u32,
    stagger: Option<Duration>,
    recorder: Recorder,
    tally: Totals,
    max_tries: u64,
    /// The first limit that stopped something, and whether waves were left out.
    stopped_by: Option<Bound>,
    cut: bool,
    /// The time of the latest event so far.
    end: u64,
}

impl<'p> Run<'p> {
    /// The dependency's start, and the first wave of clients at their first try, each after
    /// its stagger.
    fn new(
        policy: &'p Policy,
        scenario: &Scenario,
        seed: u64,
        max_tries: u64,
        horizon: Option<Duration>,
    ) -> Run<'p> {
        let n = scenario.clients.min(MAX_CLIENTS);
        let outage_end = nanos(scenario.outage_end());
        // The reasons a simulated run can give up, always listed, in this order.
        let mut gave_up = vec![("tries", 0), ("budget", 0), ("quota", 0)];
        if scenario.throttle.is_some() {
            gave_up.push(("held", 0));
        }
        let mut run = Run {
            policy,
            rng: StdRng::seed_from_u64(seed),
            clients: Vec::with_capacity(n as usize),
            free: Vec::new(),
            queue: queue::Queue::with_capacity(n as usize),
            dependency: match &scenario.model {
                Model::Outage(o) => Dependency::Outage(outage::Server::new(o)),
                Model::Occ => Dependency::Occ(occ::Record::default()),
            },
            quota: scenario.quota.map(|p| (p, Bucket::full(&p, 0))),
            throttle: scenario
                .throttle
                .map(|spec| Store::new(spec, seed, outage_end, scenario.store_clock)),
            arrivals: scenario
                .every
                .zip(horizon)
                .map(|(every, horizon)| Arrivals::new(every, horizon)),
            per_wave: n,
            stagger: scenario.stagger,
            recorder: Recorder::new(outage_end),
            tally: Totals {
                gave_up,
                ..Totals::default()
            },
            max_tries,
            stopped_by: None,
            cut: false,
            end: 0,
        };
        run.arrive(0);
        run
    }

    /// A wave of runs arrives at `now`, each at its first try after its stagger (drawn in turn,
    /// as in a real run the stagger is the first draw); the next wave is queued, if one comes.
    fn arrive(&mut self, now: u64) {
        let live = self.clients.len() - self.free.len();
        let room = u32::try_from((MAX_CLIENTS as usize).saturating_sub(live)).unwrap_or(0);
        let n = self.per_wave.min(room);
        self.tally.turned_away =
            (self.tally.turned_away).saturating_add(u64::from(self.per_wave - n));
        self.tally.arrived = self.tally.arrived.saturating_add(n);
        let after_recovery = self
            .throttle
            .as_ref()
            .is_some_and(|store| store.recovered().is_some());
        if after_recovery {
            self.tally.after_recovery = self.tally.after_recovery.saturating_add(n);
        }
        for _ in 0..n {
            let start = self
                .stagger
                .map_or(0, |most| nanos(stagger(most, &mut self.rng)));
            let mut client = Client::new(self.policy, now);
            client.after_recovery = after_recovery;
            // At most MAX_CLIENTS places, so an id is below WAVE.
            let id = match self.free.pop() {
                Some(id) => {
                    self.clients[id as usize] = client;
                    id
                }
                None => {
                    self.clients.push(client);
                    (self.clients.len() - 1) as u32
                }
            };
            self.queue_at(Some(now.saturating_add(start)), id);
        }
        let Some(arrivals) = self.arrivals.as_mut() else {
            return;
        };
        match arrivals.arrived() {
            Next::Done => {}
            Next::PastClock => self.stop(Bound::Clock, true),
            // Runs turned away are no tries: the waves that find no place end at the bound on
            // waves.
            Next::At(_) if arrivals.waves >= MAX_WAVES => self.stop(Bound::Waves, true),
            Next::At(_) if self.recorder.events() >= self.max_tries => {
                self.stop(Bound::Tries, true);
            }
            Next::At(at) => self.queue.push(at, WAVE),
        }
    }

    /// Notes that `bound` stopped something: a client's next try or event, or, when `cut`, the
    /// waves still due.
    fn stop(&mut self, bound: Bound, cut: bool) {
        self.stopped_by.get_or_insert(bound);
        self.cut |= cut;
    }

    /// Client `id`'s event at `now` (the start of a try, its write, or its end), or the next
    /// wave's arrival.
    fn step(&mut self, now: u64, id: u32) {
        self.end = self.end.max(now);
        if id == WAVE {
            self.arrive(now);
            return;
        }
        let Some(client) = self.clients.get_mut(id as usize) else {
            return;
        };
        let next = match client.phase {
            Phase::Start if self.recorder.events() >= self.max_tries => {
                // No new try: this client is still going. The tries under way run to their
                // end, so that every try is counted as a success or a failure.
                self.tally.unfinished = self.tally.unfinished.saturating_add(1);
                self.stop(Bound::Tries, false);
                None
            }
            Phase::Start => self.start(now, id),
            Phase::Write => match &mut self.dependency {
                Dependency::Occ(record) => record.write(client, now, &mut self.rng),
                // Only the occ model has a write phase.
                Dependency::Outage(_) => end_now(client, now),
            },
            Phase::End => decide(
                client,
                now,
                &mut self.rng,
                // With the throttle, the token is taken as the next try is admitted.
                self.quota.as_mut().filter(|_| self.throttle.is_none()),
                self.throttle.as_mut(),
                &mut self.tally,
            ),
            Phase::Done => None,
        };
        if self.clients[id as usize].phase == Phase::Done {
            self.recorder.reach(now);
            self.tally.last_finish = self.tally.last_finish.max(now);
            self.free.push(id);
        }
        if let Some(store) = self.throttle.as_mut() {
            store.watch(now);
        }
        self.queue_at(next, id);
    }

    /// A try of client `id` is due at `now`: the throttle's step first, then the quota's, then
    /// the try is sent. Returns when the client's next event comes.
    fn start(&mut self, now: u64, id: u32) -> Option<u64> {
        let client = &mut self.clients[id as usize];
        let first = client.schedule.tries() == 0;
        if let Some(store) = self.throttle.as_mut() {
            client.held = store.admit(now).held;
            if client.held {
                // A try of the run that did not run: no token, and the wait of a failure.
                client.schedule.start_try(client.elapsed(now));
                self.recorder.try_held(now);
                return after_held(client, now, &mut self.rng, &mut self.tally);
            }
            // Until one of its tries has run, a run is new to the quota.
            if let Some((params, bucket)) = self.quota.as_mut() {
                if !client.ran {
                    bucket.deposit(params, millis(now));
                } else if !bucket.take(params, millis(now)) {
                    self.tally.gave_up(GIVE_UP_QUOTA);
                    return done(client);
                }
            }
            client.ran = true;
        } else if let Some((params, bucket)) = self.quota.as_mut().filter(|_| first) {
            bucket.deposit(params, millis(now));
        }
        let limit = client.schedule.start_try(client.elapsed(now));
        client.stop_at = limit.map_or(u64::MAX, |l| now.saturating_add(nanos(l)));
        self.recorder.try_started(now, first);
        match &mut self.dependency {
            Dependency::Outage(server) => server.start(client, now),
            Dependency::Occ(record) => record.start(client, now, &mut self.rng),
        }
    }

    /// Queues client `id`'s next event, if it has one.
    fn queue_at(&mut self, next: Option<u64>, id: u32) {
        match next {
            // Saturated: the event would come after the clock's end, and cannot be placed.
            Some(u64::MAX) => {
                self.tally.past_clock = self.tally.past_clock.saturating_add(1);
                self.stop(Bound::Clock, false);
            }
            Some(at) => self.queue.push(at, id),
            None => {}
        }
    }

    fn figures(mut self) -> Figures {
        Figures {
            clients: self.tally.arrived,
            tries: self.recorder.tries,
            failures: self.tally.failures,
            peak: self.recorder.peak.result(),
            peak_retries: self.recorder.peak_retries.result(),
            last_finish: Duration::from_nanos(self.tally.last_finish),
            succeeded: self.tally.succeeded,
            gave_up: self.tally.gave_up,
            unfinished: self.tally.unfinished,
            past_clock: self.tally.past_clock,
            stopped: self.stopped_by.map(|by| Stopped {
                by,
                wave: self.arrivals.as_ref().map_or(1, |a| a.waves),
                at: self
                    .arrivals
                    .as_ref()
                    .map_or(Duration::ZERO, Arrivals::last),
                cut: self.cut,
            }),
            series: self.recorder.series(),
            fleet: Fleet {
                waves: self.arrivals.as_ref().map_or(1, |a| a.waves),
                in_outage: self.recorder.in_outage,
                after_outage: self.recorder.after_outage,
                held: self.recorder.held,
                recovered: self
                    .throttle
                    .as_ref()
                    .and_then(Store::recovered)
                    .map(Duration::from_nanos),
                after_recovery: self.tally.after_recovery,
                succeeded_after_recovery: self.tally.succeeded_after_recovery,
                turned_away: self.tally.turned_away,
                end: Duration::from_nanos(self.end),
            },
        }
    }
}

#[cfg(test)]
mod tests;
