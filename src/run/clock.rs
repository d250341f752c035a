//! The clock of a run. The budget and `--deadline` are wall-clock limits
//! (docs/processes.md#signals-received-by-retry): on Linux they keep counting while the machine is
//! suspended (`CLOCK_BOOTTIME`), while a change of the time of day moves nothing. Elsewhere the
//! monotonic clock serves.

use std::time::{Duration, SystemTime};

use nix::libc;

use crate::report::event::Stamp;
use crate::report::log::Stamper;

/// The clock every time of a run is read from.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub const CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// A moment on `CLOCK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Moment(Duration);

impl Moment {
    pub fn now() -> Moment {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one `timespec` into `ts`, which outlives the call.
        // (nix's safe clock_gettime needs a feature of nix that retry does not build.)
        unsafe { libc::clock_gettime(CLOCK, &mut ts) };
        Moment(Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        ))
    }

    /// The moment `d` later, or `None` past the end of the clock (a wait that never ends).
    pub fn checked_add(self, d: Duration) -> Option<Moment> {
        self.0
            .checked_add(d)
            .filter(|t| t.as_secs() <= i64::MAX as u64)
            .map(Moment)
    }

    pub fn saturating_duration_since(self, earlier: Moment) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// Time since this moment.
    pub fn elapsed(self) -> Duration {
        Moment::now().saturating_duration_since(self)
    }

    /// The moment as an absolute `timespec` on `CLOCK`.
    pub fn timespec(self) -> libc::timespec {
        libc::timespec {
            tv_sec: self.0.as_secs() as libc::time_t,
            tv_nsec: self.0.subsec_nanos() as libc::c_long,
        }
    }
}

/// The clock of a run's log, which stamps each event with the time of day and the time since
/// `start`, the run's start: the one place the events' times are read.
pub fn stamps(start: Moment) -> Stamper {
    Box::new(move || Stamp {
        at: SystemTime::now(),
        elapsed: start.elapsed(),
    })
}

/// The moment `d` from now, or `None` when that is past the end of the clock: durations come
/// from the user and may be as long as `Duration::MAX`.
pub fn after(d: Duration) -> Option<Moment> {
    Moment::now().checked_add(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/uptime counts from boot, suspended time included, as CLOCK_BOOTTIME does.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_clock_counts_from_boot_as_proc_uptime_does() {
        let before = Moment::now();
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let after = Moment::now();
        let uptime = Duration::from_secs_f64(uptime);
        assert!(
            uptime + Duration::from_millis(20) >= before.0
                && uptime <= after.0 + Duration::from_millis(20),
            "uptime {uptime:?}, clock {before:?}..{after:?}"
        );
        assert_eq!(CLOCK, libc::CLOCK_BOOTTIME);
    }

    #[test]
    fn moments_order_and_saturate() {
        let a = Moment(Duration::from_secs(5));
        let b = a.checked_add(Duration::from_millis(1500)).unwrap();
        assert!(b > a);
        assert_eq!(b.saturating_duration_since(a), Duration::from_millis(1500));
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
        assert_eq!(a.checked_add(Duration::MAX), None);
    }
}
