//! `--pushgateway URL` as a sink of the run's events (docs/dashboards.md#pushgateway): when the
//! run ends, the gauges that `--metrics` keeps of its job, in the same text, POSTed to the
//! Pushgateway's group of the job (`URL/metrics/job/JOB`). A POST replaces only the metrics it
//! carries, and a run that failed carries no last success, so the job's last success stays
//! (docs/decisions.md says why POST, and why not the counters). A push that fails is a
//! warning, and changes nothing else.

use std::ffi::OsString;
use std::time::Duration;

use crate::http::{self, Method, Request};
use crate::report::event::{Envelope, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::report::metrics::RunCount;
use crate::store::metrics::text::{Metrics, RunMetrics};

/// The variable that names the user of the Pushgateway's basic authentication.
pub const USER_VAR: &str = "RETRY_PUSHGATEWAY_USER";
/// The variable that holds that user's password.
pub const PASSWORD_VAR: &str = "RETRY_PUSHGATEWAY_PASSWORD";

/// The type of the text pushed: Prometheus's text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Pushes the run's metrics to `--pushgateway` when it ends.
pub struct Pushgateway {
    url: String,
    /// The end of the run's budget, from its start, if it has one: the push's deadline is
    /// shorter when the budget ends sooner ([`http::within`]).
    until: Option<Duration>,
    /// The user and password of basic authentication, from the environment.
    credentials: Option<(String, String)>,
    count: RunCount,
}

impl Pushgateway {
    /// The sink of `url`, for `command`, with the credentials `var` gives.
    pub fn new(
        url: String,
        command: &[OsString],
        until: Option<Duration>,
        var: &dyn Fn(&str) -> Option<OsString>,
    ) -> Pushgateway {
        let text = |name| var(name).map(|v| v.to_string_lossy().into_owned());
        let credentials = match (text(USER_VAR), text(PASSWORD_VAR)) {
            (None, None) => None,
            (user, password) => Some((user.unwrap_or_default(), password.unwrap_or_default())),
        };
        Pushgateway {
            url,
            until,
            credentials,
            count: RunCount::new(command),
        }
    }

    /// The request that pushes `run`; none for a run that ran no command, which leaves the
    /// job's gauges as they are.
    fn request(&self, run: &RunMetrics) -> Option<Request> {
        if run.ran_nothing {
            return None;
        }
        let mut metrics = Metrics::default();
        metrics.add(run);
        // Counters a push would only set to this run's counts: the Pushgateway keeps what is
        // pushed, and adds nothing up.
        metrics.runs.clear();
        metrics.tries.clear();
        let mut headers = vec![("content-type".to_string(), TEXT_FORMAT.to_string())];
        if let Some((user, password)) = &self.credentials {
            let pair = base64(format!("{user}:{password}").as_bytes());
            headers.push(("authorization".to_string(), format!("Basic {pair}")));
        }
        Some(Request {
            method: Method::Post,
            url: format!(
                "{}/metrics/{}",
                self.url.trim_end_matches('/'),
                group(&run.job)
            ),
            headers,
            body: metrics.render().into_bytes(),
        })
    }

    /// Why the push failed, in words that hold no piece of the password: a server's answer
    /// may quote what it was sent.
    fn why(&self, e: &http::HttpError) -> String {
        let why = e.to_string();
        let password = self.credentials.as_ref().map_or("", |(_, p)| p.as_str());
        match holds_a_piece_of(&why, password) {
            false => why,
            true => match e {
                http::HttpError::Status { status, .. } => format!("the server answered {status}"),
                _ => "the request failed".to_string(),
            },
        }
    }
}

/// The path of the job's group: `job/JOB`, or `job@base64/…` for a name that is empty or
/// holds anything but letters, digits, `-`, `_` and `.` (a `/` would end it).
fn group(job: &str) -> String {
    let plain = !job.is_empty()
        && job
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    match plain {
        true => format!("job/{job}"),
        false if job.is_empty() => "job@base64/=".to_string(),
        false => format!(
            "job@base64/{}",
            base64(job.as_bytes()).replace('+', "-").replace('/', "_")
        ),
    }
}

/// `bytes` in base64 (RFC 4648, with padding); the Pushgateway reads the URL-safe alphabet,
/// which [`group`] makes of it.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

/// Whether `text` holds `secret` or any 8 characters of it in a row.
fn holds_a_piece_of(text: &str, secret: &str) -> bool {
    let chars: Vec<char> = secret.chars().collect();
    if chars.is_empty() {
        return false;
    }
    if chars.len() <= 8 {
        return text.contains(secret);
    }
    chars
        .windows(8)
        .any(|w| text.contains(&w.iter().collect::<String>()))
}

impl Sink for Pushgateway {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let outcome = self.count.take(&envelope.event)?;
        let run = self.count.run(outcome, envelope.stamp.at, facts);
        let request = self.request(&run)?;
        let left = self
            .until
            .map(|end| end.saturating_sub(envelope.stamp.elapsed));
        http::deliver(&request, http::within(left))
            .err()
            .map(|e| Warning::NotReported {
                option: "--pushgateway",
                what: "this run's metrics",
                url: crate::text::printable(&self.url),
                why: self.why(&e),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_grouped_by_its_name_or_in_base64_when_a_path_cannot_hold_it() {
        assert_eq!(group("nightly"), "job/nightly");
        assert_eq!(group("db-backup_2.x"), "job/db-backup_2.x");
        assert_eq!(group(""), "job@base64/=");
        // What the Pushgateway's README gives for "/var/tmp".
        assert_eq!(group("/var/tmp"), "job@base64/L3Zhci90bXA=");
        // The URL-safe alphabet (RFC 4648, section 5): `-` and `_` for `+` and `/`.
        assert_eq!(group("??>"), "job@base64/Pz8-");
        assert_eq!(group("???"), "job@base64/Pz8_");
        assert_eq!(base64(b"ab?"), "YWI/");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn a_failed_run_pushes_no_last_success_and_no_counter() {
        let command = [OsString::from("/usr/bin/nightly")];
        let sink = Pushgateway::new("http://gw:9091/".into(), &command, None, &|_| None);
        let run = |succeeded| RunMetrics {
            job: "nightly".into(),
            outcome: "gave_up".into(),
            tries_by_result: vec![("transient".into(), 3)],
            at: 1_700_000_000.5,
            succeeded,
            duration_seconds: 2.0,
            tries: 3,
            exit_code: if succeeded { 0 } else { 1 },
            ran_nothing: false,
            quota_tokens: None,
            throttle_p: None,
        };
        let failed = sink.request(&run(false)).unwrap();
        assert_eq!(failed.url, "http://gw:9091/metrics/job/nightly");
        assert_eq!(failed.method, Method::Post);
        let text = String::from_utf8(failed.body).unwrap();
        assert!(text.contains("retry_last_run_timestamp_seconds{job=\"nightly\"} 1700000000.5"));
        assert!(!text.contains("retry_last_success"), "{text}");
        assert!(!text.contains("_total"), "{text}");
        let text = String::from_utf8(sink.request(&run(true)).unwrap().body).unwrap();
        assert!(text.contains("retry_last_success_timestamp_seconds{job=\"nightly\"}"));
        let nothing = RunMetrics {
            ran_nothing: true,
            ..run(false)
        };
        assert!(sink.request(&nothing).is_none());
    }

    #[test]
    fn the_password_goes_in_a_header_and_never_in_the_words_of_a_failure() {
        let vars = |name: &str| match name {
            USER_VAR => Some(OsString::from("ci")),
            PASSWORD_VAR => Some(OsString::from("s3cret-pass-word")),
            _ => None,
        };
        let sink = Pushgateway::new("https://gw".into(), &[], None, &vars);
        let run = RunMetrics {
            job: "j".into(),
            outcome: "success".into(),
            tries_by_result: Vec::new(),
            at: 1.0,
            succeeded: true,
            duration_seconds: 1.0,
            tries: 1,
            exit_code: 0,
            ran_nothing: false,
            quota_tokens: None,
            throttle_p: None,
        };
        let request = sink.request(&run).unwrap();
        let auth = format!("Basic {}", base64(b"ci:s3cret-pass-word"));
        assert!(request.headers.contains(&("authorization".into(), auth)));
        let echoed = http::HttpError::Status {
            status: 401,
            said: "bad credentials ci:s3cret-pa".into(),
        };
        assert_eq!(sink.why(&echoed), "the server answered 401");
    }
}
