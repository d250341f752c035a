//! Failed runs managed as a queue's failed jobs (docs/dead-letters.md#picking-forgetting-pruning),
//! through the real binary: `--replay --only` and `--only-label` pick, `--forget` drops from the
//! pending, `--prune` rewrites the file while runs go on giving up, and a record option given a
//! URL never makes a directory of it.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{json_lines, retry, retry_std, stderr_of, stdout_of, usage_error_of, wait_bounded};
use serde_json::Value;

/// Runs `retry --dead-letter FILE --label LABEL -n 1 -- sh -c SCRIPT` in `dir`.
fn give_up(dir: &Path, label: &str, script: &str) {
    retry()
        .current_dir(dir)
        .args([
            "--dead-letter",
            "d.jsonl",
            "--label",
            label,
            "-n",
            "1",
            "--",
        ])
        .args(["sh", "-c", script])
        .assert()
        .code(1);
}

/// The listing of `--replay d.jsonl --dry-run ARGS` in JSON, one value per run.
fn listed(dir: &Path, args: &[&str]) -> Vec<Value> {
    let out = retry()
        .current_dir(dir)
        .args(["--replay", "d.jsonl", "--dry-run", "--log-format", "json"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    json_lines(&stdout_of(&out))
}

fn ids_of(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

/// Three runs that gave up, labelled `nightly-a`, `nightly-b` and `weekly`, each of whose
/// commands appends its label to `ran` when it runs; their ids in order.
fn three(dir: &Path) -> Vec<String> {
    for label in ["nightly-a", "nightly-b", "weekly"] {
        give_up(dir, label, &format!("echo {label} >> ran; exit 1"));
    }
    std::fs::remove_file(dir.join("ran")).unwrap();
    ids_of(&listed(dir, &[]))
}

fn ran(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("ran")).unwrap_or_default()
}

#[test]
fn only_runs_the_runs_named_by_id_or_prefix_and_only_label_those_whose_label_matches() {
    let dir = common::temp_dir("queue-only");
    let ids = three(&dir);
    assert_eq!(ids.len(), 3);
    // The dry run lists what would run.
    assert_eq!(
        ids_of(&listed(&dir, &["--only", &ids[2]])),
        [ids[2].clone()]
    );
    assert_eq!(
        ids_of(&listed(&dir, &["--only-label", "nightly-*"])),
        ids[..2].to_vec()
    );
    // A prefix of eight characters names the run; a second --only adds.
    retry()
        .current_dir(&dir)
        .args([
            "--replay",
            "d.jsonl",
            "--only",
            &ids[2][..8],
            "--only",
            &ids[0],
        ])
        .assert()
        .code(1);
    assert_eq!(ran(&dir), "nightly-a\nweekly\n");
    std::fs::remove_file(dir.join("ran")).unwrap();
    retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--only-label", "*-b"])
        .assert()
        .code(1);
    assert_eq!(ran(&dir), "nightly-b\n");
}

#[test]
fn an_unknown_ambiguous_or_short_id_is_a_usage_error_before_anything_runs() {
    let dir = common::temp_dir("queue-unknown");
    let ids = three(&dir);
    let before = std::fs::read(dir.join("d.jsonl")).unwrap();
    for (only, says) in [
        ("ffffffff-0000", "no pending run has the id 'ffffffff-0000'"),
        (&ids[0][..5], "at least 8 characters"),
    ] {
        for dry in [false, true] {
            let mut cmd = retry();
            cmd.current_dir(&dir)
                .args(["--replay", "d.jsonl", "--only", &ids[1], "--only", only]);
            if dry {
                cmd.arg("--dry-run");
            }
            let out = cmd.output().unwrap();
            let line = usage_error_of(&out, "--only");
            assert!(line.contains(says), "{line}");
        }
    }
    assert_eq!(ran(&dir), "", "nothing ran");
    assert_eq!(std::fs::read(dir.join("d.jsonl")).unwrap(), before);
    // Two runs whose ids start alike: the prefix they share names neither.
    let file = dir.join("d.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let twin = text
        .lines()
        .next()
        .unwrap()
        .replace(&ids[0], &format!("{}-twin", ids[0]));
    std::fs::write(&file, format!("{text}{twin}\n")).unwrap();
    let out = retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--only", &ids[0][..12]])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--only");
    assert!(line.contains("starts the ids of 2 pending runs"), "{line}");
    assert_eq!(ran(&dir), "");
}

#[test]
fn a_forgotten_run_is_never_replayed_and_no_longer_pending_but_all_lists_it() {
    let dir = common::temp_dir("queue-forget");
    let ids = three(&dir);
    let out = retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", &ids[1][..10]])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out),
        "forgot 1 run of d.jsonl; 2 still pending\n"
    );
    assert_eq!(ids_of(&listed(&dir, &[])), [ids[0].clone(), ids[2].clone()]);
    let all = listed(&dir, &["--all"]);
    let states: Vec<&str> = all.iter().map(|v| v["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["pending", "forgotten", "pending"]);
    // A replay of everything, or of that run by name, never runs it.
    let out = retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--only", &ids[1]])
        .output()
        .unwrap();
    assert!(usage_error_of(&out, "--only").contains("no pending run"));
    retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "-n", "1"])
        .assert()
        .code(1);
    assert_eq!(ran(&dir), "nightly-a\nweekly\n");
    // An unknown id forgets nothing, not even the good ones given with it.
    let before = std::fs::read(dir.join("d.jsonl")).unwrap();
    let out = retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", &ids[0], "0123456789"])
        .output()
        .unwrap();
    assert!(usage_error_of(&out, "--forget").contains("'0123456789'"));
    assert_eq!(std::fs::read(dir.join("d.jsonl")).unwrap(), before);
    // all forgets every pending run; --forget without ids is a usage error.
    let out = retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", "all"])
        .output()
        .unwrap();
    assert_eq!(
        stdout_of(&out),
        "forgot 2 runs of d.jsonl; 0 still pending\n"
    );
    assert!(listed(&dir, &[]).is_empty());
    let out = retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl"])
        .output()
        .unwrap();
    assert!(usage_error_of(&out, "--forget").contains("needs the ids"));
}

#[test]
fn a_forget_or_a_prune_while_a_replay_runs_is_refused_and_changes_nothing() {
    let dir = common::temp_dir("queue-busy");
    give_up(&dir, "slow", "test -e go || exit 1; sleep 1.7");
    std::fs::write(dir.join("go"), "").unwrap();
    let mut replay = retry_std()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let file = dir.join("d.jsonl");
    assert!(common::wait_until(Duration::from_secs(10), || {
        // The replay's try is running once its shell is.
        std::process::Command::new("pgrep")
            .args(["-f", "sleep 1.7"])
            .output()
            .is_ok_and(|o| o.status.success())
    }));
    let before = std::fs::read(&file).unwrap();
    for args in [
        &["--forget", "d.jsonl", "all"][..],
        &["--prune", "d.jsonl", "--older-than", "0s"][..],
    ] {
        let out = retry().current_dir(&dir).args(args).output().unwrap();
        let line = usage_error_of(&out, args[0]);
        assert!(line.contains("a replay of this file is running"), "{line}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert!(wait_bounded(&mut replay, common::STEP_LIMIT).success());
}

#[test]
fn a_prune_of_a_file_with_another_name_is_refused_and_changes_neither() {
    let dir = common::temp_dir("queue-prune-link");
    let ids = three(&dir);
    retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", &ids[0]])
        .assert()
        .success();
    std::fs::hard_link(dir.join("d.jsonl"), dir.join("other.jsonl")).unwrap();
    let before = std::fs::read(dir.join("d.jsonl")).unwrap();
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--prune");
    assert!(line.contains("2 names (hard links)"), "{line}");
    for name in ["d.jsonl", "other.jsonl"] {
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), before, "{name}");
    }
    // With one name left, the prune goes ahead and drops the forgotten run.
    std::fs::remove_file(dir.join("other.jsonl")).unwrap();
    retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .assert()
        .success();
    assert_eq!(ids_of(&listed(&dir, &["--all"])), ids[1..].to_vec());
}

#[test]
fn prune_drops_the_settled_and_the_old_and_keeps_the_pending_lines_as_they_were() {
    let dir = common::temp_dir("queue-prune");
    let ids = three(&dir);
    let file = dir.join("d.jsonl");
    // A run recorded long ago, still pending.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut old: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    old["id"] = Value::from("0ld00000-0000-0000-0000-000000000000");
    old["ts"] = Value::from("2025-10-01T00:00:00.000Z");
    std::fs::write(&file, format!("{old}\n{text}")).unwrap();
    retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", &ids[1]])
        .assert()
        .success();
    // The third run's replay fails (an attempt line kept with it); then the first is resolved.
    retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--only", &ids[2], "-n", "1"])
        .assert()
        .code(1);
    retry()
        .current_dir(&dir)
        .args([
            "--replay",
            "d.jsonl",
            "--only",
            &ids[0],
            "-n",
            "1",
            "--success-on",
            "1",
        ])
        .assert()
        .success();
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "30d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out),
        "pruned d.jsonl: dropped 1 resolved, 1 forgotten and 1 pending that gave up before the limit; kept 1 pending\n"
    );
    let kept = std::fs::read_to_string(&file).unwrap();
    let events: Vec<(String, String)> = kept
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["event"].as_str().unwrap().into(),
                v["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("dead_letter".to_string(), ids[2].clone()),
            ("attempt".to_string(), ids[2].clone())
        ]
    );
    // Its lines are the same bytes; the file is still private, and the listing reads it.
    assert!(text.contains(kept.lines().next().unwrap()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let listed = listed(&dir, &[]);
    assert_eq!(ids_of(&listed), [ids[2].clone()]);
    assert_eq!(listed[0]["attempts"], 1);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("prune"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn prune_of_a_history_drops_the_runs_that_ended_before_the_limit() {
    let dir = common::temp_dir("queue-prune-history");
    for _ in 0..3 {
        retry()
            .current_dir(&dir)
            .args(["--history", "h.jsonl", "--", "true"])
            .assert()
            .success();
    }
    let file = dir.join("h.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut old: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    old["ts"] = Value::from("2025-01-01T00:00:00.000Z");
    std::fs::write(&file, format!("{old}\n{old}\n{text}")).unwrap();
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "h.jsonl", "--older-than", "7d"])
        .output()
        .unwrap();
    assert_eq!(
        stdout_of(&out),
        "pruned h.jsonl: dropped 2 runs that ended before the limit; kept 3\n",
        "{}",
        stderr_of(&out)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

#[test]
fn a_prune_while_forty_runs_give_up_keeps_every_record_and_holds_none_up_long() {
    let dir = common::temp_dir("queue-prune-busy");
    let file = dir.join("d.jsonl");
    // 30,000 settled runs (12 MB) for the prune to read and drop.
    let settled = "{\"event\":\"dead_letter\",\"id\":\"ID\",\"ts\":\"2026-01-15T08:05:00.123Z\",\"label\":null,\"cwd\":\"/\",\"command\":[\"false\"],\"options\":[\"-n\",\"1\"],\"exit_code\":1,\"reason\":\"tries\",\"tries\":1,\"duration_ms\":1}\n{\"event\":\"resolved\",\"id\":\"ID\",\"ts\":\"2026-01-15T08:06:00.123Z\",\"tries\":1}\n";
    let mut text = String::with_capacity(30_000 * settled.len());
    for k in 0..30_000 {
        text.push_str(&settled.replace("ID", &format!("settled-{k:08}")));
    }
    std::fs::write(&file, &text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let started = Instant::now();
    // The lock is held while the runs open the file and wait for it, and while the prune reads
    // and waits too: when it goes, the prune renames its new file over the old one while some
    // runs still hold the old one open, which is the case to get right.
    let mut holder = std::process::Command::new("flock")
        .arg(&file)
        .args(["sleep", "1.5"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut runs: Vec<_> = (0..40)
        .map(|_| {
            retry_std()
                .current_dir(&dir)
                .args(["--dead-letter", "d.jsonl", "-n", "1", "--", "false"])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let prune = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "365d"])
        .output()
        .unwrap();
    assert_eq!(prune.status.code(), Some(0), "{}", stderr_of(&prune));
    assert!(wait_bounded(&mut holder, common::STEP_LIMIT).success());
    for run in &mut runs {
        assert_eq!(wait_bounded(run, common::STEP_LIMIT).code(), Some(1));
    }
    for run in runs {
        let out = run.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("warning"), "a run could not append: {err}");
    }
    let listing = listed(&dir, &["--all"]);
    let pending = listing.iter().filter(|v| v["state"] == "pending").count();
    assert_eq!(pending, 40, "every run that gave up is in the file");
    assert!(listing.len() <= 40 + 30_000);
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn a_record_option_given_a_url_is_refused_and_makes_no_directory() {
    let dir = common::temp_dir("queue-url");
    // The dead letters and the history may be on Redis, and take no other URL; the other files
    // take none.
    for (option, url, extra) in [
        ("--dead-letter", "http", &["--", "true"][..]),
        ("--replay", "http", &[][..]),
        ("--forget", "http", &["all"][..]),
        ("--prune", "http", &["--older-than", "1d"][..]),
        ("--history", "http", &["--", "true"][..]),
        ("--stats", "http", &[][..]),
        ("--log-file", "redis", &["--", "true"][..]),
        ("--junit", "redis", &["--", "true"][..]),
    ] {
        let out = retry()
            .current_dir(&dir)
            .args([
                option,
                &format!("{url}://:hunter2hunter2@db.example:6379/jobs"),
            ])
            .args(extra)
            .output()
            .unwrap();
        let line = usage_error_of(&out, option);
        assert!(
            line.contains(&format!("{url}://***@db.example:6379/jobs")),
            "{line}"
        );
        assert!(!line.contains("hunter2"), "{line}");
    }
    // A Redis URL that does not read as one is refused as well, its password hidden.
    let out = retry()
        .current_dir(&dir)
        .args([
            "--dead-letter",
            "redis://:hunter2hunter2@db.example/jobs:ratio=1",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--dead-letter");
    assert!(!line.contains("hunter2"), "{line}");
    let made: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(made.is_empty(), "{made:?}");
}

#[test]
fn a_dead_letter_never_records_the_password_of_a_history_on_redis() {
    let dir = common::temp_dir("queue-history-password");
    let port = common::redis_server::free_port();
    let out = retry()
        .current_dir(&dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .args(["--dead-letter", "d.jsonl", "-n", "1", "--history"])
        .arg(format!("redis://:hunter2-hunter2@127.0.0.1:{port}/ci"))
        .args(["--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!stderr_of(&out).contains("hunter2"), "{}", stderr_of(&out));
    let text = std::fs::read_to_string(dir.join("d.jsonl")).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains(&format!("redis://127.0.0.1:{port}/ci")),
        "{text}"
    );
}

#[test]
fn a_backslash_in_a_labels_set_takes_the_next_character_as_it_is() {
    let dir = common::temp_dir("queue-label-set");
    for label in ["job]", "job-", "job-m", "jobz"] {
        give_up(&dir, label, "exit 1");
    }
    let all = ids_of(&listed(&dir, &[]));
    let picked = |pattern: &str| ids_of(&listed(&dir, &["--only-label", pattern]));
    assert_eq!(picked("job[\\]]"), [all[0].clone()]);
    assert_eq!(picked("job[a\\-z]"), [all[1].clone(), all[3].clone()]);
    assert_eq!(picked("job[!\\]-]*"), [all[3].clone()]);
}

#[test]
fn the_listing_shows_each_runs_label_that_only_label_picks_by() {
    let dir = common::temp_dir("queue-list-label");
    let ids = three(&dir);
    let out = retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    let lines: Vec<&str> = text.lines().skip(1).collect();
    for (line, (id, label)) in
        lines
            .iter()
            .zip(ids.iter().zip(["nightly-a", "nightly-b", "weekly"]))
    {
        assert!(line.starts_with(id.as_str()), "{text}");
        assert!(line.contains(&format!("  [{label}]  sh -c")), "{text}");
    }
    let runs = listed(&dir, &[]);
    assert_eq!(runs[2]["label"], "weekly");
}

/// The line of a run that gave up, recorded in `dir/d.jsonl` by a real run, with its id
/// replaced by `id` and its time by `ts`.
fn record_line(dir: &Path, id: &str, ts: &str) -> String {
    let file = dir.join("d.jsonl");
    if !file.exists() {
        give_up(dir, "model", "exit 1");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let mut v: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    v["id"] = Value::from(id);
    v["ts"] = Value::from(ts);
    v.to_string()
}

#[test]
fn a_prune_reads_the_lines_as_a_replay_does_and_counts_an_undated_run_apart() {
    let dir = common::temp_dir("queue-prune-judged");
    let now = record_line(&dir, "n0000000-0000", "2099-01-01T00:00:00.000Z");
    let undated = record_line(&dir, "u0000000-0000", "yesterday");
    let file = dir.join("d.jsonl");
    std::fs::write(&file, format!("{now}\n{undated}\n")).unwrap();
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .args(["--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = &json_lines(&stdout_of(&out))[0];
    assert_eq!(
        (v["kept"].as_u64(), v["kept_unread"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).ends_with("kept 1 pending, and 1 pending whose time it could not read\n"),
        "{}",
        stdout_of(&out)
    );
    // A line that a replay refuses is refused by a prune, which leaves the file as it is.
    let damaged = now
        .replace("n0000000", "d0000000")
        .replace(r#""command":["sh","-c","exit 1"]"#, r#""command":5"#);
    assert!(damaged.contains(r#""command":5"#), "{damaged}");
    std::fs::write(&file, format!("{now}\n{undated}\n{damaged}\n")).unwrap();
    let before = std::fs::read(&file).unwrap();
    let replay = retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--dry-run"])
        .output()
        .unwrap();
    assert!(usage_error_of(&replay, "line 3").contains("\"command\""));
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--prune");
    assert!(
        line.contains("line 3") && line.contains("left as it is"),
        "{line}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

/// The names in `dir` of the new files that prunes of `d.jsonl` write beside it.
fn prune_copies(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".d.jsonl.prune-"))
        .collect()
}

#[test]
fn a_prune_removes_the_copy_that_a_prune_killed_before_it_left() {
    let dir = common::temp_dir("queue-prune-killed");
    let line = record_line(&dir, "k0000000-0000", "2099-01-01T00:00:00.000Z");
    let file = dir.join("d.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    // The lock held, the prune waits for it with its new file written: it is killed there.
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork")
        .arg(&file)
        .args(["sleep", "5"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut prune = retry_std()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(common::STEP_LIMIT, || !prune_copies(
        &dir
    )
    .is_empty()));
    prune.kill().unwrap();
    assert!(!wait_bounded(&mut prune, common::STEP_LIMIT).success());
    holder.kill().unwrap();
    let _ = wait_bounded(&mut holder, common::STEP_LIMIT);
    let left = prune_copies(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    // A file of another's name, or not quite of that form, is not the prune's to remove.
    for other in [".e.jsonl.prune-0123456789abcdef", ".d.jsonl.prune-01234567"] {
        std::fs::write(dir.join(other), "").unwrap();
    }
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(prune_copies(&dir), [".d.jsonl.prune-01234567"]);
    assert!(dir.join(".e.jsonl.prune-0123456789abcdef").exists());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("{line}\n"));
}

#[test]
fn the_runs_appended_while_a_prune_read_are_counted_among_those_kept() {
    let dir = common::temp_dir("queue-prune-meanwhile");
    let first = record_line(&dir, "m0000000-0000", "2099-01-01T00:00:00.000Z");
    let file = dir.join("d.jsonl");
    std::fs::write(&file, format!("{first}\n")).unwrap();
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork")
        .arg(&file)
        .args(["sleep", "5"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut prune = retry_std()
        .current_dir(&dir)
        .args([
            "--prune",
            "d.jsonl",
            "--older-than",
            "1d",
            "--log-format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its new file is there once it has read the file: what comes now is appended meanwhile.
    assert!(common::wait_until(common::STEP_LIMIT, || !prune_copies(
        &dir
    )
    .is_empty()));
    let meanwhile: String = ["m1", "m2"]
        .iter()
        .map(|id| {
            record_line(
                &dir,
                &format!("{id}000000-0000"),
                "2099-01-01T00:00:00.000Z",
            ) + "\n"
        })
        .collect();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(meanwhile.as_bytes())
        .unwrap();
    holder.kill().unwrap();
    let _ = wait_bounded(&mut holder, common::STEP_LIMIT);
    wait_bounded(&mut prune, common::STEP_LIMIT);
    let out = prune.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = &json_lines(&stdout_of(&out))[0];
    assert_eq!(v["kept"], 3, "{v}");
    assert_eq!(v["appended_runs"], 2, "{v}");
    assert_eq!(v["appended_meanwhile"], meanwhile.len(), "{v}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{first}\n{meanwhile}")
    );
}

/// Runs `retry ARGS` in a directory of its own on a file system that is full (a tmpfs of
/// 64 KiB, in a mount namespace of its own), where `d.jsonl` holds `text` and leaves 50 bytes
/// of its last page free: its output, then on stdout `same` if the file is as it was, and the
/// names in the directory. `None` where no mount namespace can be made (it takes root).
fn on_a_full_disk(test: &str, text: &str, args: &[&str]) -> Option<std::process::Output> {
    let can = common::have_package(
        test,
        "root, for a full tmpfs in a mount namespace (unshare -m)",
        "util-linux",
        common::euid() == 0
            && std::process::Command::new("unshare")
                .args(["-m", "true"])
                .status()
                .is_ok_and(|s| s.success()),
    );
    if !can {
        return None;
    }
    let dir = common::temp_dir(test);
    let pad = (4096 - 50 - text.len() % 4096) % 4096;
    let src = dir.join("src.jsonl");
    std::fs::write(&src, format!("{text}{}", "\n".repeat(pad))).unwrap();
    std::fs::create_dir(dir.join("m")).unwrap();
    let me = assert_cmd::cargo::cargo_bin("retry");
    let script = r#"mount -t tmpfs -o size=64k tmpfs "$1" && cp "$2" "$1/d.jsonl" &&
        chmod 600 "$1/d.jsonl" && cd "$1" || exit 99
        (head -c 1000000 /dev/zero > fill) 2>/dev/null
        shift 2; "$@"; status=$?
        cmp -s d.jsonl "$OLDPWD/src.jsonl" && echo same
        ls -A; exit $status"#;
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["-m", "sh", "-c", script, "sh"])
        .arg(dir.join("m"))
        .arg(&src)
        .arg(me)
        .args(args)
        .current_dir(&dir);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(&mut child, common::STEP_LIMIT);
    Some(child.wait_with_output().unwrap())
}

#[test]
fn forget_and_prune_say_in_words_why_they_failed_and_that_the_file_is_as_it_was() {
    let dir = common::temp_dir("queue-words");
    for (args, says) in [
        (
            &["--forget", "none.jsonl", "all"][..],
            "there is no such file",
        ),
        (
            &["--prune", "none.jsonl", "--older-than", "1d"][..],
            "there is no such file",
        ),
        (
            &["--prune", "no/x.jsonl", "--older-than", "1d"][..],
            "its directory no does not exist",
        ),
    ] {
        let out = retry().current_dir(&dir).args(args).output().unwrap();
        let line = usage_error_of(&out, args[0]);
        assert!(line.contains(says) && !line.contains("os error"), "{line}");
    }
    let text: String = (0..20)
        .map(|k| record_line(&dir, &format!("f{k:07}-0000"), "2099-01-01T00:00:00.000Z") + "\n")
        .collect();
    for (args, says) in [
        (
            &["--forget", "d.jsonl", "all"][..],
            "cannot append the 20 forgotten lines: the disk is full; nothing was forgotten, and the file is left as it was",
        ),
        (
            &["--prune", "d.jsonl", "--older-than", "1d"][..],
            "cannot write the new file beside it: the disk is full; the file is left as it was",
        ),
    ] {
        let Some(out) = on_a_full_disk("queue-full-disk", &text, args) else {
            return;
        };
        let line = usage_error_of(&out, args[0]);
        assert!(line.contains(says) && !line.contains("os error"), "{line}");
        assert_eq!(stdout_of(&out), "same\nd.jsonl\nfill\n");
    }
}

#[test]
fn forget_and_prune_print_nothing_with_q_when_all_went_well() {
    let dir = common::temp_dir("queue-quiet");
    let line = record_line(&dir, "q0000000-0000", "2099-01-01T00:00:00.000Z");
    std::fs::write(dir.join("d.jsonl"), format!("{line}\n")).unwrap();
    for args in [
        &["--prune", "d.jsonl", "--older-than", "1d", "-q"][..],
        &["-q", "--forget", "d.jsonl", "q0000000-0000"][..],
    ] {
        let out = retry().current_dir(&dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        assert_eq!(
            (stdout_of(&out), stderr_of(&out)),
            (String::new(), String::new())
        );
    }
    // The JSON object is printed all the same, and a failure is said.
    let out = retry()
        .current_dir(&dir)
        .args(["--prune", "d.jsonl", "--older-than", "1d", "-q"])
        .args(["--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(json_lines(&stdout_of(&out))[0]["event"], "pruned");
    let out = retry()
        .current_dir(&dir)
        .args(["-q", "--forget", "d.jsonl", "q0000000-0000"])
        .output()
        .unwrap();
    assert!(usage_error_of(&out, "--forget").contains("no pending run"));
}

#[test]
fn an_id_under_eight_characters_given_to_forget_is_told_as_too_short() {
    let dir = common::temp_dir("queue-forget-short");
    let line = record_line(&dir, "s0000000-0000", "2099-01-01T00:00:00.000Z");
    std::fs::write(dir.join("d.jsonl"), format!("{line}\n")).unwrap();
    let before = std::fs::read(dir.join("d.jsonl")).unwrap();
    for id in ["1234", "s000"] {
        let out = retry()
            .current_dir(&dir)
            .args(["--forget", "d.jsonl", id])
            .output()
            .unwrap();
        let said = usage_error_of(&out, "--forget");
        assert!(
            said.contains(&format!("'{id}' is too short")) && said.contains("at least 8"),
            "{said}"
        );
    }
    assert_eq!(std::fs::read(dir.join("d.jsonl")).unwrap(), before);
}

#[test]
fn the_options_after_the_ids_of_forget_are_read_as_options() {
    let dir = common::temp_dir("queue-forget-options");
    let lines: String = ["o1", "o2", "o3"]
        .iter()
        .map(|id| {
            record_line(
                &dir,
                &format!("{id}000000-0000"),
                "2099-01-01T00:00:00.000Z",
            ) + "\n"
        })
        .collect();
    std::fs::write(dir.join("d.jsonl"), lines).unwrap();
    let out = retry()
        .current_dir(&dir)
        .args([
            "--forget",
            "d.jsonl",
            "o1000000-0000",
            "--log-format",
            "json",
        ])
        .args(["o2000000", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = &json_lines(&stdout_of(&out))[0];
    assert_eq!(
        v["ids"],
        serde_json::json!(["o1000000-0000", "o2000000-0000"])
    );
    let out = retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", "all", "--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        json_lines(&stdout_of(&out))[0]["forgotten"],
        1,
        "{}",
        stderr_of(&out)
    );
    // An option it does not know is one, not an id.
    let out = retry()
        .current_dir(&dir)
        .args(["--forget", "d.jsonl", "all", "--bogus"])
        .output()
        .unwrap();
    assert!(usage_error_of(&out, "").contains("'--bogus'"));
}

#[test]
fn the_end_of_a_replay_that_took_only_some_runs_says_how_many_others_are_pending() {
    let dir = common::temp_dir("queue-only-summary");
    let ids = three(&dir);
    let out = retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--only", &ids[0], "-n", "1"])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(
        err.contains("still pending; 2 other runs pending that it did not take"),
        "{err}"
    );
    let out = retry()
        .current_dir(&dir)
        .args(["--replay", "d.jsonl", "--only-label", "none", "-v"])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(
        err.contains("nothing it took was pending; 3 other runs pending that it did not take"),
        "{err}"
    );
}
