//! `--throttle` in the simulation (docs/simulation.md#admission-control): the store that the
//! clients of a quota share, on the virtual clock. One [`Window`] counts the tries of every
//! client, as the quota's file or Redis key counts those of a fleet; before each try the store's
//! own step, [`admit`], decides with a draw from a stream of the throttle's own, so that the
//! waits are drawn from the same stream, in the same way, as without the throttle. A try is
//! counted when its outcome is known: a held one at once (by `admit`), one that ran when it
//! ends.
//!
//! The store also watches `p` after the outage, for the time it takes to fall below
//! [`P_RECOVERED`].

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::policy::throttle::{Admission, Ask, Counted, ThrottleSpec, Window, admit};

use super::clock::{millis, nanos};

/// `p` below this counts as recovered: nine tries in ten or more run.
pub const P_RECOVERED: f64 = 0.1;

/// What is added to the virtual clock's milliseconds to make the store's.
const STORE_EPOCH_MS: u64 = 1;

/// Mixed into the seed for the throttle's draws, so that their stream is not the waits'.
const DRAW_STREAM: u64 = 0x7468_726f_7474_6c65;

/// How far ahead of the simulated clock the throttle's store reads its time: `ahead_ms` until
/// `step_at`, `ahead_after_ms` from then on. A host whose clock was an hour ahead and is then
/// corrected is `ahead_ms` 3,600,000 and `ahead_after_ms` 0; one stepped forward, the other way
/// round. `retry --simulate` has no option for it (a run's clock is its host's); the throttle's
/// bench steps it to show how soon the window starts again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreClock {
    pub step_at: Duration,
    pub ahead_ms: u64,
    pub ahead_after_ms: u64,
}

impl StoreClock {
    /// How far ahead the store's clock is at virtual time `now` (ns).
    fn ahead_at(&self, now: u64) -> u64 {
        if now >= nanos(self.step_at) {
            self.ahead_after_ms
        } else {
            self.ahead_ms
        }
    }
}

/// The shared window, the stream of draws, and when `p` fell below [`P_RECOVERED`].
pub(super) struct Store {
    spec: ThrottleSpec,
    window: Window,
    draws: StdRng,
    /// When the outage ends: `p` is watched from then on.
    outage_end: u64,
    /// When `p` first fell below [`P_RECOVERED`], from `outage_end`.
    recovered: Option<u64>,
    clock: StoreClock,
}

impl Store {
    pub(super) fn new(spec: ThrottleSpec, seed: u64, outage_end: u64, clock: StoreClock) -> Store {
        Store {
            spec,
            window: Window::default(),
            draws: StdRng::seed_from_u64(seed ^ DRAW_STREAM),
            outage_end,
            recovered: None,
            clock,
        }
    }

    /// The store's milliseconds at virtual time `now`: a window whose slot starts at 0 is an
    /// empty one, so the store's clock never reads 0.
    fn store_ms(&self, now: u64) -> u64 {
        millis(now)
            .saturating_add(STORE_EPOCH_MS)
            .saturating_add(self.clock.ahead_at(now))
    }

    /// The store's step before a try at `now`: draws, decides, and counts a held try.
    pub(super) fn admit(&mut self, now: u64) -> Admission {
        let ask = Ask {
            spec: self.spec,
            draw: self.draws.random::<f64>(),
        };
        let at = self.store_ms(now);
        admit(&mut self.window, &ask, at)
    }

    /// Counts the outcome of a try that ran and ended at `now`.
    pub(super) fn count(&mut self, counted: Counted, now: u64) {
        let at = self.store_ms(now);
        self.window.count(counted, self.spec.window_ms(), at);
    }

    /// After an event at `now`: notes the first moment after the outage at which the window
    /// counts some try and `p` is below [`P_RECOVERED`]. The window is read from a copy, so
    /// that watching moves none of its slots.
    pub(super) fn watch(&mut self, now: u64) {
        if self.recovered.is_some() || now < self.outage_end {
            return;
        }
        let (window_ms, at) = (self.spec.window_ms(), self.store_ms(now));
        let mut window = self.window;
        window.advance(window_ms, at);
        let figures = window.figures(window_ms, at);
        if figures.requests > 0.0 && self.spec.p(figures) < P_RECOVERED {
            self.recovered = Some(now - self.outage_end);
        }
    }

    /// How long after the end of the outage `p` first fell below [`P_RECOVERED`], if it did.
    pub(super) fn recovered(&self) -> Option<u64> {
        self.recovered
    }
}
