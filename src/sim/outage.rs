//! Model `outage` (docs/simulation.md#simulation): the dependency fails every try until the outage
//! is over, then serves at most its capacity, as a rate limiter would: a try above it fails at once
//! as overload. Every try takes the same latency; the dependency decides when the try reaches it,
//! at the try's start, and the client learns the result when the try ends.

use std::time::Duration;

use super::client::{Cause, Client, Phase};
use super::clock::nanos;

/// The model's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Outage {
    /// How long every try fails, from time 0.
    pub until: Duration,
    /// Tries per second served once the outage is over; `None` serves every try.
    pub capacity: Option<f64>,
    /// How long each try takes.
    pub latency: Duration,
}

/// The dependency as the tries find it.
pub(super) struct Server {
    until: u64,
    latency: u64,
    limiter: Option<Limiter>,
}

impl Server {
    pub(super) fn new(outage: &Outage) -> Server {
        let until = nanos(outage.until);
        Server {
            until,
            latency: nanos(outage.latency),
            limiter: outage.capacity.map(|rate| Limiter::new(rate, until)),
        }
    }

    /// A try of `client` starts at `now`: decides its result and returns when it ends.
    pub(super) fn start(&mut self, client: &mut Client<'_>, now: u64) -> Option<u64> {
        client.result = if now < self.until {
            Err(Cause::Outage)
        } else if self.limiter.as_mut().is_none_or(|l| l.admit(now)) {
            Ok(())
        } else {
            Err(Cause::Overload)
        };
        let end = now.saturating_add(self.latency);
        client.phase = Phase::End;
        if end > client.stop_at {
            // Stopped by its timeout or the budget before the answer came: whatever the
            // dependency made of it, the client saw a timeout.
            client.result = Err(Cause::Timeout);
            return Some(client.stop_at);
        }
        Some(end)
    }
}

/// A token bucket that holds one second of tries (at least one): a burst of `rate` tries
/// passes at once, then `rate` per second. It starts full when the outage ends.
struct Limiter {
    per_ns: f64,
    most: f64,
    tokens: f64,
    at: u64,
}

impl Limiter {
    fn new(rate: f64, from: u64) -> Limiter {
        let most = rate.max(1.0);
        Limiter {
            per_ns: rate / 1e9,
            most,
            tokens: most,
            at: from,
        }
    }

    /// True when a try arriving at `now` is served.
    fn admit(&mut self, now: u64) -> bool {
        let elapsed = now.saturating_sub(self.at);
        self.tokens = (self.tokens + elapsed as f64 * self.per_ns).min(self.most);
        self.at = self.at.max(now);
        // A little slack absorbs the rounding of sums of small increments.
        if self.tokens >= 1.0 - 1e-9 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn the_limiter_lets_one_second_of_tries_through_at_once_then_its_rate() {
        let mut l = Limiter::new(10.0, 0);
        let served = (0..20).filter(|_| l.admit(0)).count();
        assert_eq!(served, 10);
        // A tenth of a second later, one more.
        assert!(l.admit(SECOND / 10));
        assert!(!l.admit(SECOND / 10));
        // Idle for a long time, it holds no more than one second's worth.
        let served = (0..100).filter(|_| l.admit(100 * SECOND)).count();
        assert_eq!(served, 10);
    }

    #[test]
    fn a_rate_below_one_per_second_still_serves_one_try_at_a_time() {
        let mut l = Limiter::new(0.5, 0);
        assert!(l.admit(0));
        assert!(!l.admit(SECOND));
        assert!(l.admit(2 * SECOND));
    }
}
