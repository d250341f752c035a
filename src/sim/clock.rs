//! The virtual clock: nanoseconds from the simulation's start, in 64 bits.

use std::time::Duration;

/// The end of the virtual clock: its nanoseconds are 64 bits, about 584 years. An event that
/// would come later is not simulated, and its client is counted in `past_clock`.
pub const CLOCK_END: Duration = Duration::from_nanos(u64::MAX);

/// A duration in nanoseconds, saturating at the clock's end.
pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Virtual nanoseconds as the quota's milliseconds.
pub(super) fn millis(ns: u64) -> u64 {
    ns / 1_000_000
}
