//! The `--metrics` file's text (docs/dashboards.md#metrics): Prometheus's text exposition format as
//! node_exporter's textfile collector reads it, rendered from the series of every job the file
//! counts, and read back from what `retry` wrote. Pure: no clock, no file.

use std::collections::BTreeMap;
use std::fmt::Write;

/// What one run adds to the file: its counts and its gauges.
#[derive(Clone, Debug, PartialEq)]
pub struct RunMetrics {
    /// The `job` label: `--label`, else the command's name.
    pub job: String,
    /// The run's outcome word, as the step outputs write it (`success`, `gave_up`, ...).
    pub outcome: String,
    /// The tries of the run by result word (`success`, `transient`, ...), each with its count.
    pub tries_by_result: Vec<(String, u64)>,
    /// When the run ended, in seconds since the Unix epoch.
    pub at: f64,
    /// Whether the run succeeded (exit status 0).
    pub succeeded: bool,
    pub duration_seconds: f64,
    pub tries: u64,
    pub exit_code: i64,
    /// The run ran no command: `--lock` turned it away, or a signal stopped it before its first
    /// try. It is counted, and the job's gauges stay those of its last run that ran.
    pub ran_nothing: bool,
    /// With `--quota`, the tokens the quota held at the run's last exchange with its store.
    pub quota_tokens: Option<f64>,
    /// With `--throttle`, its `p` at that exchange: the probability of holding a try back.
    pub throttle_p: Option<f64>,
}

/// The gauges of one job: what its last run was.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gauges {
    pub last_run: Option<f64>,
    pub last_success: Option<f64>,
    pub last_duration: Option<f64>,
    pub last_tries: Option<f64>,
    pub last_exit_code: Option<f64>,
    pub quota_tokens: Option<f64>,
    pub throttle_p: Option<f64>,
}

/// Every series of the file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// `retry_runs_total` by (job, outcome).
    pub runs: BTreeMap<(String, String), u64>,
    /// `retry_tries_total` by (job, result).
    pub tries: BTreeMap<(String, String), u64>,
    pub gauges: BTreeMap<String, Gauges>,
}

/// A metric family: its name, type and help, and where its samples are kept.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
}

const RUNS: Family = Family {
    name: "retry_runs_total",
    kind: "counter",
    help: "Runs of retry that ended, by job and outcome.",
};
const TRIES: Family = Family {
    name: "retry_tries_total",
    kind: "counter",
    help: "Tries of retry's runs, by job and result.",
};
const LAST_RUN: Family = Family {
    name: "retry_last_run_timestamp_seconds",
    kind: "gauge",
    help: "When the job's last run ended, in seconds since the Unix epoch.",
};
const LAST_SUCCESS: Family = Family {
    name: "retry_last_success_timestamp_seconds",
    kind: "gauge",
    help: "When the job's last successful run ended, in seconds since the Unix epoch.",
};
const LAST_DURATION: Family = Family {
    name: "retry_last_duration_seconds",
    kind: "gauge",
    help: "How long the job's last run took, in seconds.",
};
const LAST_TRIES: Family = Family {
    name: "retry_last_tries",
    kind: "gauge",
    help: "The tries of the job's last run.",
};
const LAST_EXIT_CODE: Family = Family {
    name: "retry_last_exit_code",
    kind: "gauge",
    help: "The exit status of the job's last run.",
};

const QUOTA_TOKENS: Family = Family {
    name: "retry_quota_tokens",
    kind: "gauge",
    help: "The tokens the job's shared retry quota held when its last run that used it last asked.",
};
const THROTTLE_P: Family = Family {
    name: "retry_throttle_hold_back_probability",
    kind: "gauge",
    help: "The probability that the job's throttle held a try back, when its last run that used it last asked.",
};

/// A gauge's family and its field in [`Gauges`].
struct Gauge {
    family: Family,
    get: fn(&Gauges) -> Option<f64>,
    set: fn(&mut Gauges) -> &mut Option<f64>,
}

const GAUGES: [Gauge; 7] = [
    Gauge {
        family: LAST_RUN,
        get: |g| g.last_run,
        set: |g| &mut g.last_run,
    },
    Gauge {
        family: LAST_SUCCESS,
        get: |g| g.last_success,
        set: |g| &mut g.last_success,
    },
    Gauge {
        family: LAST_DURATION,
        get: |g| g.last_duration,
        set: |g| &mut g.last_duration,
    },
    Gauge {
        family: LAST_TRIES,
        get: |g| g.last_tries,
        set: |g| &mut g.last_tries,
    },
    Gauge {
        family: LAST_EXIT_CODE,
        get: |g| g.last_exit_code,
        set: |g| &mut g.last_exit_code,
    },
    Gauge {
        family: QUOTA_TOKENS,
        get: |g| g.quota_tokens,
        set: |g| &mut g.quota_tokens,
    },
    Gauge {
        family: THROTTLE_P,
        get: |g| g.throttle_p,
        set: |g| &mut g.throttle_p,
    },
];

impl Metrics {
    /// Adds one run: its counts to the counters, its gauges in place of the job's, but for the
    /// last success, which a run that failed leaves as it was, and but for a run that ran no
    /// command, which leaves them all. The quota's tokens and the throttle's `p` are the last
    /// a run learned: a run that did not ask the quota's store leaves them.
    pub fn add(&mut self, run: &RunMetrics) {
        let runs = self
            .runs
            .entry((run.job.clone(), run.outcome.clone()))
            .or_default();
        *runs = runs.saturating_add(1);
        for (result, n) in &run.tries_by_result {
            let tries = self
                .tries
                .entry((run.job.clone(), result.clone()))
                .or_default();
            *tries = tries.saturating_add(*n);
        }
        if run.ran_nothing {
            return;
        }
        let gauges = self.gauges.entry(run.job.clone()).or_default();
        gauges.last_run = Some(run.at);
        if run.succeeded {
            gauges.last_success = Some(run.at);
        }
        gauges.last_duration = Some(run.duration_seconds);
        gauges.last_tries = Some(run.tries as f64);
        gauges.last_exit_code = Some(run.exit_code as f64);
        if let Some(tokens) = run.quota_tokens {
            gauges.quota_tokens = Some(tokens);
        }
        if let Some(p) = run.throttle_p {
            gauges.throttle_p = Some(p);
        }
    }

    /// The file's text: each family's `HELP` and `TYPE` once, then its samples, in the order of
    /// their labels.
    pub fn render(&self) -> String {
        let mut text = String::new();
        let mut counter = |family: &Family, series: &BTreeMap<(String, String), u64>, key| {
            if series.is_empty() {
                return;
            }
            head(&mut text, family);
            for ((job, other), n) in series {
                let _ = writeln!(
                    text,
                    "{}{{job=\"{}\",{key}=\"{}\"}} {n}",
                    family.name,
                    escape(job),
                    escape(other)
                );
            }
        };
        counter(&RUNS, &self.runs, "outcome");
        counter(&TRIES, &self.tries, "result");
        for gauge in &GAUGES {
            let family = &gauge.family;
            let mut samples = self
                .gauges
                .iter()
                .filter_map(|(job, g)| (gauge.get)(g).map(|v| (job, v)))
                .peekable();
            if samples.peek().is_none() {
                continue;
            }
            head(&mut text, family);
            for (job, value) in samples {
                let _ = writeln!(text, "{}{{job=\"{}\"}} {value}", family.name, escape(job));
            }
        }
        text
    }

    /// Reads back a file that `retry` wrote: its `HELP` and `TYPE` lines and its samples, and
    /// nothing else. Any other line (another program's series, a line cut short) is an error
    /// naming its number, so that a file that is not `retry`'s is never written over.
    pub fn parse(text: &str) -> Result<Metrics, Damaged> {
        let mut metrics = Metrics::default();
        for (k, line) in text.lines().enumerate() {
            let damaged = |why: &str| Damaged {
                line: k + 1,
                why: why.to_string(),
            };
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix("# ") {
                let mut words = comment.splitn(3, ' ');
                let (Some("HELP" | "TYPE"), Some(name)) = (words.next(), words.next()) else {
                    return Err(damaged("a comment that is not a HELP or TYPE line"));
                };
                if family(name).is_none() {
                    return Err(damaged("a metric that retry does not write"));
                }
                continue;
            }
            let (name, labels, value) = sample(line).ok_or_else(|| damaged("not a sample"))?;
            let label = |key: &str| -> Result<String, Damaged> {
                labels
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| damaged(&format!("a sample without its {key} label")))
            };
            let job = label("job")?;
            let count = || -> Result<u64, Damaged> {
                value
                    .parse()
                    .map_err(|_| damaged("a count that is not a whole number"))
            };
            let expected = match name {
                "retry_runs_total" => {
                    metrics.runs.insert((job, label("outcome")?), count()?);
                    2
                }
                "retry_tries_total" => {
                    metrics.tries.insert((job, label("result")?), count()?);
                    2
                }
                name => {
                    let set = GAUGES
                        .iter()
                        .find(|g| g.family.name == name)
                        .map(|g| g.set)
                        .ok_or_else(|| damaged("a metric that retry does not write"))?;
                    let v: f64 = value
                        .parse()
                        .map_err(|_| damaged("a value that is not a number"))?;
                    *set(metrics.gauges.entry(job).or_default()) = Some(v);
                    1
                }
            };
            if labels.len() != expected {
                return Err(damaged("a sample with labels that retry does not write"));
            }
        }
        Ok(metrics)
    }
}

/// A line of the file that `retry` did not write: its number, from 1, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    pub line: usize,
    pub why: String,
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.why)
    }
}

fn head(text: &mut String, family: &Family) {
    let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
    let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
}

/// The family `retry` writes under `name`, if any.
fn family(name: &str) -> Option<&'static Family> {
    [&RUNS, &TRIES]
        .into_iter()
        .chain(GAUGES.iter().map(|g| &g.family))
        .find(|f| f.name == name)
}

/// A label's value as the text format writes it: a backslash, a double quote and a line break
/// escaped.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample's name, labels and value, as its line writes them.
type Sample<'a> = (&'a str, Vec<(String, String)>, &'a str);

/// A sample line, `name{k="v",...} value`: its name, labels (unescaped) and value, or `None`.
fn sample(line: &str) -> Option<Sample<'_>> {
    let open = line.find('{')?;
    let name = &line[..open];
    let mut rest = line[open + 1..].chars();
    let mut labels = Vec::new();
    loop {
        let key: String = rest.by_ref().take_while(|&c| c != '=').collect();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        if rest.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match rest.next()? {
                '"' => break,
                '\\' => match rest.next()? {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    _ => return None,
                },
                c => value.push(c),
            }
        }
        labels.push((key, value));
        match rest.next()? {
            ',' => continue,
            '}' => break,
            _ => return None,
        }
    }
    let value = rest.as_str().strip_prefix(' ')?;
    if value.is_empty() || value.contains(' ') {
        return None;
    }
    Some((name, labels, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job: &str, outcome: &str, tries: &[(&str, u64)], at: f64) -> RunMetrics {
        RunMetrics {
            job: job.to_string(),
            outcome: outcome.to_string(),
            tries_by_result: tries.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
            at,
            succeeded: outcome == "success",
            duration_seconds: 1.5,
            tries: tries.iter().map(|(_, n)| n).sum(),
            exit_code: if outcome == "success" { 0 } else { 1 },
            ran_nothing: outcome == "locked",
            quota_tokens: None,
            throttle_p: None,
        }
    }

    #[test]
    fn the_quotas_tokens_and_the_throttles_p_are_the_last_a_run_learned() {
        let mut metrics = Metrics::default();
        metrics.add(&run("plain", "success", &[("success", 1)], 1.0));
        assert!(!metrics.render().contains("retry_quota_tokens"));
        let mut shared = run("shared", "success", &[("success", 1)], 2.0);
        (shared.quota_tokens, shared.throttle_p) = (Some(7.5), Some(0.25));
        metrics.add(&shared);
        let text = metrics.render();
        assert!(
            text.contains("retry_quota_tokens{job=\"shared\"} 7.5\n"),
            "{text}"
        );
        assert!(text.contains("retry_throttle_hold_back_probability{job=\"shared\"} 0.25\n"));
        assert!(
            !text.contains("retry_quota_tokens{job=\"plain\"}"),
            "{text}"
        );
        assert_eq!(Metrics::parse(&text), Ok(metrics));
    }

    #[test]
    fn a_run_turned_away_is_counted_and_leaves_the_jobs_gauges() {
        let mut metrics = Metrics::default();
        metrics.add(&run("nightly", "success", &[("success", 1)], 100.0));
        let before = metrics.gauges["nightly"].clone();
        metrics.add(&run("nightly", "locked", &[], 200.0));
        assert_eq!(metrics.gauges["nightly"], before);
        assert_eq!(
            metrics.runs[&("nightly".to_string(), "locked".to_string())],
            1
        );
    }

    #[test]
    fn what_is_rendered_reads_back_the_same() {
        let mut metrics = Metrics::default();
        metrics.add(&run(
            "nightly",
            "success",
            &[("transient", 1), ("success", 1)],
            100.25,
        ));
        metrics.add(&run("backup", "gave_up", &[("permanent", 1)], 200.5));
        let text = metrics.render();
        assert_eq!(Metrics::parse(&text), Ok(metrics.clone()));
        assert_eq!(Metrics::parse(&text).unwrap().render(), text);
        assert_eq!(text.matches("# TYPE retry_runs_total counter").count(), 1);
        assert!(text.contains("retry_runs_total{job=\"backup\",outcome=\"gave_up\"} 1\n"));
        assert!(text.contains("retry_last_run_timestamp_seconds{job=\"backup\"} 200.5\n"));
    }

    #[test]
    fn counters_add_up_and_a_failed_run_keeps_the_last_success() {
        let mut metrics = Metrics::default();
        metrics.add(&run("j", "success", &[("success", 1)], 10.0));
        metrics.add(&run("j", "gave_up", &[("transient", 2)], 20.0));
        metrics.add(&run("j", "success", &[("success", 1)], 30.0));
        metrics.add(&run("j", "gave_up", &[("transient", 1)], 40.0));
        let key = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(metrics.runs[&key("j", "success")], 2);
        assert_eq!(metrics.runs[&key("j", "gave_up")], 2);
        assert_eq!(metrics.tries[&key("j", "transient")], 3);
        let g = &metrics.gauges["j"];
        assert_eq!((g.last_run, g.last_success), (Some(40.0), Some(30.0)));
        assert_eq!(g.last_exit_code, Some(1.0));
    }

    #[test]
    fn label_values_are_escaped_and_read_back() {
        let job = "a \"quoted\"\\back\nslash";
        let mut metrics = Metrics::default();
        metrics.add(&run(job, "success", &[("success", 1)], 1.0));
        let text = metrics.render();
        assert!(
            text.contains(r#"{job="a \"quoted\"\\back\nslash"}"#),
            "{text}"
        );
        assert_eq!(text.lines().filter(|l| l.contains("quoted")).count(), 7);
        assert!(Metrics::parse(&text).unwrap().gauges.contains_key(job));
    }

    #[test]
    fn a_foreign_or_damaged_line_is_named_by_its_number() {
        let mut metrics = Metrics::default();
        metrics.add(&run("j", "success", &[("success", 1)], 1.0));
        let good = metrics.render();
        let line = good.lines().count() + 1;
        for bad in [
            "node_load1 0.5",
            "other_metric{job=\"j\"} 1",
            "retry_runs_total{job=\"j\",outcome=\"success\"",
            "retry_runs_total{job=\"j\",outcome=\"success\"} 1.5",
            "retry_runs_total{job=\"j\"} 1",
            "retry_last_tries{job=\"j\",instance=\"h\"} 1",
            "retry_last_tries{job=\"j\"} x",
            "# just a comment",
            "root:x:0:0:root:/root:/bin/bash",
        ] {
            let damaged = Metrics::parse(&format!("{good}{bad}\n")).unwrap_err();
            assert_eq!(damaged.line, line, "{bad}");
        }
        assert_eq!(Metrics::parse(""), Ok(Metrics::default()));
    }
}
