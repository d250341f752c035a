//! `--metrics FILE` (docs/dashboards.md#metrics) through the real binary: 40 runs of 4 jobs at
//! once, some failing, some on their second try, count every run and try exactly in one file,
//! which `promtool check metrics` finds clean; a real node_exporter scraping the file every
//! 100 ms while they write never fails to read it, and its last scrape shows the counters; a
//! failed run keeps an earlier run's last success time; a file that is not `retry`'s is left
//! as it is, with one warning and the run's own exit status.
//! The alerting rule the page gives pages after 26 hours without a success (`promtool test
//! rules`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{self, output_bounded, retry_std, stderr_of};

/// The counters the runs should leave: (series name, job, outcome or result) to a count.
type Counts = BTreeMap<(String, String, String), u64>;

/// Starts 40 runs of 4 jobs at once, all writing `file`, and waits for each: a quarter
/// succeed on the first try, a quarter fail once, a quarter fail twice, a quarter succeed on
/// their second try. Each waits a random time of up to a second before its first try
/// (`--stagger`), so that their writes spread over that second. Returns the counters they
/// should leave.
fn forty_runs(file: &Path) -> Counts {
    let mut expected = Counts::new();
    let mut add = |name: &str, job: &str, word: &str, n: u64| {
        *expected
            .entry((name.to_string(), job.to_string(), word.to_string()))
            .or_default() += n;
    };
    let mut children: Vec<Child> = Vec::new();
    for i in 0..40 {
        let job = format!("job{}", i % 4);
        let mut cmd = retry_std();
        cmd.args(["--metrics"]).arg(file).args([
            "--label",
            &job,
            "-d",
            "10ms",
            "--stagger",
            "1s",
            "-q",
        ]);
        match (i / 4) % 4 {
            0 => {
                cmd.args(["-n", "1", "--", "true"]);
                add("retry_runs_total", &job, "success", 1);
                add("retry_tries_total", &job, "success", 1);
            }
            1 => {
                cmd.args(["-n", "1", "--", "false"]);
                add("retry_runs_total", &job, "gave_up", 1);
                add("retry_tries_total", &job, "transient", 1);
            }
            2 => {
                cmd.args(["-n", "2", "--", "false"]);
                add("retry_runs_total", &job, "gave_up", 1);
                add("retry_tries_total", &job, "transient", 2);
            }
            _ => {
                cmd.args(["-n", "2", "--", "sh", "-c", "test \"$RETRY_ATTEMPT\" -ge 2"]);
                add("retry_runs_total", &job, "success", 1);
                add("retry_tries_total", &job, "transient", 1);
                add("retry_tries_total", &job, "success", 1);
            }
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start retry");
        children.push(child);
    }
    for mut child in children {
        common::wait_bounded(&mut child, common::TEST_LIMIT);
        let mut stderr = String::new();
        let _ = child
            .stderr
            .take()
            .expect("piped")
            .read_to_string(&mut stderr);
        assert!(!stderr.contains("--metrics"), "{stderr}");
    }
    expected
}

/// The counters of a text in Prometheus's format, by series name, job and its other label.
fn counters(text: &str) -> Counts {
    let mut found = Counts::new();
    for line in text.lines() {
        for (name, key) in [
            ("retry_runs_total", "outcome"),
            ("retry_tries_total", "result"),
        ] {
            let Some(rest) = line.strip_prefix(&format!("{name}{{job=\"")) else {
                continue;
            };
            let (job, rest) = rest.split_once('"').expect("the job's value");
            let rest = rest
                .strip_prefix(&format!(",{key}=\""))
                .unwrap_or_else(|| panic!("{line}"));
            let (word, value) = rest.split_once("\"} ").unwrap_or_else(|| panic!("{line}"));
            let n: u64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
            found.insert((name.to_string(), job.to_string(), word.to_string()), n);
        }
    }
    found
}

/// A node_exporter of this test, stopped when the test ends, however it ends.
struct Exporter(Child);

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /metrics` of the exporter on `port`, over HTTP/1.0: the body, or `None` when it
/// cannot be read now.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
}

/// Starts a node_exporter whose textfile collector reads `dir`, and waits until it answers:
/// it, and its port.
fn exporter(dir: &Path) -> (Exporter, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let exporter = Exporter(
        Command::new("prometheus-node-exporter")
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .arg(format!("--collector.textfile.directory={}", dir.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus-node-exporter"),
    );
    assert!(
        common::wait_until(common::STEP_LIMIT, || scrape(port).is_some()),
        "node_exporter did not answer on port {port}"
    );
    (exporter, port)
}

/// Scrapes the exporter on `port` every 100 ms until `done`: each scrape's body, or `None`.
fn scraping(port: u16, done: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Option<String>>> {
    std::thread::spawn(move || {
        let mut bodies = Vec::new();
        let until = Instant::now() + common::TEST_LIMIT;
        while !done.load(Ordering::Relaxed) && Instant::now() < until {
            bodies.push(scrape(port));
            std::thread::sleep(Duration::from_millis(100));
        }
        bodies
    })
}

// One test, as the forty runs are the suite's heaviest part here: a real node_exporter reads the
// file while they write it (when it is installed), and the counters are checked at the end.
#[test]
fn forty_runs_of_four_jobs_at_once_count_exactly_and_a_node_exporter_reading_meanwhile_never_fails()
{
    let test = "metrics::forty_runs_of_four_jobs_at_once_count_exactly_and_a_node_exporter_reading_meanwhile_never_fails";
    let dir = common::temp_dir("metrics-forty");
    let file = dir.join("retry.prom");
    let present = common::on_path("prometheus-node-exporter");
    let watched = common::have_package(
        test,
        "prometheus-node-exporter",
        "prometheus-node-exporter",
        present,
    )
    .then(|| {
        let (exporter, port) = exporter(&dir);
        let done = Arc::new(AtomicBool::new(false));
        (exporter, port, done.clone(), scraping(port, done))
    });
    let expected = forty_runs(&file);
    let text = std::fs::read_to_string(&file).expect("the metrics file");
    assert_eq!(counters(&text), expected, "{text}");
    let runs: u64 = expected
        .iter()
        .filter(|((name, _, _), _)| name == "retry_runs_total")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(runs, 40);
    // Nothing left beside it but its lock: no new file that a run left behind.
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["retry.prom", "retry.prom.lock"]);
    if common::have_package(test, "promtool", "prometheus", common::on_path("promtool")) {
        let out = output_bounded(
            Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(std::fs::File::open(&file).unwrap()),
            common::STEP_LIMIT,
        );
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics: {out:?}"
        );
    }
    let Some((_exporter, port, done, scraper)) = watched else {
        return;
    };
    done.store(true, Ordering::Relaxed);
    let mut bodies = scraper.join().expect("the scraper");
    bodies.push(scrape(port));
    // A scrape every 100 ms while the runs spread over a second.
    assert!(bodies.len() >= 5, "{} scrapes", bodies.len());
    for body in &bodies {
        let body = body.as_deref().expect("every scrape is answered");
        assert!(
            body.lines().any(|l| l == "node_textfile_scrape_error 0"),
            "a scrape failed to read the file:\n{body}"
        );
    }
    let last = bodies.last().unwrap().as_deref().unwrap();
    assert_eq!(counters(last), expected, "{last}");
}

/// The value of the gauge `name` for `job` in `text`.
fn gauge(text: &str, name: &str, job: &str) -> Option<f64> {
    let start = format!("{name}{{job=\"{job}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&start))
        .map(|v| v.parse().expect("a number"))
}

/// A run killed while it wrote its new file left it beside the file, under a name of its pid;
/// the next run, holding the lock under which alone such files are made, removes it, and
/// leaves every other name alone.
#[test]
fn a_new_file_that_a_killed_run_left_is_removed_by_the_next_run() {
    let dir = common::temp_dir("metrics-left");
    let file = dir.join("m.prom");
    let left = [".m.prom.4194303-0.tmp", ".m.prom.77-3.tmp"];
    let kept = [
        ".m.prom.1.77-0.tmp",
        ".m.prom.x-0.tmp",
        "m.prom.77-0.tmp",
        ".other.prom.77-0.tmp",
    ];
    for name in left.iter().chain(&kept) {
        std::fs::write(dir.join(name), "half of a fil").unwrap();
    }
    let out = output_bounded(
        retry_std()
            .arg("--metrics")
            .arg(&file)
            .args(["-n", "1", "-q", "--", "true"]),
        common::STEP_LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stderr_of(&out), "");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = kept.iter().map(|n| n.to_string()).collect();
    want.extend(["m.prom".to_string(), "m.prom.lock".to_string()]);
    want.sort();
    assert_eq!(names, want);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_failed_run_keeps_the_last_success_time_of_an_earlier_run_of_the_job() {
    let dir = common::temp_dir("metrics-success");
    let file = dir.join("retry.prom");
    let run = |command: &str| {
        let out = output_bounded(
            retry_std()
                .arg("--metrics")
                .arg(&file)
                .args(["--label", "nightly", "-n", "1", "-q", "--", command]),
            common::STEP_LIMIT,
        );
        assert!(!stderr_of(&out).contains("--metrics"), "{out:?}");
        std::fs::read_to_string(&file).expect("the metrics file")
    };
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let first = run("true");
    let success = gauge(&first, "retry_last_success_timestamp_seconds", "nightly").unwrap();
    assert!(
        success >= before - 1.0 && success < before + 60.0,
        "{first}"
    );
    assert_eq!(gauge(&first, "retry_last_exit_code", "nightly"), Some(0.0));
    std::thread::sleep(Duration::from_millis(20));
    let second = run("false");
    assert_eq!(
        gauge(&second, "retry_last_success_timestamp_seconds", "nightly"),
        Some(success),
        "{second}"
    );
    let last_run = gauge(&second, "retry_last_run_timestamp_seconds", "nightly").unwrap();
    assert!(last_run > success, "{second}");
    assert_eq!(gauge(&second, "retry_last_exit_code", "nightly"), Some(1.0));
    assert_eq!(gauge(&second, "retry_last_tries", "nightly"), Some(1.0));
}

#[test]
fn a_run_the_lock_turned_away_is_counted_apart_and_leaves_the_jobs_last_figures() {
    let dir = common::runtime_dir("metrics-locked");
    let file = dir.join("retry.prom");
    let run = |command: &[&str]| {
        let mut cmd = retry_std();
        cmd.env("XDG_RUNTIME_DIR", &dir)
            .arg("--metrics")
            .arg(&file)
            .arg("--lock")
            .arg(dir.join("nightly.lock"))
            .args(["--label", "nightly", "-n", "1", "-q", "--"])
            .args(command);
        cmd
    };
    let first = output_bounded(&mut run(&["true"]), common::STEP_LIMIT);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let before = std::fs::read_to_string(&file).expect("the metrics file");
    // A run that holds the lock, its try started, while a second is turned away.
    let started = dir.join("started");
    let script = format!("touch '{}'; sleep 5", started.display());
    let mut holder = run(&["sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(common::STEP_LIMIT, || started.exists()));
    let turned = output_bounded(&mut run(&["true"]), common::STEP_LIMIT);
    // And a run that a signal stops while it waits for the lock.
    let mut waiting = retry_std()
        .env("XDG_RUNTIME_DIR", &dir)
        .arg("--metrics")
        .arg(&file)
        .arg("--lock")
        .arg(dir.join("nightly.lock"))
        .args(["--label", "nightly", "--lock-wait", "10s"])
        .args(["-q", "--", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    common::send(waiting.id(), nix::libc::SIGTERM);
    let stopped = common::wait_bounded(&mut waiting, common::STEP_LIMIT);
    let text = std::fs::read_to_string(&file).unwrap();
    common::send(holder.id(), nix::libc::SIGTERM);
    let _ = common::wait_bounded(&mut holder, common::STEP_LIMIT);
    assert_eq!(turned.status.code(), Some(75), "{turned:?}");
    assert!(
        text.contains("retry_runs_total{job=\"nightly\",outcome=\"locked\"} 1\n"),
        "{text}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(stopped.signal(), Some(nix::libc::SIGTERM));
    assert!(
        text.contains("retry_runs_total{job=\"nightly\",outcome=\"interrupted\"} 1\n"),
        "{text}"
    );
    // The job's last figures are still those of the run that ran.
    for name in [
        "retry_last_run_timestamp_seconds",
        "retry_last_success_timestamp_seconds",
        "retry_last_duration_seconds",
        "retry_last_tries",
        "retry_last_exit_code",
    ] {
        assert_eq!(
            gauge(&text, name, "nightly"),
            gauge(&before, name, "nightly"),
            "{name}:\n{text}"
        );
    }
}

#[test]
fn a_lock_file_that_cannot_be_used_is_the_one_the_warning_names() {
    let dir = common::temp_dir("metrics-lock-link");
    let file = dir.join("a.prom");
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("a.prom.lock")).unwrap();
    let out = output_bounded(
        retry_std()
            .arg("--metrics")
            .arg(&file)
            .args(["-q", "--", "true"]),
        common::STEP_LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = stderr_of(&out);
    assert!(stderr.contains("lock file 'a.prom.lock'"), "{stderr}");
    assert!(
        !file.exists() && !dir.join("elsewhere").exists(),
        "{stderr}"
    );
}

#[test]
fn a_file_that_is_not_retrys_is_left_as_it_is_with_one_warning_and_the_runs_status() {
    let dir = common::temp_dir("metrics-foreign");
    let file = dir.join("node.prom");
    let foreign = "# HELP node_thing A thing.\n# TYPE node_thing gauge\nnode_thing 1\n";
    std::fs::write(&file, foreign).unwrap();
    for (command, status) in [("true", 0), ("false", 1)] {
        let out = output_bounded(
            retry_std()
                .arg("--metrics")
                .arg(&file)
                .args(["-n", "1", "-q", "--", command]),
            common::STEP_LIMIT,
        );
        assert_eq!(out.status.code(), Some(status), "{out:?}");
        let stderr = stderr_of(&out);
        let warnings: Vec<_> = stderr.lines().filter(|l| l.contains("--metrics")).collect();
        assert_eq!(warnings.len(), 1, "{stderr}");
        assert!(
            warnings[0].contains(&file.display().to_string())
                && warnings[0].contains("something other than retry's metrics (line 1:"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), foreign);
}

#[test]
fn the_metrics_file_cannot_be_another_options_file_nor_go_with_a_dry_run() {
    let dir = common::temp_dir("metrics-same");
    let file = dir.join("same.prom");
    let ran = dir.join("ran");
    for other in ["--log-file", "--dead-letter", "--history", "--junit"] {
        let out = output_bounded(
            retry_std()
                .arg("--metrics")
                .arg(&file)
                .arg(other)
                .arg(dir.join(".").join("same.prom"))
                .arg("--")
                .arg("touch")
                .arg(&ran),
            common::STEP_LIMIT,
        );
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{other}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--metrics '") && stderr.contains(&format!("and {other} '")),
            "{stderr}"
        );
    }
    let out = output_bounded(
        retry_std()
            .arg("--metrics")
            .arg(&file)
            .args(["--dry-run", "--", "true"]),
        common::STEP_LIMIT,
    );
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(stderr_of(&out).contains("--metrics"), "{out:?}");
    assert!(!ran.exists() && !file.exists());
}

/// node_exporter's directory on Debian is under `/var/lib/prometheus`, which the `prometheus`
/// system account owns: such a directory may be on the way, while one of another local user is
/// refused, as on the way to any file `retry` keeps.
#[test]
fn the_way_may_go_through_a_system_accounts_directory_but_not_another_users() {
    use std::os::unix::fs::{PermissionsExt, chown};
    let Some(other) = common::other_user() else {
        return;
    };
    let dir = common::temp_dir("metrics-way");
    let run = |owner: u32| {
        let collector = dir.join(format!("owned-by-{owner}"));
        std::fs::create_dir(&collector).unwrap();
        std::fs::set_permissions(&collector, std::fs::Permissions::from_mode(0o755)).unwrap();
        chown(&collector, Some(owner), None).unwrap();
        let file = collector.join("retry.prom");
        let out = output_bounded(
            retry_std()
                .arg("--metrics")
                .arg(&file)
                .args(["-q", "--", "true"]),
            common::STEP_LIMIT,
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        (file, stderr_of(&out))
    };
    // A system account (uid 1, Debian's `daemon`), as `prometheus` is.
    let (file, stderr) = run(1);
    assert_eq!(stderr, "");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the collector, another account, reads it");
    let (file, stderr) = run(other);
    assert!(
        stderr.contains("--metrics") && stderr.contains(&format!("owned by uid {other}")),
        "{stderr}"
    );
    assert!(!file.exists());
}

/// A job that uses a quota and a throttle has their state as gauges, the last its run learned
/// (as its JSON log's last `quota` event says); a job that uses neither has none.
#[test]
fn a_quota_and_a_throttle_leave_their_tokens_and_p_as_gauges_of_the_job() {
    let test = "a_quota_and_a_throttle_leave_their_tokens_and_p_as_gauges_of_the_job";
    let dir = common::runtime_dir("metrics-quota");
    let file = dir.join("retry.prom");
    let run = |label: &str, options: &[&str], exit: &str| {
        let out = output_bounded(
            retry_std()
                .env("XDG_RUNTIME_DIR", &dir)
                .arg("--metrics")
                .arg(&file)
                .args([
                    "--label",
                    label,
                    "-n",
                    "3",
                    "-d",
                    "1ms",
                    "--log-format",
                    "json",
                ])
                .args(options)
                .args(["--", "sh", "-c", exit]),
            common::STEP_LIMIT,
        );
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        stderr_of(&out)
    };
    run("plain", &[], "exit 1");
    let log = run(
        "shared",
        &["--quota", "q:cap=5,floor=0/s", "--throttle", "2"],
        "exit 1",
    );
    let text = std::fs::read_to_string(&file).expect("the metrics file");
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = |field: &str| {
        events
            .iter()
            .rev()
            .find_map(|e| e[field].as_f64())
            .unwrap_or_else(|| panic!("no {field} in {log}"))
    };
    let tokens = gauge(&text, "retry_quota_tokens", "shared").expect(&text);
    let p = gauge(&text, "retry_throttle_hold_back_probability", "shared").expect(&text);
    assert!((tokens - last("tokens")).abs() < 0.001, "{log}\n{text}");
    assert!(
        (p - last("p")).abs() < 0.01 && p > 0.0 && p <= 1.0,
        "{log}\n{text}"
    );
    // The throttle may hold every retry back (it draws), and then no token is taken.
    assert!((0.0..=5.0).contains(&tokens), "{text}");
    for name in ["retry_quota_tokens", "retry_throttle_hold_back_probability"] {
        assert_eq!(gauge(&text, name, "plain"), None, "{text}");
        assert_eq!(text.matches(&format!("# TYPE {name} gauge\n")).count(), 1);
    }
    if common::have_package(test, "promtool", "prometheus", common::on_path("promtool")) {
        let out = output_bounded(
            Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(std::fs::File::open(&file).unwrap()),
            common::STEP_LIMIT,
        );
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics: {out:?}"
        );
    }
}

/// The alerting rule of docs/dashboards.md, as it is written there, is a rule Prometheus
/// loads, and pages for the job that has not succeeded for 26 hours and not before:
/// `promtool test rules` evaluates it over a last success at time 0, after 25 and 27 hours.
#[test]
fn the_docs_alert_rule_pages_after_26_hours_without_a_success_and_not_before() {
    let test = "the_docs_alert_rule_pages_after_26_hours_without_a_success_and_not_before";
    if !common::have_package(test, "promtool", "prometheus", common::on_path("promtool")) {
        return;
    }
    let page = include_str!("../../docs/dashboards.md");
    let rule: String = page
        .split("## An alert")
        .nth(1)
        .and_then(|rest| rest.split("```yaml\n").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("the alert's yaml block in docs/dashboards.md")
        .to_string();
    let dir = common::temp_dir("metrics-alert-rule");
    std::fs::write(dir.join("rules.yml"), &rule).unwrap();
    std::fs::write(
        dir.join("test.yml"),
        r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1h
    input_series:
      - series: 'retry_last_success_timestamp_seconds{job="nightly"}'
        values: '0x30'
    alert_rule_test:
      - eval_time: 25h
        alertname: NightlyNotSucceeding
        exp_alerts: []
      - eval_time: 27h
        alertname: NightlyNotSucceeding
        exp_alerts:
          - exp_labels: {severity: page, job: nightly}
            exp_annotations: {summary: "The nightly job has not succeeded for 26 hours"}
"#,
    )
    .unwrap();
    let out = output_bounded(
        Command::new("promtool")
            .args(["test", "rules", "test.yml"])
            .current_dir(&dir),
        common::STEP_LIMIT,
    );
    assert!(
        out.status.success(),
        "promtool test rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// On a full disk (files limited to 100 bytes: the new file is written in part, then not at
/// all) the run keeps its exit status, warns once, and leaves the file as the last run wrote it,
/// with no part of a new one beside it.
#[test]
fn a_full_disk_leaves_the_file_as_it_was_and_the_runs_status_alone() {
    let dir = common::temp_dir("metrics-full");
    let file = dir.join("m.prom");
    let run = |limit: Option<u64>| {
        let mut cmd = retry_std();
        cmd.arg("--metrics")
            .arg(&file)
            .args(["-n", "1", "-q", "--", "sh", "-c", "exit 3"]);
        if let Some(limit) = limit {
            common::on_a_full_disk(&mut cmd, limit);
        }
        output_bounded(&mut cmd, common::STEP_LIMIT)
    };
    assert_eq!(run(None).status.code(), Some(3));
    let before = std::fs::read_to_string(&file).unwrap();
    assert!(before.len() > 100, "{before}");
    let out = run(Some(100));
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("--metrics"), "{log}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["m.prom", "m.prom.lock"]);
    let _ = std::fs::remove_dir_all(dir);
}
