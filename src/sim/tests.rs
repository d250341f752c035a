use super::*;
use crate::policy::quota::QuotaParams;
use crate::policy::{Backoff, Classifier, Limit, WaitPolicy};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `-n tries -d delay -m cap -j jitter`, exponential ×2.
fn policy(tries: Option<u64>, delay: Duration, cap: Duration, jitter: Jitter) -> Policy {
    Policy {
        max_tries: tries,
        waits: WaitPolicy {
            backoff: Backoff::Exponential { factor: 2.0 },
            delay,
            max_delay: cap,
            jitter,
        },
        classifier: Classifier::default(),
        timeout: None,
        limit: None,
        consecutive: None,
    }
}

fn outage(clients: u32, until: Duration, capacity: Option<f64>) -> Scenario {
    Scenario {
        clients,
        model: Model::Outage(Outage {
            until,
            capacity,
            latency: ms(100),
        }),
        stagger: None,
        quota: None,
        throttle: None,
        every: None,
    }
}

fn occ(clients: u32) -> Scenario {
    Scenario {
        clients,
        model: Model::Occ,
        stagger: None,
        quota: None,
        throttle: None,
        every: None,
    }
}

fn gave_up(f: &Figures, why: &str) -> u32 {
    f.gave_up
        .iter()
        .find(|(w, _)| *w == why)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn the_same_seed_gives_the_same_figures_and_another_seed_others() {
    let p = policy(Some(6), s(1), s(30), Jitter::Full);
    let sc = outage(200, s(20), Some(50.0));
    let a = simulate(&p, &sc, 7);
    assert_eq!(a, simulate(&p, &sc, 7));
    assert_ne!(a.series, simulate(&p, &sc, 8).series);
    let o = occ(50);
    let p = policy(None, ms(10), s(2), Jitter::Full);
    assert_eq!(simulate(&p, &o, 3), simulate(&p, &o, 3));
}

#[test]
fn every_client_fails_through_the_outage_and_gives_up_when_its_tries_run_out() {
    // -n 3 -d 1s: the last try starts by 3.2s, long before the 10s outage ends.
    let f = simulate(
        &policy(Some(3), s(1), s(60), Jitter::Full),
        &outage(100, s(10), None),
        1,
    );
    assert_eq!(f.tries, 300);
    assert_eq!(f.failures.outage, 300);
    assert_eq!(f.succeeded, 0);
    assert_eq!(gave_up(&f, "tries"), 100);
    assert_eq!(f.unfinished, 0);
    assert!((f.per_client() - 3.0).abs() < 1e-9);
}

#[test]
fn without_a_try_limit_every_client_succeeds_once_the_outage_is_over() {
    let f = simulate(
        &policy(None, ms(500), s(4), Jitter::Full),
        &outage(100, s(10), None),
        2,
    );
    assert_eq!(f.succeeded, 100);
    assert_eq!(f.gave_up_in_all(), 0);
    assert_eq!(f.tries, f.failures.outage + 100);
    assert!(f.last_finish > s(10), "{:?}", f.last_finish);
    // The longest wait is 4s, so every client is back within 4s of the end, plus two tries.
    assert!(f.last_finish <= s(14) + ms(200), "{:?}", f.last_finish);
}

#[test]
fn without_jitter_the_clients_retry_in_lockstep_and_full_jitter_spreads_them() {
    let sc = outage(1000, s(60), None);
    let none = simulate(&policy(Some(6), s(2), s(60), Jitter::None), &sc, 3);
    let full = simulate(&policy(Some(6), s(2), s(60), Jitter::Full), &sc, 3);
    // Every client's first retry starts at the same instant: 100ms of try, then 2s.
    assert_eq!(none.peak_retries.tries, 1000);
    assert_eq!(none.peak_retries.at, s(2) + ms(100));
    assert_eq!(none.tries, full.tries);
    let ratio = none.peak_retries.per_second() / full.peak_retries.per_second();
    assert!(
        ratio > 5.0,
        "none {:?}, full {:?}",
        none.peak_retries,
        full.peak_retries
    );
    // Both start together: the first tries are the scenario's, not the policy's.
    assert_eq!(none.peak.tries, 1000);
    assert_eq!(full.peak.tries, 1000);
}

#[test]
fn a_stagger_spreads_the_first_tries() {
    let mut sc = outage(1000, s(60), None);
    sc.stagger = Some(s(10));
    let f = simulate(&policy(Some(1), s(1), s(60), Jitter::Full), &sc, 4);
    assert_eq!(f.tries, 1000);
    // About 10 per 100ms window; far from all 1000 at once.
    assert!(f.peak.tries < 40, "{:?}", f.peak);
}

#[test]
fn the_capacity_serves_at_most_its_rate_and_fails_the_rest_as_overload() {
    // No outage; 100 clients at once against 10 tries/s: 10 pass at once, then about 10 a
    // second, so the last is served after about 9 seconds.
    let f = simulate(
        &policy(None, ms(200), s(1), Jitter::Full),
        &outage(100, Duration::ZERO, Some(10.0)),
        5,
    );
    assert_eq!(f.succeeded, 100);
    assert!(f.failures.overload > 0);
    assert_eq!(f.failures.outage, 0);
    assert!(f.last_finish >= s(9), "{:?}", f.last_finish);
    assert!(f.last_finish < s(15), "{:?}", f.last_finish);
}

#[test]
fn a_shared_quota_lowers_the_tries_of_an_outage() {
    let p = policy(Some(10), ms(500), s(5), Jitter::Full);
    let mut sc = outage(200, s(120), None);
    let without = simulate(&p, &sc, 6);
    sc.quota = Some(QuotaParams::default());
    let with = simulate(&p, &sc, 6);
    assert_eq!(without.tries, 2000);
    assert!(gave_up(&with, "quota") > 150, "{:?}", with.gave_up);
    // First tries, a full bucket of 10, 0.2 per first try, and 1/s for the ~30s they last.
    assert!(with.tries < 300, "{}", with.tries);
}

#[test]
fn the_budget_ends_runs_that_cannot_fit_another_try() {
    let mut p = policy(None, s(1), s(4), Jitter::Full);
    p.limit = Limit::earliest(Some(s(20)), None);
    let f = simulate(&p, &outage(50, s(60), None), 7);
    assert_eq!(gave_up(&f, "budget"), 50);
    // A try still running at the end of the budget is stopped then.
    assert!(f.last_finish <= s(20), "{:?}", f.last_finish);
}

#[test]
fn a_timeout_shorter_than_the_latency_fails_every_try() {
    let mut p = policy(Some(4), ms(10), ms(100), Jitter::Full);
    p.timeout = Some(ms(50));
    let f = simulate(&p, &outage(20, Duration::ZERO, None), 8);
    assert_eq!(f.failures.timeout, 80);
    assert_eq!(f.succeeded, 0);
}

#[test]
fn a_timeout_is_classified_as_a_real_run_classifies_it() {
    let mut p = policy(Some(4), ms(10), ms(100), Jitter::Full);
    p.timeout = Some(ms(50));
    p.classifier.stop_on = "timeout".parse().unwrap();
    let f = simulate(&p, &outage(20, Duration::ZERO, None), 8);
    assert_eq!(f.tries, 20);
    assert_eq!(gave_up(&f, "permanent"), 20);
    // What the dependency refuses is retried whatever the lists say.
    let mut p = policy(Some(3), ms(10), ms(100), Jitter::Full);
    p.classifier.retry_on = Some("75".parse().unwrap());
    let f = simulate(&p, &outage(20, s(10), None), 8);
    assert_eq!(f.tries, 60);
}

#[test]
fn a_simulation_that_would_never_end_stops_at_the_try_limit_and_says_who_is_left() {
    // No try limit, and an outage of a year.
    let p = policy(None, ms(1), ms(1), Jitter::None);
    let f = simulate_up_to(&p, &outage(10, s(365 * 86400), None), 9, 10_000);
    assert_eq!(f.tries, 10_000);
    assert_eq!(f.unfinished, 10);
    assert_eq!(f.succeeded + f.gave_up_in_all(), 0);
    // Every try started is counted as it ended: none is left under way.
    let failed = f.failures.outage + f.failures.overload + f.failures.conflict + f.failures.timeout;
    assert_eq!(failed, f.tries);
}

#[test]
fn the_series_keeps_a_bounded_number_of_round_intervals_however_long_the_run() {
    // Waits of up to a day, and tries over weeks.
    let p = policy(Some(30), s(60), s(86_400), Jitter::Full);
    let f = simulate(&p, &outage(100, s(86_400 * 365), None), 10);
    assert!(f.series.tries.len() <= MAX_BINS);
    assert_eq!(f.series.tries.iter().sum::<u64>(), f.tries);
    let width_ms = f.series.width.as_millis();
    let digits = width_ms.to_string();
    assert!(
        digits.starts_with('1') || digits.starts_with('2'),
        "{width_ms}"
    );
    assert!(digits[1..].bytes().all(|b| b == b'0'), "{width_ms}");
    assert!(f.series.width * MAX_BINS as u32 >= f.last_finish);
}

#[test]
fn a_merged_series_keeps_every_try() {
    let series = Series {
        width: ms(10),
        tries: vec![1, 2, 3, 4, 5],
    };
    let merged = series.merged(2);
    assert_eq!(merged.width, ms(20));
    assert_eq!(merged.tries, [3, 7, 5]);
}

#[test]
fn occ_retries_until_every_client_has_written_once() {
    let f = simulate(&policy(None, ms(10), s(2), Jitter::Full), &occ(100), 11);
    assert_eq!(f.succeeded, 100);
    assert_eq!(f.tries, 100 + f.failures.conflict);
    // One write lands per round of about 40ms at best.
    assert!(f.last_finish > ms(100 * 20), "{:?}", f.last_finish);
}

#[test]
fn occ_with_a_try_limit_gives_up() {
    let f = simulate(&policy(Some(2), ms(10), s(2), Jitter::Full), &occ(100), 12);
    assert!(gave_up(&f, "tries") > 50, "{:?}", f.gave_up);
    assert_eq!(f.succeeded + gave_up(&f, "tries"), 100);
}

/// Calls (writes) and completion time of the post's setting, averaged over a few seeds:
/// 100 clients, a base of 10ms, a cap of 2s, retrying until they succeed.
fn occ_average(jitter: Jitter) -> (f64, f64) {
    let p = policy(None, ms(10), s(2), jitter);
    let runs = 5;
    let (mut calls, mut time) = (0.0, 0.0);
    for seed in 0..runs {
        let f = simulate(&p, &occ(100), seed);
        calls += f.tries as f64;
        time += f.last_finish.as_secs_f64();
    }
    (calls / runs as f64, time / runs as f64)
}

#[test]
fn occ_reproduces_the_post_full_jitter_does_about_half_the_work_of_plain_backoff() {
    let (none_calls, none_time) = occ_average(Jitter::None);
    let (full_calls, full_time) = occ_average(Jitter::Full);
    let (equal_calls, _) = occ_average(Jitter::Equal);
    let (decorrelated_calls, _) = occ_average(Jitter::Decorrelated);
    assert!(
        full_calls < 0.6 * none_calls,
        "full {full_calls}, none {none_calls}"
    );
    assert!(
        full_time < none_time,
        "full {full_time}s, none {none_time}s"
    );
    // Every jitter does less work than none.
    assert!(equal_calls < none_calls && decorrelated_calls < none_calls);
}

#[test]
fn compare_gives_a_row_per_jitter_and_per_quota_use() {
    let p = policy(Some(4), s(1), s(10), Jitter::Full);
    let mut sc = outage(20, s(5), None);
    let rows = compare(&p, &sc, 1);
    let jitters: Vec<Jitter> = rows.iter().map(|(v, _)| v.jitter).collect();
    assert_eq!(
        jitters,
        [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Decorrelated
        ]
    );
    assert!(rows.iter().all(|(v, _)| !v.quota));
    sc.quota = Some(QuotaParams::default());
    let rows = compare(&p, &sc, 1);
    assert_eq!(rows.len(), 8);
    assert_eq!(rows.iter().filter(|(v, _)| v.quota).count(), 4);
    // A policy of listed waits cannot be decorrelated.
    let mut listed = p.clone();
    listed.waits.backoff = Backoff::List(vec![s(1)]);
    let rows = compare(&listed, &outage(5, s(1), None), 1);
    assert!(rows.iter().all(|(v, _)| v.jitter != Jitter::Decorrelated));
    // The row of the policy's own jitter is the plain simulation.
    let plain = simulate(&p, &outage(20, s(5), None), 1);
    let rows = compare(&p, &outage(20, s(5), None), 1);
    assert_eq!(rows[1].1, plain);
}

#[test]
fn a_client_whose_next_event_is_past_the_clocks_end_is_counted_not_finished() {
    // Tries of 500 years: the second one would end past 584 years, where the clock ends.
    const YEAR: u64 = 365 * 24 * 3600 + 6 * 3600;
    let p = policy(Some(2), s(1), s(1), Jitter::None);
    let mut sc = outage(2, s(600 * YEAR), None);
    if let Model::Outage(o) = &mut sc.model {
        o.latency = s(500 * YEAR);
    }
    let f = simulate(&p, &sc, 1);
    assert_eq!(f.tries, 4);
    assert_eq!(f.past_clock, 2);
    assert_eq!((f.succeeded, f.gave_up_in_all()), (0, 0));
    // Nothing finished: no finish time was made up at the clock's end.
    assert_eq!(f.last_finish, Duration::ZERO);
    // Within the clock, nothing is past it.
    let f = simulate(&p, &outage(2, s(5), None), 1);
    assert_eq!(f.past_clock, 0);
}

/// The simulator sits beside the policy and below everything else: it may use the policy and
/// nothing above it (`run`, `report`, `cli`, `config`), so that it can be read and tested
/// alone.
#[test]
fn the_simulator_imports_from_the_policy_alone() {
    let files = [
        ("mod.rs", include_str!("mod.rs")),
        ("client.rs", include_str!("client.rs")),
        ("clock.rs", include_str!("clock.rs")),
        ("occ.rs", include_str!("occ.rs")),
        ("outage.rs", include_str!("outage.rs")),
        ("tests.rs", include_str!("tests.rs")),
    ];
    // Spelled in two halves, so that this file does not match itself.
    let root = ["crate", "::"].concat();
    for (file, text) in files {
        for (at, _) in text.match_indices(&root) {
            let path = &text[at + root.len()..];
            assert!(
                path.starts_with("policy"),
                "src/sim/{file} uses {}",
                path.lines().next().unwrap_or_default()
            );
        }
    }
}
