//! What the simulation counts as the tries start, in time order: the tries in all, the busiest
//! windows, the tries per interval in a bounded number of round bins, and, for `--throttle` and
//! `--every`, the tries sent during the outage and after it and the tries held back.

use std::time::Duration;

use super::clock::nanos;

/// The window over which the peak rate is counted. A second would hide what jitter changes: a
/// thousand clients retrying in the same millisecond and a thousand spread over one second both
/// make a thousand tries in that second.
pub const PEAK_WINDOW: Duration = Duration::from_millis(100);

/// Bins kept for the tries per interval; past them, neighbouring bins are merged.
pub const MAX_BINS: usize = 4000;

/// The width of a bin at the start: one millisecond.
const FIRST_BIN_NS: u64 = 1_000_000;

/// The busiest [`PEAK_WINDOW`]: how many tries started in it, and when it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    pub tries: u64,
    pub at: Duration,
}

impl Peak {
    /// The peak as tries per second.
    pub fn per_second(&self) -> f64 {
        self.tries as f64 / PEAK_WINDOW.as_secs_f64()
    }
}

/// Tries started per interval, from time 0 on: `tries[i]` started in `[i × width, (i+1) ×
/// width)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub width: Duration,
    pub tries: Vec<u64>,
}

impl Series {
    /// The same series in intervals `factor` times wider.
    pub fn merged(&self, factor: usize) -> Series {
        let factor = factor.max(1);
        Series {
            width: self
                .width
                .saturating_mul(u32::try_from(factor).unwrap_or(u32::MAX)),
            tries: self.tries.chunks(factor).map(|c| c.iter().sum()).collect(),
        }
    }
}

/// The busiest window seen so far, and the window being counted.
#[derive(Default)]
pub(super) struct PeakCounter {
    window: u64,
    count: u64,
    best: Peak,
}

impl PeakCounter {
    fn add(&mut self, now: u64) {
        let window = now / nanos(PEAK_WINDOW);
        if window != self.window {
            self.close();
            self.window = window;
            self.count = 0;
        }
        self.count += 1;
    }

    fn close(&mut self) {
        if self.count > self.best.tries {
            self.best = Peak {
                tries: self.count,
                at: Duration::from_nanos(self.window.saturating_mul(nanos(PEAK_WINDOW))),
            };
        }
    }

    pub(super) fn result(&mut self) -> Peak {
        self.close();
        self.best
    }
}

/// Counts the tries as they start, in time order.
pub(super) struct Recorder {
    /// Tries sent to the dependency, first tries included; held ones are not.
    pub(super) tries: u64,
    /// Tries that `--throttle` held back: they were tries of their runs, and were not sent.
    pub(super) held: u64,
    /// Of `tries`, those that started before the end of the outage, and the rest.
    pub(super) in_outage: u64,
    pub(super) after_outage: u64,
    /// When the outage ends (0 without one).
    outage_end: u64,
    pub(super) peak: PeakCounter,
    pub(super) peak_retries: PeakCounter,
    width: u64,
    /// The factor of the next widening: 2 and 5 in turn, so that the widths stay round (1ms,
    /// 2ms, 10ms, 20ms, 100ms, ...).
    next_factor: u64,
    bins: Vec<u64>,
}

impl Recorder {
    pub(super) fn new(outage_end: u64) -> Recorder {
        Recorder {
            tries: 0,
            held: 0,
            in_outage: 0,
            after_outage: 0,
            outage_end,
            peak: PeakCounter::default(),
            peak_retries: PeakCounter::default(),
            width: FIRST_BIN_NS,
            next_factor: 2,
            bins: Vec::with_capacity(MAX_BINS),
        }
    }

    /// Tries sent and held together: what the try limit of a simulation counts, since each is
    /// an event.
    pub(super) fn events(&self) -> u64 {
        self.tries.saturating_add(self.held)
    }

    pub(super) fn try_started(&mut self, now: u64, first: bool) {
        self.tries = self.tries.saturating_add(1);
        let side = if now < self.outage_end {
            &mut self.in_outage
        } else {
            &mut self.after_outage
        };
        *side = side.saturating_add(1);
        self.peak.add(now);
        if !first {
            self.peak_retries.add(now);
        }
        let bin = self.reach(now);
        self.bins[bin] += 1;
    }

    /// A try held back at `now`: not sent, so in no bin and no peak.
    pub(super) fn try_held(&mut self, now: u64) {
        self.held = self.held.saturating_add(1);
        self.reach(now);
    }

    /// Makes the series reach `now`; returns its bin.
    pub(super) fn reach(&mut self, now: u64) -> usize {
        let mut bin = now / self.width;
        while bin >= MAX_BINS as u64 {
            self.widen();
            bin = now / self.width;
        }
        // Below MAX_BINS, so it fits a usize.
        let bin = bin as usize;
        if bin >= self.bins.len() {
            self.bins.resize(bin + 1, 0);
        }
        bin
    }

    /// Merges every `next_factor` neighbouring bins into one, in place: nothing is allocated
    /// while the simulation runs.
    fn widen(&mut self) {
        let f = self.next_factor as usize;
        let merged = self.bins.len().div_ceil(f);
        for i in 0..merged {
            // Bin i is written after the bins from i × f on are read, and i ≤ i × f.
            let end = ((i + 1) * f).min(self.bins.len());
            let sum = self.bins[i * f..end].iter().sum();
            self.bins[i] = sum;
        }
        self.bins.truncate(merged);
        self.width = self.width.saturating_mul(self.next_factor);
        self.next_factor = if f == 2 { 5 } else { 2 };
    }

    pub(super) fn series(&self) -> Series {
        Series {
            width: Duration::from_nanos(self.width),
            tries: self.bins.clone(),
        }
    }
}
