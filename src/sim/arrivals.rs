//! `--every` (docs/simulation.md#arrivals): the clients arrive again and again, as a cron fleet
//! does, at 0, `every`, 2 × `every`, …, each time as many new runs as `--clients`; the arrivals
//! stop at a horizon, so that the simulation ends.

use std::time::Duration;

use super::clock::nanos;

/// Waves that arrive after the end of the outage: enough to see the fleet settle after it.
pub const WAVES_AFTER_OUTAGE: u32 = 20;

/// With `--throttle`, the windows that the arrivals last after the end of the outage at least,
/// so that `p` can be seen falling however long the window.
pub const WINDOWS_AFTER_OUTAGE: u32 = 5;

/// The last moment at which a wave may arrive: the end of the outage plus
/// [`WAVES_AFTER_OUTAGE`] periods, or [`WINDOWS_AFTER_OUTAGE`] windows of the throttle when that
/// is longer. A wave arrives at each multiple of `every` before it.
pub fn horizon(outage_end: Duration, every: Duration, window: Option<Duration>) -> Duration {
    let waves = every.saturating_mul(WAVES_AFTER_OUTAGE);
    let windows = window.map_or(Duration::ZERO, |w| w.saturating_mul(WINDOWS_AFTER_OUTAGE));
    outage_end.saturating_add(waves.max(windows))
}

/// The waves still to come.
pub(super) struct Arrivals {
    every: u64,
    horizon: u64,
    /// Waves that have arrived.
    pub(super) waves: u32,
}

impl Arrivals {
    pub(super) fn new(every: Duration, horizon: Duration) -> Arrivals {
        Arrivals {
            every: nanos(every).max(1),
            horizon: nanos(horizon),
            waves: 0,
        }
    }

    /// Counts the wave arriving now; returns when the next one arrives, if one does.
    pub(super) fn arrived(&mut self) -> Option<u64> {
        self.waves = self.waves.saturating_add(1);
        let next = u64::from(self.waves).checked_mul(self.every)?;
        (next < self.horizon).then_some(next)
    }
}
