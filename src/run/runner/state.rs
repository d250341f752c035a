//! What a run keeps from one try to the next, and how it starts.

use super::around::{OuterRun, Surroundings};
use super::dead_letter::Recorder;
use super::env::RunEnv;
use super::job_control::JobControl;
use super::quota::Quota;
use super::stop::Stopper;
use super::watch::Watch;
use crate::config::Config;
use crate::policy::step::RunState;
use crate::policy::throttle::Admission;
use crate::report::log::Log;
use crate::run::clock::Moment;
use crate::run::signals::Signals;
use crate::run::stdio::RunIo;
use crate::store::run_lock::{LockFile, LockPlace};

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
    /// What the run has come to so far: the schedule (or `--repeat`) that decides, the tries
    /// counted, how the last ones ended.
    pub(super) state: RunState<'c>,
    /// The next try, when `--throttle` held it back: the figures it was held on.
    pub(super) next_held: Option<Admission>,
    /// Where the file of `--lock` is, until the lock is taken.
    pub(super) lock_place: Option<LockPlace>,
    /// The lock of `--lock` once taken: last, so that it is let go after everything else of
    /// the run.
    pub(super) lock: Option<LockFile>,
    /// The lease of `--lock redis://…` once granted, let go when the runner is dropped.
    pub(super) lease: Option<std::rc::Rc<std::cell::RefCell<super::held::HeldLease>>>,
    /// `--once`: who claimed the key, and the grant's token, to mark it done with.
    pub(super) once_claim: Option<(u64, crate::policy::lock::LockHolder)>,
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
        let env =
            RunEnv::new(config, around.run_id, around.wall_start, token).with_trace(around.trace);
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
            state: RunState::new(&config.policy, config.repeat),
            next_held: None,
            lock_place: around.lock,
            lock: None,
            lease: None,
            once_claim: None,
        }
    }

    pub fn with_countdown(mut self, on: bool) -> Runner<'c> {
        self.watch.count_down(on);
        self
    }
}
