//! The runner seen through its events: a run driven through the library, with a sink that
//! collects every event instead of writing text, for real child processes.

use std::time::{Duration, SystemTime};

use crate::common;

use retry::config::{Config, ParseOutcome, parse};
use retry::exit::ExitStatus;
use retry::outcome::{RunVerdict, TryCounts};
use retry::policy::{Decision, GiveUp, Outcome};
use retry::report::event::Event;
use retry::report::log::{Collect, Log};

fn config(args: &[&str]) -> Config {
    match parse(["retry"].iter().chain(args), SystemTime::now()) {
        ParseOutcome::Run(config) => *config,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Runs `args` and returns its status and every event it reported.
fn run(args: &[&str]) -> (ExitStatus, Vec<Event>) {
    let config = config(args);
    let collect = Collect::default();
    let clock = retry::run::clock::stamps(retry::run::clock::Moment::now());
    let log = Log::new(
        Box::new(std::io::sink()),
        &config,
        false,
        "test".into(),
        clock,
    )
    .with_sink(Box::new(collect.clone()));
    let status = retry::run::run_reported(&config, log, 7);
    let events = collect.0.borrow().clone();
    (status, events)
}

/// The events' names, for the order of a run.
fn names(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e {
            Event::Start { .. } => "start",
            Event::TryStarted { .. } => "try_started",
            Event::TryOutputDone { .. } => "output_done",
            Event::TryEnded(_) => "try_ended",
            Event::Wait { .. } => "wait",
            Event::Succeeded { .. } => "succeeded",
            Event::GaveUp { .. } => "gave_up",
            Event::Concluded { .. } => "concluded",
            Event::RunEnded(_) => "run_ended",
            _ => "other",
        })
        .collect()
}

// One test runs every scenario, in a process of its own: the runner installs process-wide
// signal handlers and reaps any child, those of the other tests too.
#[test]
fn a_run_reports_its_tries_waits_and_end_as_events() {
    common::alone(
        "events::a_run_reports_its_tries_waits_and_end_as_events",
        every_scenario,
    );
}

fn every_scenario() {
    // Gives up after three tries that exit 3.
    let (status, events) = run(&["-n", "3", "-d", "1ms", "--", "sh", "-c", "exit 3"]);
    assert_eq!(status, ExitStatus::LastExit(3));
    assert_eq!(
        names(&events),
        [
            "start",
            "try_started",
            "output_done",
            "try_ended",
            "wait",
            "try_started",
            "output_done",
            "try_ended",
            "wait",
            "try_started",
            "output_done",
            "try_ended",
            "gave_up",
            "concluded",
            "run_ended"
        ]
    );
    let Some(Event::TryEnded(last)) = events
        .iter()
        .rev()
        .find(|e| matches!(e, Event::TryEnded(_)))
    else {
        panic!("no try");
    };
    assert_eq!(last.outcome, Outcome::Exit(3));
    assert_eq!(last.decision, Decision::GiveUp(GiveUp::Tries));
    assert!(
        matches!(
            &events[events.len() - 3],
            Event::GaveUp {
                tries: 3,
                why: GiveUp::Tries,
                ..
            }
        ),
        "{events:?}"
    );
    // The run's outcome, the one value its records read, ends the events.
    let Some(Event::RunEnded(outcome)) = events.last() else {
        panic!("no outcome: {events:?}");
    };
    assert_eq!(outcome.status, ExitStatus::LastExit(3));
    assert_eq!(outcome.verdict, RunVerdict::GaveUp(GiveUp::Tries));
    let counts = TryCounts {
        counted: 3,
        ran: 3,
        failed: 3,
        held: 0,
    };
    assert_eq!(outcome.tries, counts);
    assert_eq!(outcome.last, Some(Outcome::Exit(3)));

    // A first try that succeeds: no wait, no announcement.
    let (status, events) = run(&["-n", "3", "--", "true"]);
    assert_eq!(status, ExitStatus::Success);
    assert_eq!(
        names(&events),
        [
            "start",
            "try_started",
            "output_done",
            "try_ended",
            "succeeded",
            "run_ended"
        ]
    );

    // A try that times out reports it, with the time it took.
    let (status, events) = run(&["-n", "1", "-t", "100ms", "-k", "0", "--", "sleep", "5"]);
    assert_eq!(status, ExitStatus::Timeout);
    let Some(Event::TryEnded(r)) = events.iter().find(|e| matches!(e, Event::TryEnded(_))) else {
        panic!("no try: {events:?}");
    };
    assert_eq!(r.outcome, Outcome::Timeout);
    assert!(r.took >= Duration::from_millis(100) && r.took < Duration::from_secs(4));
}
