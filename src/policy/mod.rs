//! The functional core: the retry policy as pure code. No clock reads, no I/O, no processes;
//! time and randomness are passed in, so that every decision can be tested without waiting.

pub mod backoff;
pub mod budget;
pub mod classify;
pub mod conflict;
pub mod hook;
pub mod httpdate;
pub mod lock;
pub mod output;
pub mod plan;
pub mod pushback;
pub mod quota;
pub mod repeat;
pub mod schedule;
pub mod signal;
pub mod step;
pub mod throttle;
pub mod worst;

pub use backoff::{Backoff, Jitter, Wait, WaitPolicy};
pub use budget::{BudgetExceeded, Limit, LimitSource};
pub use classify::{Classifier, Form, Item, List, Outcome, OutputMatch, Reason, Verdict};
pub use conflict::{Conflict, conflicts};
pub use hook::Hook;
pub use httpdate::TimeSource;
pub use output::{CaptureMatcher, LineMatcher, Pattern};
pub use pushback::Requests;
pub use repeat::{Flaky, Repeat, RepeatCount, RepeatEnd, RepeatPolicy};
pub use schedule::{Decision, GiveUp, Policy, Schedule};
pub use signal::Signal;
pub use worst::{WorstCase, worst_case};
