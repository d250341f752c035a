//! What a run keeps from one try to the next, and how it starts.

use super::around::{OuterRun, Surroundings};
use super::dead_letter::Recorder;
use super::env::RunEnv;
use super::job_control::JobControl;
use super::quota::Quota;
use super::stop::Stopper;
use super::watch::Watch;
use crate::config::Config;
use crate::outcome::{RunVerdict, TryCounts};
use crate::policy::throttle::Admission;
use crate::policy::{Outcome, Repeat};
use crate::report::log::Log;
use crate::run::clock::Moment;
use crate::run::signals::Signals;
use crate::run::stdio::RunIo;

/// A run under way: its options, its log, and what it has come to so far.
pub struct Runner<'c> {
    pub(super) config: &'c Config,
    pub(super) log: Log,
    pub(super) start: Moment,
    /// What the run adds to the environment of its tries and hooks.
    pub(super) env: RunEnv,
    /// What the runner waits on: signals, the try's plumbing, the try or hook running now.
    pub(super) watch: Watch,
    /// How a try or hook is stopped.
    pub(super) stopper: Stopper,
    /// The run this one is nested in, if any.
    pub(super) outer: Option<OuterRun>,
    /// The retry quota shared with other runs, if any.
    pub(super) quota: Quota,
    /// Where the run is recorded if it gives up, if anywhere.
    pub(super) dead_letter: Recorder,
    /// `--repeat`: what its tries came to so far. It decides in place of the schedule.
    pub(super) repeat: Option<Repeat>,
    /// How the last failed try ended, for `--flaky fail`.
    pub(super) last_failed: Option<Outcome>,
    /// How the last try that ran ended.
    pub(super) last_ran: Option<Outcome>,
    /// The last try ran and failed: only then do the hooks run.
    pub(super) last_try_failed: bool,
    /// `--consecutive`: the successful tries in a row, the last one included.
    pub(super) in_a_row: u64,
    /// The next try, when `--throttle` held it back: the figures it was held on.
    pub(super) next_held: Option<Admission>,
    /// The tries so far: counted, ran, failed, held back.
    pub(super) counts: TryCounts,
    /// How the run ended, once it has.
    pub(super) end: Option<RunVerdict>,
}

impl<'c> Runner<'c> {
    /// `start` and `wall_start` are the moment `retry` started: the budget counts from there.
    pub fn new(
        config: &'c Config,
        log: Log,
        signals: Signals,
        stdio: RunIo,
        around: Surroundings,
    ) -> Runner<'c> {
        // The fencing token of a replay's claim on this run.
        let token = around.keeper.as_ref().and_then(|k| k.borrow().token());
        let env = RunEnv::new(config, around.run_id, around.wall_start, token);
        let job = JobControl::new(around.terminal);
        Runner {
            config,
            log,
            start: around.start,
            env,
            watch: Watch::new(signals, stdio, job, around.inherited, around.keeper),
            stopper: Stopper::new(config),
            outer: around.outer,
            quota: Quota::new(around.quota, config.throttle),
            dead_letter: Recorder::new(around.dead_letter),
            repeat: config.repeat.map(Repeat::new),
            last_failed: None,
            last_ran: None,
            last_try_failed: false,
            in_a_row: 0,
            next_held: None,
            counts: TryCounts::default(),
            end: None,
        }
    }

    pub fn with_countdown(mut self, on: bool) -> Runner<'c> {
        self.watch.count_down(on);
        self
    }
}
