//! Every option that takes a Redis URL (docs/redis.md), run in turn against one store of a server
//! that a test has started, each with a short policy, and each checked by what the server then
//! holds: a token the quota took and a try the throttle counted (as the dry run reads them), the
//! runs the dead letters and the history hold (as the listing and `--stats` read them), the run
//! a replay resolves, the run a forget drops and what a prune drops; and `--lock`, held by one
//! run while another is turned away naming it, with a higher fencing token for the next. One set
//! of servers a form of URL serves every option, so that the test of each form stays short.

use std::path::Path;
use std::process::Output;

use crate::common::{STEP_LIMIT, event, json_lines, stderr_of, stdout_of, wait_until};

/// Runs `--quota`, `--throttle`, `--dead-letter`, `--history`, `--replay` (listing and running),
/// `--forget`, `--prune`, `--stats` and `--lock` against the store `url`, which nothing else of the test
/// uses, through `retry`: `retry` in `dir` with the test's environment (the user and password
/// in it, not in the URL, so that a replay's runs have them too) and these arguments. Returns
/// every output, for the caller to look for the password in.
pub fn every_option(
    dir: &Path,
    url: &str,
    retry: &(dyn Fn(&[&str]) -> Output + Sync),
) -> Vec<Output> {
    let mut outputs = Vec::new();
    let mut check = |out: Output, code: i32, what: &str| -> String {
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(code), "{url}: {what}: {err}");
        assert!(!err.contains("warning"), "{url}: {what}: {err}");
        let said = stdout_of(&out);
        outputs.push(out);
        said
    };
    let quota = format!("{url}:ratio=0,floor=0,cap=5");
    let ok = dir.join("ok");
    let _ = std::fs::remove_file(&ok);
    // A run that takes a token for its retry, and gives up: its command succeeds once `ok` is.
    let out = retry(&[
        "-n",
        "2",
        "-d",
        "10ms",
        "--quota",
        &quota,
        "--dead-letter",
        url,
        "--history",
        url,
        "--",
        "sh",
        "-c",
        "test -e ok",
    ]);
    check(out, 1, "--quota");
    // A run of one try, which the throttle counts (it holds no first try back before any count).
    let out = retry(&[
        "-n",
        "1",
        "--quota",
        &quota,
        "--throttle",
        "2",
        "--dead-letter",
        url,
        "--history",
        url,
        "--",
        "false",
    ]);
    check(out, 1, "--throttle");
    let out = retry(&[
        "--dry-run",
        "-n",
        "2",
        "--quota",
        &quota,
        "--throttle",
        "2",
        "--log-format",
        "json",
    ]);
    let plan = json_lines(&check(out, 0, "--dry-run --quota --throttle"));
    let plan = event(&plan, "plan_start");
    assert_eq!(plan["quota_tokens"].as_f64(), Some(4.0), "{url}: {plan}");
    assert_eq!(
        plan["throttle_requests"].as_f64(),
        Some(1.0),
        "{url}: {plan}"
    );
    assert_eq!(
        plan["throttle_accepts"].as_f64(),
        Some(0.0),
        "{url}: {plan}"
    );

    let listing = |check: &mut dyn FnMut(Output, i32, &str) -> String, all: bool| {
        let mut args = vec!["--replay", url, "--dry-run", "--log-format", "json"];
        if all {
            args.push("--all");
        }
        json_lines(&check(retry(&args), 0, "--replay --dry-run"))
    };
    let pending = listing(&mut check, false);
    assert_eq!(pending.len(), 2, "{url}: {pending:?}");
    let id_of = |command: &str| {
        let run = pending
            .iter()
            .find(|p| p["command"].as_array().and_then(|c| c.last()) == Some(&command.into()))
            .unwrap_or_else(|| panic!("{url}: no run of {command} in {pending:?}"));
        run["id"].as_str().unwrap().to_string()
    };
    let (resolved, forgotten) = (id_of("test -e ok"), id_of("false"));
    let said = check(retry(&["--forget", url, &forgotten]), 0, "--forget");
    assert!(said.contains("forgot 1 run"), "{url}: {said}");
    std::fs::write(&ok, "").unwrap();
    check(retry(&["--replay", url, "-n", "1"]), 0, "--replay");
    let all = listing(&mut check, true);
    let mut states: Vec<(&str, &str)> = all
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["state"].as_str().unwrap()))
        .collect();
    states.sort_by_key(|&(_, state)| state);
    assert_eq!(
        states,
        [
            (forgotten.as_str(), "forgotten"),
            (resolved.as_str(), "resolved")
        ],
        "{url}"
    );
    // The history holds both runs, and the replayed one.
    let said = check(
        retry(&["--stats", url, "--log-format", "json"]),
        0,
        "--stats",
    );
    let stats = json_lines(&said);
    assert_eq!(event(&stats, "stats_end")["runs"], 3, "{url}: {said}");
    let said = check(retry(&["--prune", url, "--older-than", "0s"]), 0, "--prune");
    assert!(
        said.contains("dropped 1 resolved, 1 forgotten") && said.contains("dropped 3 runs"),
        "{url}: {said}"
    );
    outputs.extend(lock(dir, url, retry));
    outputs
}

/// `--lock url`: a run holds it while its try waits for a file; another run is turned away
/// with 75, naming the holder's run; once the holder has let go, the next run gets the lock
/// with a higher fencing token.
fn lock(dir: &Path, url: &str, retry: &(dyn Fn(&[&str]) -> Output + Sync)) -> Vec<Output> {
    let (held, go, next) = (
        dir.join("lock-held"),
        dir.join("lock-go"),
        dir.join("lock-next"),
    );
    for file in [&held, &go, &next] {
        let _ = std::fs::remove_file(file);
    }
    let hold = format!(
        "echo \"$RETRY_FENCING_TOKEN $RETRY_RUN_ID\" > '{0}.new' && mv '{0}.new' '{0}'; \
         while [ ! -e '{1}' ]; do sleep 0.02; done",
        held.display(),
        go.display()
    );
    let (holder, away) = std::thread::scope(|scope| {
        let holder = scope.spawn(|| retry(&["-n", "1", "--lock", url, "--", "sh", "-c", &hold]));
        let started = wait_until(STEP_LIMIT, || held.exists());
        let away = started.then(|| {
            retry(&[
                "-n",
                "1",
                "--lock",
                url,
                "--log-format",
                "json",
                "--",
                "true",
            ])
        });
        std::fs::write(&go, "").unwrap();
        (holder.join().unwrap(), away)
    });
    let err = stderr_of(&holder);
    assert_eq!(holder.status.code(), Some(0), "{url}: --lock holder: {err}");
    assert!(!err.contains("warning"), "{url}: --lock holder: {err}");
    let away = away.unwrap_or_else(|| panic!("{url}: --lock: the holder's try never started"));
    let text = std::fs::read_to_string(&held).unwrap();
    let (token, run_id) = text.trim().split_once(' ').unwrap();
    let token: u64 = token.parse().unwrap();
    let err = stderr_of(&away);
    assert_eq!(
        away.status.code(),
        Some(75),
        "{url}: --lock turned away: {err}"
    );
    let lines = json_lines(&err);
    let give_up = event(&lines, "give_up");
    assert_eq!(give_up["reason"], "locked", "{url}: {give_up}");
    assert_eq!(give_up["holder_run_id"], run_id, "{url}: {give_up}");
    assert!(give_up["holder_pid"].is_u64(), "{url}: {give_up}");
    let mark = format!("echo $RETRY_FENCING_TOKEN > '{}'", next.display());
    let after = retry(&["-n", "1", "--lock", url, "--", "sh", "-c", &mark]);
    let err = stderr_of(&after);
    assert_eq!(after.status.code(), Some(0), "{url}: --lock after: {err}");
    assert!(!err.contains("warning"), "{url}: --lock after: {err}");
    let then: u64 = std::fs::read_to_string(&next)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(then > token, "{url}: token {then} after {token}");
    vec![holder, away, after]
}
