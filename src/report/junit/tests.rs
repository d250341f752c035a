//! The cases the sink makes of hand-built events: held tries, the tries of a repeat that the
//! budget or a signal cut short, and the bound on the failed tries a case lists.

use std::time::{Duration, SystemTime};

use super::*;
use crate::config::{ParseOutcome, parse};
use crate::policy::throttle::{Admission, ThrottleSpec};
use crate::policy::{Outcome, Reason, Wait};
use crate::report::event::HeldReport;

fn facts_for(args: &[&str]) -> RunFacts {
    let config = match parse(
        ["retry"].iter().chain(args).chain(&["--", "true"]),
        SystemTime::UNIX_EPOCH,
    ) {
        ParseOutcome::Run(c) => *c,
        other => panic!("{other:?}"),
    };
    RunFacts::new(&config, "id".into())
}

fn retry_in(ms: u64) -> Decision {
    let d = Duration::from_millis(ms);
    Decision::Retry(Wait {
        base: d,
        delay: d,
        requested: None,
        clock: None,
    })
}

fn ended(attempt: u64, code: u8, decision: Decision) -> Event {
    let verdict = match code {
        0 => Verdict::Success(Reason::Default),
        _ => Verdict::Transient(Reason::Default),
    };
    Event::TryEnded(TryReport {
        attempt,
        outcome: Outcome::Exit(code),
        took: Duration::from_millis(5),
        verdict,
        decision,
        detail: None,
        killed: false,
        stopped_by_limit: false,
        signalled_after: None,
        in_a_row: 0,
    })
}

fn held(attempt: u64, decision: Decision) -> Event {
    Event::TryHeld(HeldReport {
        attempt,
        quota: "db".into(),
        spec: ThrottleSpec::default(),
        admission: Admission {
            p: 0.95,
            held: true,
            figures: Default::default(),
            window: ThrottleSpec::DEFAULT_WINDOW,
        },
        decision,
    })
}

/// The cases that `events` make, as a run of a replay hands them over.
fn cases_of(facts: &RunFacts, mut events: Vec<Event>) -> Cases {
    let shared = ReplayCases::default();
    let mut sink = Junit::to_replay(shared.clone());
    // The report is written when the run has ended, whatever its outcome.
    let outcome = RunOutcome::before_any_try(ExitStatus::Success);
    events.push(Event::RunEnded(Box::new(outcome)));
    for (k, event) in events.into_iter().enumerate() {
        let stamp = Stamp {
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(100 + k as u64),
            elapsed: Duration::from_secs(k as u64),
        };
        assert_eq!(sink.take(&Envelope { stamp, event }, facts), None);
    }
    shared.0.take()
}

fn gave_up(tries: u64, why: GiveUp, last: Option<Outcome>) -> Event {
    Event::GaveUp {
        tries,
        elapsed: Duration::from_secs(1),
        why,
        status: ExitStatus::LastExit(1),
        last,
        signal: None,
        streak: 0,
    }
}

#[test]
fn a_held_try_is_no_failed_try_and_a_success_after_held_tries_only_passes() {
    let facts = facts_for(&["-n", "3"]);
    let events = vec![
        held(1, retry_in(10)),
        ended(2, 0, Decision::Succeed),
        Event::Succeeded {
            attempt: 2,
            elapsed: Duration::from_secs(1),
            waited: Duration::ZERO,
            status: ExitStatus::Success,
            flaky: false,
            failed: 0,
        },
    ];
    let cases = cases_of(&facts, events);
    assert_eq!(cases.list.len(), 1);
    assert_eq!(cases.list[0].end, CaseEnd::Passed);
    assert_eq!(cases.list[0].name, "true");
}

#[test]
fn a_run_whose_last_try_was_held_fails_on_it_with_every_failed_try_as_a_rerun() {
    let facts = facts_for(&["-n", "3", "--label", "db job"]);
    let events = vec![
        ended(1, 1, retry_in(10)),
        held(2, retry_in(10)),
        held(3, Decision::GiveUp(GiveUp::Held)),
        gave_up(3, GiveUp::Held, Some(Outcome::Exit(1))),
    ];
    let cases = cases_of(&facts, events);
    let CaseEnd::Failed { failure, reruns } = &cases.list[0].end else {
        panic!("{cases:?}");
    };
    assert_eq!(failure.kind, "held");
    assert!(
        failure
            .message
            .starts_with("try 3/3 held back: 0 of 0 tries of quota db")
            && failure
                .message
                .ends_with("; gave up after 3 tries in 1s: the last try was held back by --throttle; the last that ran: exit 1"),
        "{failure:?}"
    );
    assert_eq!(reruns.len(), 1, "{reruns:?}");
    assert_eq!(reruns[0].message, "try 1/3 exited 1 after 5ms (transient)");
    assert_eq!(reruns[0].kind, "exit 1");
    assert_eq!(cases.list[0].name, "db job");
}

#[test]
fn the_last_failed_try_is_the_failure_and_the_others_reruns() {
    let facts = facts_for(&["-n", "3"]);
    let events = vec![
        ended(1, 1, retry_in(10)),
        ended(2, 2, retry_in(10)),
        ended(3, 3, Decision::GiveUp(GiveUp::Tries)),
        gave_up(3, GiveUp::Tries, Some(Outcome::Exit(3))),
    ];
    let cases = cases_of(&facts, events);
    let CaseEnd::Failed { failure, reruns } = &cases.list[0].end else {
        panic!("{cases:?}");
    };
    assert_eq!(
        failure.message,
        "try 3/3 exited 3 after 5ms (transient); gave up after 3 tries in 1s: exit 3"
    );
    assert_eq!(
        failure.detail,
        "try 3/3 exited 3 after 5ms (transient)\ngave up after 3 tries in 1s: exit 3"
    );
    let kinds: Vec<&str> = reruns.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["exit 1", "exit 2"]);
    assert_eq!(cases.list[0].time, Duration::from_secs(1));
}

#[test]
fn a_case_lists_the_last_thousand_failed_tries_and_counts_the_rest() {
    let facts = facts_for(&["-n", "0"]);
    let mut events: Vec<Event> = (1..=1500).map(|k| ended(k, 1, retry_in(1))).collect();
    events.push(ended(1501, 0, Decision::Succeed));
    events.push(Event::Succeeded {
        attempt: 1501,
        elapsed: Duration::from_secs(9),
        waited: Duration::ZERO,
        status: ExitStatus::Success,
        flaky: true,
        failed: 1500,
    });
    let cases = cases_of(&facts, events);
    let CaseEnd::Flaky(tries) = &cases.list[0].end else {
        panic!("not flaky");
    };
    assert_eq!(tries.len(), MOST_RERUNS);
    assert_eq!(tries[0].message, "try 501 exited 1 after 5ms (transient)");
    assert_eq!(cases.left_out, 500);
}

#[test]
fn a_try_of_a_repeat_cut_by_the_budget_is_skipped_unless_no_try_ran_to_its_end() {
    let facts = facts_for(&["--repeat", "5", "-B", "1s"]);
    let cut = Decision::Stop(RepeatEnd::Budget(None));
    let repeat_end = |tries| Event::RepeatEnded {
        count: RepeatCount {
            tries,
            ..RepeatCount::default()
        },
        why: RepeatEnd::Budget(None),
        status: ExitStatus::Success,
        elapsed: Duration::from_secs(1),
    };
    let events = vec![
        ended(1, 0, retry_in(0)),
        ended(2, 1, cut.clone()),
        repeat_end(1),
    ];
    let cases = cases_of(&facts, events);
    let names: Vec<&str> = cases.list.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["true (try 1)", "true (try 2)"]);
    assert_eq!(cases.list[0].end, CaseEnd::Passed);
    assert!(
        matches!(&cases.list[1].end, CaseEnd::Skipped(why) if why.ends_with("cut short by the end of the budget")),
        "{cases:?}"
    );
    let cases = cases_of(&facts, vec![ended(1, 1, cut), repeat_end(0)]);
    assert!(
        matches!(&cases.list[0].end, CaseEnd::Failed { failure, .. } if failure.kind == "budget"),
        "{cases:?}"
    );
}

#[test]
fn a_run_ends_once_and_an_error_of_retry_ends_it_with_an_error() {
    let facts = facts_for(&[]);
    let events = vec![
        ended(1, 1, retry_in(1)),
        Event::Error(Failure::Output("cannot write the output: disk full".into())),
        gave_up(2, GiveUp::Tries, Some(Outcome::Exit(1))),
    ];
    let cases = cases_of(&facts, events);
    assert_eq!(cases.list.len(), 1);
    let CaseEnd::Error { error, reruns } = &cases.list[0].end else {
        panic!("{cases:?}");
    };
    assert_eq!(error.message, "cannot write the output: disk full");
    assert_eq!(reruns.len(), 1);
}

#[test]
fn a_try_killed_by_a_signal_is_grouped_by_the_signal_as_the_docs_name_it() {
    let facts = facts_for(&["-n", "2"]);
    let Event::TryEnded(mut killed) = ended(1, 1, retry_in(10)) else {
        unreachable!()
    };
    killed.outcome = Outcome::Signal(crate::policy::Signal::KILL);
    let events = vec![
        Event::TryEnded(killed),
        ended(2, 3, Decision::GiveUp(GiveUp::Tries)),
        gave_up(2, GiveUp::Tries, Some(Outcome::Exit(3))),
    ];
    let cases = cases_of(&facts, events);
    let CaseEnd::Failed { reruns, .. } = &cases.list[0].end else {
        panic!("{cases:?}");
    };
    let kinds: Vec<&str> = reruns.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["signal SIGKILL"]);
}
