use super::recorder::MAX_BINS;
use super::*;
use crate::policy::quota::QuotaParams;
use crate::policy::throttle::ThrottleSpec;
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
        store_clock: StoreClock::default(),
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
        store_clock: StoreClock::default(),
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
fn each_run_of_a_cron_fleet_has_its_whole_budget_from_its_own_arrival() {
    // -n 3 -B 4m, a wave every 5m, a 1m outage: the first wave's runs give up on their tries,
    // every later wave arrives after the outage, and succeeds at its first try.
    let mut p = policy(Some(3), s(1), s(60), Jitter::Full);
    p.limit = Limit::earliest(Some(s(240)), None);
    let mut sc = outage(10, s(60), None);
    sc.every = Some(s(300));
    let f = simulate(&p, &sc, 1);
    assert_eq!((f.fleet.waves, f.clients), (21, 210));
    assert_eq!(f.succeeded, 200, "{:?}", f.gave_up);
    assert_eq!(gave_up(&f, "tries"), 10);
    assert_eq!(gave_up(&f, "budget"), 0);
    assert_eq!(f.failures.timeout, 0);
    // The stagger is part of the run's time, from its arrival: a budget shorter than a wave
    // but longer than the stagger and the tries leaves every run after the outage its tries.
    sc.stagger = Some(s(20));
    p.limit = Limit::earliest(Some(s(50)), None);
    let f = simulate(&p, &sc, 1);
    assert_eq!(f.succeeded, 200, "{:?}", f.gave_up);
    assert!(f.last_finish > s(6000), "{:?}", f.last_finish);
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

/// The fleet of the throttle's target: 1,000 clients arriving every minute at a dependency
/// down for 10 minutes, with the defaults of `retry` (3 tries, exponential backoff from 1s ×2
/// capped at 1m, full jitter; tries of 100ms) and the quota at its defaults.
fn cron_fleet(throttle: Option<ThrottleSpec>) -> (Policy, Scenario) {
    let p = policy(Some(3), s(1), s(60), Jitter::Full);
    let mut sc = outage(1000, s(600), None);
    sc.every = Some(s(60));
    sc.quota = Some(QuotaParams::default());
    sc.throttle = throttle;
    (p, sc)
}

/// Tries sent in each minute of the simulation.
fn per_minute(f: &Figures) -> Vec<u64> {
    let factor = s(60).as_nanos() / f.series.width.as_nanos();
    assert_eq!(s(60).as_nanos() % f.series.width.as_nanos(), 0);
    f.series.merged(factor as usize).tries
}

#[test]
fn the_throttle_holds_a_cron_fleet_to_a_trickle_through_an_outage_and_lets_it_back_after() {
    let spec = ThrottleSpec::default();
    let (p, alone) = cron_fleet(None);
    let (_, throttled) = cron_fleet(Some(spec));
    let quota = simulate(&p, &alone, 1);
    let with = simulate(&p, &throttled, 1);
    // 30 waves, to the end of the outage plus 20 minutes, in both.
    for f in [&quota, &with] {
        assert_eq!((f.fleet.waves, f.clients), (30, 30_000));
        assert_eq!(f.fleet.in_outage + f.fleet.after_outage, f.tries);
    }
    // The quota alone sends every first try and a few retries: about 1,010 a minute.
    assert!(
        (10_000..10_400).contains(&quota.fleet.in_outage),
        "{:?}",
        quota.fleet
    );
    // At most 30% of that with the throttle, the first minute's burst included.
    let share = with.fleet.in_outage as f64 / quota.fleet.in_outage as f64;
    assert!(share <= 0.30, "{share}: {:?} {:?}", with.fleet, quota.fleet);
    // After the first window, at most 20% a minute, minute by minute.
    let (q, t) = (per_minute(&quota), per_minute(&with));
    let first_window = (spec.window.as_secs() / 60) as usize;
    for minute in first_window..10 {
        let share = t[minute] as f64 / q[minute] as f64;
        assert!(
            share <= 0.20,
            "minute {minute}: {} of {}",
            t[minute],
            q[minute]
        );
    }
    // The first minute's burst runs in full: no history can stop it.
    assert!(t[0] >= 1000, "{}", t[0]);
    // After the outage, p falls below 0.1 within 4 windows.
    let recovered = with.fleet.recovered.expect("p falls below 0.1");
    assert!(recovered <= spec.window * 4, "{recovered:?}");
    assert!(quota.fleet.recovered.is_none());
    // The runs whose last try was held gave up so, and held tries were never sent.
    assert!(gave_up(&with, "held") > 1000, "{:?}", with.gave_up);
    assert!(with.fleet.held > with.tries, "{:?}", with.fleet);
    assert_eq!(gave_up(&quota, "held"), 0);
    assert!(quota.gave_up.iter().all(|(why, _)| *why != "held"));
}

#[test]
fn a_healthy_dependency_loses_no_try_to_the_throttle_and_the_draws_move_no_wait() {
    // No outage, and stagger draws from the waits' stream on every wave: a throttle that drew
    // from that stream would move every later wave.
    let (p, mut sc) = cron_fleet(None);
    if let Model::Outage(o) = &mut sc.model {
        o.until = Duration::ZERO;
    }
    sc.stagger = Some(s(10));
    let without = simulate(&p, &sc, 2);
    sc.throttle = Some(ThrottleSpec::default());
    let with = simulate(&p, &sc, 2);
    assert_eq!(with.fleet.held, 0);
    assert_eq!(with.series, without.series);
    assert_eq!(with.succeeded, with.clients);
    // p is below 0.1 from the first event that counted a try.
    assert!(with.fleet.recovered.is_some_and(|d| d < s(1)));
}

#[test]
fn the_waves_stop_at_the_end_of_the_outage_plus_twenty_periods_or_five_windows() {
    use arrivals::horizon;
    assert_eq!(horizon(s(600), s(60), None), s(1800));
    assert_eq!(horizon(s(600), s(60), Some(s(120))), s(1800));
    assert_eq!(horizon(s(600), s(60), Some(s(300))), s(2100));
    assert_eq!(horizon(s(10), s(1), None), s(30));
    let mut sc = outage(7, s(10), None);
    sc.every = Some(s(1));
    let f = simulate(&policy(Some(2), ms(100), s(1), Jitter::Full), &sc, 3);
    // Waves at 0s, 1s, ..., 29s.
    assert_eq!(f.fleet.waves, 30);
    assert_eq!(f.clients, 210);
    assert_eq!(f.succeeded + f.gave_up_in_all(), 210);
    // Without --every, one wave.
    let f = simulate(
        &policy(Some(2), ms(100), s(1), Jitter::Full),
        &outage(7, s(10), None),
        3,
    );
    assert_eq!(f.fleet.waves, 1);
}

#[test]
fn runs_that_finished_leave_their_place_to_later_waves() {
    let (p, sc) = cron_fleet(Some(ThrottleSpec::default()));
    let mut run = Run::new(&p, &sc, 4, MAX_TRIES, sc.horizon());
    let mut most = 0;
    while let Some((now, id)) = run.queue.pop() {
        run.step(now, id);
        most = most.max(run.clients.len());
    }
    // Each wave is done within seconds, long before the next: one wave's places serve all 30.
    assert_eq!(most, 1000);
    assert_eq!(run.tally.arrived, 30_000);
}

#[test]
fn a_wave_beyond_the_most_clients_under_way_is_cut_and_counted() {
    // Runs of a year's tries under way, and a wave every second: the second wave finds no place.
    let p = policy(Some(2), s(1), s(1), Jitter::None);
    let mut sc = outage(MAX_CLIENTS, s(10), None);
    if let Model::Outage(o) = &mut sc.model {
        o.latency = s(86_400 * 365);
    }
    sc.every = Some(s(5));
    let f = simulate_up_to(&p, &sc, 5, 2 * u64::from(MAX_CLIENTS));
    assert_eq!(f.clients, MAX_CLIENTS);
    // Runs turned away are no tries: every wave due comes, to the horizon of 1m50s.
    assert_eq!(f.fleet.waves, 22, "{:?}", f.stopped);
    assert_eq!(f.fleet.turned_away, 21 * u64::from(MAX_CLIENTS));
    assert_eq!(f.stopped, None);
}

#[test]
fn the_bound_on_tries_stops_the_waves_and_says_at_which() {
    // No try limit against a 10s outage, a wave every second, and a bound of 100 tries.
    let p = policy(None, ms(100), ms(100), Jitter::None);
    let mut sc = outage(5, s(10), None);
    sc.every = Some(s(1));
    let f = simulate_up_to(&p, &sc, 1, 100);
    let stopped = f.stopped.expect("the bound stopped it");
    assert_eq!(stopped.by, Bound::Tries);
    assert!(stopped.cut);
    assert_eq!(stopped.wave, f.fleet.waves);
    assert!(f.fleet.waves < 30, "{:?}", f.fleet);
    assert_eq!(stopped.at, s(u64::from(f.fleet.waves) - 1));
    assert!(f.unfinished > 0);
    // Far from it, nothing is said.
    assert_eq!(simulate(&p, &sc, 1).stopped, None);
}

#[test]
fn waves_due_past_the_clocks_end_are_said_to_be_cut() {
    // A wave every 200 years: the fourth would arrive at 600 years, past the clock's 584.
    const YEAR: u64 = 365 * 24 * 3600 + 6 * 3600;
    let p = policy(Some(2), s(1), s(1), Jitter::None);
    let mut sc = outage(3, s(10), None);
    sc.every = Some(s(200 * YEAR));
    let f = simulate(&p, &sc, 1);
    assert_eq!(f.fleet.waves, 3);
    let stopped = f.stopped.expect("the clock stopped it");
    assert_eq!(
        (stopped.by, stopped.wave, stopped.cut),
        (Bound::Clock, 3, true)
    );
    assert_eq!(stopped.at, s(400 * YEAR));
    // A client past the clock is said too, with its one wave, and no wave was cut.
    let mut sc = outage(2, s(600 * YEAR), None);
    if let Model::Outage(o) = &mut sc.model {
        o.latency = s(500 * YEAR);
    }
    let stopped = simulate(&p, &sc, 1).stopped.expect("the clock stopped it");
    assert_eq!(
        (stopped.by, stopped.wave, stopped.cut),
        (Bound::Clock, 1, false)
    );
}

#[test]
fn the_figures_know_whether_the_simulation_outlasted_the_outage() {
    let p = policy(Some(3), s(1), s(60), Jitter::Full);
    let f = simulate(&p, &outage(10, s(3600), None), 1);
    assert!(f.fleet.end < s(3600), "{:?}", f.fleet.end);
    let f = simulate(&p, &outage(10, s(2), None), 1);
    assert!(f.fleet.end >= s(2), "{:?}", f.fleet.end);
}

#[test]
fn compare_with_the_throttle_sets_the_herd_controls_side_by_side() {
    let (p, sc) = cron_fleet(Some(ThrottleSpec::default()));
    let rows = compare(&p, &sc, 1);
    let variants: Vec<(bool, bool)> = rows.iter().map(|(v, _)| (v.quota, v.throttle)).collect();
    assert_eq!(variants, [(false, false), (true, false), (true, true)]);
    assert!(rows.iter().all(|(v, _)| v.jitter == Jitter::Full));
    // Without a quota every try runs: 3 a run in the outage.
    assert_eq!(rows[0].1.fleet.in_outage, 30_000);
    assert!(rows[2].1.fleet.in_outage < rows[1].1.fleet.in_outage);
    assert_eq!(rows[2].1, simulate(&p, &sc, 1));
    // A long window makes the waves last longer after the outage: in every row alike.
    let (p, mut sc) = cron_fleet(Some("2:window=5m".parse().unwrap()));
    sc.clients = 10;
    let rows = compare(&p, &sc, 1);
    assert!(rows.iter().all(|(_, f)| f.fleet.waves == 35), "{rows:?}");
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
        ("admission.rs", include_str!("admission.rs")),
        ("try_end.rs", include_str!("try_end.rs")),
        ("arrivals.rs", include_str!("arrivals.rs")),
        ("recorder.rs", include_str!("recorder.rs")),
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

#[test]
fn the_herd_pages_fleet_with_its_budget_and_stagger_is_held_back_and_lets_the_runs_after_through() {
    // docs/herd.md's crontab line for 200 hosts (`--stagger 20s -n 3 -B 50s --quota … --throttle
    // 2`), as a fleet of 1,000 against a 10-minute outage.
    let spec = ThrottleSpec::default();
    let (mut p, mut alone) = cron_fleet(None);
    p.limit = Limit::earliest(Some(s(50)), None);
    alone.stagger = Some(s(20));
    let with_throttle = Scenario {
        throttle: Some(spec),
        ..alone.clone()
    };
    for seed in 1..=3 {
        let quota = simulate(&p, &alone, seed);
        let with = simulate(&p, &with_throttle, seed);
        let share = with.fleet.in_outage as f64 / quota.fleet.in_outage as f64;
        assert!(share <= 0.30, "seed {seed}: {share}");
        let (q, t) = (per_minute(&quota), per_minute(&with));
        for minute in 2..10 {
            assert!(
                t[minute] * 5 <= q[minute],
                "seed {seed}, minute {minute}: {} of {}",
                t[minute],
                q[minute]
            );
        }
        let recovered = with.fleet.recovered.expect("p falls below 0.1");
        assert!(recovered <= spec.window * 4, "seed {seed}: {recovered:?}");
        // The waves that arrive once p is below 0.1: at least 95% of their runs succeed.
        let (runs, succeeded) = (
            with.fleet.after_recovery,
            with.fleet.succeeded_after_recovery,
        );
        assert!(runs >= 10_000, "seed {seed}: {runs} runs after recovery");
        assert!(
            u64::from(succeeded) * 100 >= u64::from(runs) * 95,
            "seed {seed}: {succeeded} of {runs}"
        );
        // Without the throttle nothing is watched, and nothing counted after it.
        assert_eq!(
            (
                quota.fleet.after_recovery,
                quota.fleet.succeeded_after_recovery
            ),
            (0, 0)
        );
    }
}

#[test]
fn a_store_clock_stepped_an_hour_either_way_at_the_end_of_the_outage_recovers_within_a_window() {
    let spec = ThrottleSpec::default();
    let (p, mut sc) = cron_fleet(Some(spec));
    let hour = 3_600_000;
    for (ahead_ms, ahead_after_ms) in [(hour, 0), (0, hour)] {
        sc.store_clock = StoreClock {
            step_at: s(600),
            ahead_ms,
            ahead_after_ms,
        };
        let f = simulate(&p, &sc, 1);
        // Held back through the outage as with a right clock.
        assert!(f.fleet.held > f.tries, "{:?}", f.fleet);
        let recovered = f.fleet.recovered.expect("p falls below 0.1");
        assert!(
            recovered <= spec.window,
            "ahead {ahead_ms} ms, then {ahead_after_ms} ms: {recovered:?}"
        );
    }
}
