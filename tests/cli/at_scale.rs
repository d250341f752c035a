//! The simulations of a million and of ten thousand clients through the real binary: the
//! longest tests of this program, in a module named to come first, as libtest starts the tests
//! in the order of their names; the rest then run beside them instead of after.

use std::time::{Duration, Instant};

use crate::simulate::{figures, number, simulate, simulate_json};

#[test]
fn ten_thousand_clients_finish_within_a_generous_bound() {
    let started = Instant::now();
    let json = simulate_json(&[
        "--clients",
        "10000",
        "-n",
        "6",
        "--outage",
        "20s",
        "--capacity",
        "1000/s",
        "--seed",
        "1",
    ]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?}");
    let f = figures(&json);
    assert_eq!(f["clients"], 10_000);
    assert!(number(f, "tries") >= 10_000.0);
}

#[test]
fn runs_turned_away_are_no_tries_and_every_wave_due_comes() {
    // A million runs of a year's tries fill every place: every later wave is turned away.
    let args = [
        "--clients",
        "1000000",
        "--every",
        "1s",
        "--outage",
        "10s",
        "--latency",
        "1y",
        "-n",
        "2",
        "--seed",
        "1",
    ];
    let text = simulate(&args);
    assert!(text.contains("until 30s"), "{text}");
    assert!(
        text.contains(
            "arrivals:  30 waves of 1000000 clients, the last at 29s; 29000000 runs turned away"
        ),
        "{text}"
    );
    assert!(!text.contains("stopped:"), "{text}");
}
