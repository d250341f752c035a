//! What `retry` prints, pinned byte for byte for a fixed set of scenarios: the human log, the
//! JSON log, GitHub's and GitLab's markers, the step summary, the dry run and the simulation.
//! Whatever is reshaped inside, these stay as they are unless a change means them to change.
//!
//! Times that a run measures (how long a try took, timestamps, the run id) differ from run to
//! run, so they are masked before the comparison: every duration in a log line becomes `<T>`,
//! and the JSON fields that hold measurements become `<n>` or `"<s>"`. Waits drawn from the seed
//! stay in the JSON `wait` events, the dry run and the simulation, which hold no measurement.
//!
//! To rewrite the pinned files after a change meant to alter the output:
//!
//!     RETRY_UPDATE_PINNED=1 cargo test --test cli pinned::

mod common;

use std::path::{Path, PathBuf};

use common::retry;

fn pinned_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pinned")
}

/// Compares `text` with the pinned file `name`, or rewrites that file with
/// RETRY_UPDATE_PINNED=1.
fn pin(name: &str, text: &str) {
    let path = pinned_dir().join(format!("{name}.txt"));
    if std::env::var_os("RETRY_UPDATE_PINNED").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(pinned_dir()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write it with RETRY_UPDATE_PINNED=1 cargo test --test cli pinned::",
            path.display()
        )
    });
    if want != text {
        let first = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(text.lines().count()));
        panic!(
            "the output of {name} changed from line {} on (RETRY_UPDATE_PINNED=1 rewrites it \
             when the change is meant)\n--- pinned\n{want}\n--- now\n{text}",
            first + 1
        );
    }
}

/// Whether `word` ends a duration as `retry` writes them (`2m02s`, `1.204s`, `400µs`).
fn duration_unit_at(bytes: &[u8], i: usize) -> Option<usize> {
    for unit in ["ms", "µs", "ns", "d", "h", "m", "s"] {
        if bytes[i..].starts_with(unit.as_bytes()) {
            let end = i + unit.len();
            // `5 tries`, `10m` at a word's end only: `3 messages` is no duration.
            let next = bytes.get(end).copied();
            if next.is_none_or(|b| !b.is_ascii_alphabetic())
                || next.is_some_and(|b| b.is_ascii_digit())
            {
                return Some(end);
            }
        }
    }
    None
}

/// Replaces every duration in `text` (a run of numbers each followed by a unit) with `<T>`.
fn mask_durations(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.');
        if starts_word && bytes[i].is_ascii_digit() {
            // Numbers and units in turn, as long as each number has its unit.
            let mut j = i;
            let mut end = None;
            loop {
                let digits = j;
                while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.') {
                    j += 1;
                }
                if j == digits {
                    break;
                }
                match duration_unit_at(bytes, j) {
                    Some(after) => {
                        end = Some(after);
                        j = after;
                    }
                    None => break,
                }
            }
            if let Some(end) = end {
                out.push_str(&text[copied..i]);
                out.push_str("<T>");
                copied = end;
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// Masks the measured fields of a JSON line: `"ts":"..."` and `"run_id":"..."` become `"<s>"`,
/// and the numbers of `duration_ms`, `elapsed_ms`, `waited_ms` become `<n>`.
fn mask_json(line: &str) -> String {
    let mut line = line.to_string();
    for field in ["ts", "run_id"] {
        let key = format!("\"{field}\":\"");
        let mut from = 0;
        while let Some(at) = line[from..].find(&key) {
            let start = from + at + key.len();
            let Some(len) = line[start..].find('"') else {
                break;
            };
            line.replace_range(start..start + len, "<s>");
            from = start + 3;
        }
    }
    for field in ["duration_ms", "elapsed_ms", "waited_ms"] {
        let key = format!("\"{field}\":");
        let mut from = 0;
        while let Some(at) = line[from..].find(&key) {
            let start = from + at + key.len();
            let len = line[start..].bytes().take_while(u8::is_ascii_digit).count();
            line.replace_range(start..start + len, "<n>");
            from = start + 3;
        }
    }
    line
}

/// Runs retry with `args` in the environment `env`, and returns what it wrote: stdout, stderr
/// and its status, masked.
fn run(env: &[(&str, &str)], args: &[&str]) -> String {
    run_masked(env, args, true)
}

/// `run` for output that holds no measurement (the dry run, the simulation): nothing masked.
fn run_exact(args: &[&str]) -> String {
    run_masked(&[], args, false)
}

fn run_masked(env: &[(&str, &str)], args: &[&str], mask: bool) -> String {
    let mut cmd = retry();
    if let Some((_, dir)) = env.iter().find(|(k, _)| *k == "PWD") {
        cmd.current_dir(dir);
    }
    cmd.env("LC_ALL", "C.UTF-8")
        .env("COLUMNS", "80")
        .env_remove("TMPDIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().unwrap();
    let masked = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(|l| match (mask, l.starts_with('{')) {
                (false, _) => l.to_string(),
                (true, true) => mask_json(l),
                (true, false) => mask_durations(l),
            })
            .map(|l| l + "\n")
            .collect::<String>()
    };
    format!(
        "$ retry {}\n--- status {:?}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.status.code(),
        masked(&out.stdout),
        masked(&out.stderr)
    )
}

/// A command that fails twice with 3, then succeeds.
const FLAKY: &str = r#"n=$(cat "$0" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0"; echo "try $n"; [ $n -ge 3 ] || exit 3"#;

/// The arguments that run FLAKY with its count kept in `dir`, where the run must start (the
/// `PWD` of its environment): the file is named from there, so that the command line is the
/// same whatever the directory.
fn flaky_command(dir: &Path) -> Vec<String> {
    std::fs::write(dir.join("count"), "0").unwrap();
    vec!["sh".into(), "-c".into(), FLAKY.into(), "count".into()]
}

fn cwd(dir: &Path) -> String {
    dir.display().to_string()
}

fn with_command(args: &[&str], command: &[String]) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push("--".into());
    all.extend(command.iter().cloned());
    all
}

fn run_owned(env: &[(&str, &str)], args: &[String]) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(env, &args)
}

#[test]
fn the_human_log_of_a_run_that_succeeds_on_its_third_try() {
    let dir = common::temp_dir("pin-human");
    let args = with_command(
        &["-n", "4", "-d", "10ms", "--seed", "1"],
        &flaky_command(&dir),
    );
    pin("human_flaky", &run_owned(&[("PWD", &cwd(&dir))], &args));
}

#[test]
fn the_verbose_log_of_a_run_that_gives_up() {
    let args = [
        "-v",
        "-n",
        "3",
        "-d",
        "10ms",
        "--seed",
        "2",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ];
    // The verbose log stamps each line with the local time, masked.
    let text = run(&[], &args);
    let text: String = text
        .lines()
        .map(|l| match (l.find(": ["), l.find("] ")) {
            (Some(open), Some(close)) if open < close => {
                format!("{}: [<time>]{}\n", &l[..open], &l[close + 1..])
            }
            _ => format!("{l}\n"),
        })
        .collect();
    pin("verbose_gave_up", &text);
}

#[test]
fn the_json_log_of_a_run_that_times_out_then_gives_up() {
    let args = [
        "--log-format",
        "json",
        "-n",
        "2",
        "-t",
        "100ms",
        "-k",
        "50ms",
        "-d",
        "10ms",
        "--seed",
        "3",
        "--label",
        "slow",
        "--",
        "sleep",
        "5",
    ];
    pin("json_timeouts", &run(&[], &args));
}

#[test]
fn the_json_log_of_a_run_that_succeeds_on_its_third_try() {
    let dir = common::temp_dir("pin-json");
    let args = with_command(
        &[
            "--log-format",
            "json",
            "-n",
            "4",
            "-d",
            "10ms",
            "--seed",
            "1",
        ],
        &flaky_command(&dir),
    );
    pin("json_flaky", &run_owned(&[("PWD", &cwd(&dir))], &args));
}

#[test]
fn github_markers_of_a_flaky_run_and_of_one_that_gives_up() {
    let dir = common::temp_dir("pin-github");
    let args = with_command(
        &["-n", "4", "-d", "10ms", "--seed", "1"],
        &flaky_command(&dir),
    );
    let mut text = run_owned(&[("GITHUB_ACTIONS", "true"), ("PWD", &cwd(&dir))], &args);
    let args = [
        "-n", "2", "-d", "10ms", "--seed", "1", "--label", "build", "--", "sh", "-c", "exit 4",
    ];
    text += &run(&[("GITHUB_ACTIONS", "true")], &args);
    pin("github", &text);
}

#[test]
fn gitlab_sections_of_a_flaky_run() {
    let dir = common::temp_dir("pin-gitlab");
    let args = with_command(
        &["-n", "4", "-d", "10ms", "--seed", "1"],
        &flaky_command(&dir),
    );
    let text = run_owned(&[("GITLAB_CI", "true"), ("PWD", &cwd(&dir))], &args);
    // GitLab's section markers carry the time and the run id.
    let text: String = text
        .lines()
        .map(|l| {
            let l = mask_json(l);
            mask_sections(&l)
        })
        .map(|l| l + "\n")
        .collect();
    pin("gitlab", &text);
}

/// GitLab's section markers with their Unix time and the run's id masked:
/// `section_start:<time>:retry-<id>-try-2`.
fn mask_sections(line: &str) -> String {
    let mut line = line.to_string();
    for key in ["section_start:", "section_end:"] {
        let mut from = 0;
        while let Some(at) = line[from..].find(key) {
            let start = from + at + key.len();
            let digits = line[start..].bytes().take_while(u8::is_ascii_digit).count();
            line.replace_range(start..start + digits, "<time>");
            let id_start = start + "<time>:retry-".len();
            if line.get(start + "<time>".len()..id_start) == Some(":retry-") {
                if let Some(len) = line[id_start..].find("-try-") {
                    line.replace_range(id_start..id_start + len, "<id>");
                }
            }
            from = start;
        }
    }
    line
}

#[test]
fn the_step_summary_of_a_flaky_run_and_of_one_that_gives_up() {
    let dir = common::temp_dir("pin-summary");
    let summary = dir.join("summary.md");
    let summary_path = summary.display().to_string();
    let args = with_command(
        &["-n", "4", "-d", "10ms", "--seed", "1"],
        &flaky_command(&dir),
    );
    run_owned(
        &[("GITHUB_STEP_SUMMARY", &summary_path), ("PWD", &cwd(&dir))],
        &args,
    );
    let args = [
        "-n", "2", "-d", "10ms", "--seed", "1", "--label", "lint", "--", "sh", "-c", "exit 2",
    ];
    run(&[("GITHUB_STEP_SUMMARY", &summary_path)], &args);
    let text = std::fs::read_to_string(&summary).unwrap();
    let text: String = text
        .lines()
        .map(|l| mask_durations(&l.replace(&dir.display().to_string(), "DIR")) + "\n")
        .collect();
    pin("step_summary", &text);
}

#[test]
fn the_dry_run_in_both_formats() {
    let args = [
        "--dry-run",
        "-n",
        "6",
        "-t",
        "2s",
        "-B",
        "2m",
        "-d",
        "1s",
        "-m",
        "20s",
        "--seed",
        "7",
        "--",
        "make",
        "test",
    ];
    let mut text = run_exact(&args);
    let args = [
        "--dry-run",
        "--delays",
        "1s,5s,30s",
        "-n",
        "5",
        "--stagger",
        "3s",
        "--seed",
        "7",
        "--",
        "true",
    ];
    text += &run_exact(&args);
    let args = [
        "--dry-run",
        "--log-format",
        "json",
        "-n",
        "4",
        "-j",
        "equal",
        "-t",
        "5s",
        "--seed",
        "7",
    ];
    text += &run_exact(&args);
    pin("dry_run", &text);
}

#[test]
fn the_simulation_in_both_formats() {
    let args = [
        "--simulate",
        "--clients",
        "200",
        "-n",
        "5",
        "--outage",
        "5s",
        "--capacity",
        "50/s",
        "--seed",
        "11",
    ];
    let mut text = run_exact(&args);
    let args = [
        "--simulate",
        "--clients",
        "100",
        "--model",
        "occ",
        "-d",
        "10ms",
        "-m",
        "1s",
        "--compare",
        "--seed",
        "11",
    ];
    text += &run_exact(&args);
    let args = [
        "--simulate",
        "--log-format",
        "json",
        "--clients",
        "20",
        "-n",
        "3",
        "--outage",
        "2s",
        "--seed",
        "11",
    ];
    text += &run_exact(&args);
    pin("simulate", &text);
}

#[test]
fn the_masking_keeps_what_is_not_measured() {
    assert_eq!(
        mask_durations("try 1/3 exited 7 after 2ms (transient); next try in 1m02.5s"),
        "try 1/3 exited 7 after <T> (transient); next try in <T>"
    );
    assert_eq!(
        mask_durations("3 tries, 10 messages, x2s"),
        "3 tries, 10 messages, x2s"
    );
    assert_eq!(
        mask_json(r#"{"event":"try","ts":"2026-01-01T00:00:00Z","duration_ms":12,"delay_ms":40}"#),
        r#"{"event":"try","ts":"<s>","duration_ms":<n>,"delay_ms":40}"#
    );
}
