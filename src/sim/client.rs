//! One simulated client: the run of `retry` it stands for, where it is in its current try, and
//! why a try failed.

use crate::policy::Schedule;

/// Why a try failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The dependency was down (model `outage`).
    Outage,
    /// The dependency was up but over its capacity (model `outage`).
    Overload,
    /// Another write landed between this try's read and its write (model `occ`).
    Conflict,
    /// The try was stopped by `--timeout` or the end of the budget before it ended.
    Timeout,
}

/// Where a client is in its current try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Its next event starts a try.
    Start,
    /// Its next event is its write reaching the record (model `occ`).
    Write,
    /// Its next event is the end of its try, when it learns the result.
    End,
    /// It succeeded or gave up.
    Done,
}

/// One simulated run of `retry`.
pub(super) struct Client<'p> {
    pub(super) schedule: Schedule<'p>,
    pub(super) phase: Phase,
    /// The try's result, decided by the dependency before the client learns it.
    pub(super) result: Result<(), Cause>,
    /// When the try under way is stopped by its timeout or the end of the run.
    pub(super) stop_at: u64,
    /// Model `occ`: when this try's read reached the record.
    pub(super) read_at: u64,
}
