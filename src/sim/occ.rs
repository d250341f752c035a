//! Model `occ` (docs/simulation.md#simulation): the optimistic-concurrency contention of the AWS
//! Architecture Blog's "Exponential Backoff And Jitter" (2015) and the simulator published with it.
//! Every client updates one shared record: a try reads the record, then writes it back, and the
//! write succeeds only if no other write landed since that client's read (a conditional write on a
//! version). Each of the four network hops (read request, read reply, write request, write reply)
//! takes |Normal(10 ms, 2 ms)|.
//!
//! Only two moments need the shared record: the read, which sees the writes that landed before
//! it, and the write. So the read is not an event of its own: a write succeeds when the last
//! successful write landed no later than this try's read.

use rand::RngExt;
use rand::rngs::StdRng;

use super::client::{Cause, Client, Phase};

/// The mean of one network hop, in nanoseconds.
const HOP_MEAN: f64 = 10_000_000.0;
/// Its standard deviation.
const HOP_SD: f64 = 2_000_000.0;

/// The model's parameters: the post's, fixed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Occ;

/// The shared record.
#[derive(Default)]
pub(super) struct Record {
    /// When the last successful write landed.
    last_write: Option<u64>,
}

impl Record {
    /// A try of `client` starts at `now`: its read and its write request cross the network.
    /// Returns when the write reaches the record, or when the try is stopped before that.
    pub(super) fn start(
        &mut self,
        client: &mut Client<'_>,
        now: u64,
        rng: &mut StdRng,
    ) -> Option<u64> {
        client.read_at = now.saturating_add(hop(rng));
        let write_at = client
            .read_at
            .saturating_add(hop(rng))
            .saturating_add(hop(rng));
        if write_at >= client.stop_at {
            // Stopped by its timeout or the budget before its write was sent.
            client.result = Err(Cause::Timeout);
            client.phase = Phase::End;
            return Some(client.stop_at);
        }
        client.phase = Phase::Write;
        Some(write_at)
    }

    /// The write of `client` reaches the record at `now`. Returns when the reply reaches the
    /// client, or when the try is stopped before that.
    pub(super) fn write(
        &mut self,
        client: &mut Client<'_>,
        now: u64,
        rng: &mut StdRng,
    ) -> Option<u64> {
        let seen = self.last_write.is_none_or(|at| at <= client.read_at);
        client.result = if seen {
            self.last_write = Some(now);
            Ok(())
        } else {
            Err(Cause::Conflict)
        };
        client.phase = Phase::End;
        let reply = now.saturating_add(hop(rng));
        if reply > client.stop_at {
            // The write may have landed, but the client saw a timeout, and tries again.
            client.result = Err(Cause::Timeout);
            return Some(client.stop_at);
        }
        Some(reply)
    }
}

/// One network hop: |Normal(10 ms, 2 ms)| in nanoseconds.
fn hop(rng: &mut StdRng) -> u64 {
    (HOP_MEAN + HOP_SD * standard_normal(rng)).abs() as u64
}

/// A draw from Normal(0, 1), by the Box–Muller transform of two uniform draws.
pub(super) fn standard_normal(rng: &mut StdRng) -> f64 {
    // In (0, 1], so that the logarithm is finite.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn normal_draws_have_the_mean_and_spread_asked_for() {
        let mut rng = StdRng::seed_from_u64(1);
        let n = 100_000;
        let draws: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
        assert!(draws.iter().all(|x| x.is_finite()));
        // About 68% within one standard deviation.
        let within = draws.iter().filter(|x| x.abs() < 1.0).count() as f64 / n as f64;
        assert!((within - 0.6827).abs() < 0.01, "{within}");
    }

    #[test]
    fn a_hop_takes_about_ten_milliseconds() {
        let mut rng = StdRng::seed_from_u64(2);
        let n = 10_000;
        let total: u64 = (0..n).map(|_| hop(&mut rng)).sum();
        let mean_ms = total as f64 / n as f64 / 1e6;
        assert!((mean_ms - 10.0).abs() < 0.1, "{mean_ms}");
    }
}
