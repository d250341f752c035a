//! `--every` (docs/simulation.md#arrivals): the clients arrive again and again, as a cron fleet
//! does, at 0, `every`, 2 × `every`, …, each time as many new runs as `--clients`; the arrivals
//! stop at a horizon, so that the simulation ends.

use std::time::Duration;

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
    every: u128,
    horizon: u128,
    /// Waves that have arrived.
    pub(super) waves: u32,
}

/// What comes after a wave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// The next wave, at this time.
    At(u64),
    /// None: the horizon is reached.
    Done,
    /// The next wave is due before the horizon, but after the virtual clock ends.
    PastClock,
}

impl Arrivals {
    pub(super) fn new(every: Duration, horizon: Duration) -> Arrivals {
        Arrivals {
            every: every.as_nanos().max(1),
            horizon: horizon.as_nanos(),
            waves: 0,
        }
    }

    /// Counts the wave arriving now; returns what comes next.
    pub(super) fn arrived(&mut self) -> Next {
        self.waves = self.waves.saturating_add(1);
        let next = u128::from(self.waves).saturating_mul(self.every);
        if next >= self.horizon {
            return Next::Done;
        }
        match u64::try_from(next) {
            // The clock's last nanosecond is where saturated events go: no wave is placed there.
            Ok(at) if at < u64::MAX => Next::At(at),
            _ => Next::PastClock,
        }
    }

    /// When the last wave arrived.
    pub(super) fn last(&self) -> Duration {
        let at = u128::from(self.waves.saturating_sub(1)).saturating_mul(self.every);
        Duration::from_nanos(u64::try_from(at).unwrap_or(u64::MAX))
    }
}
