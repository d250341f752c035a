//! `--ping URL` as a sink of the run's events (docs/dashboards.md#pings): a dead man's switch
//! in healthchecks.io's scheme. When the first try starts, `URL/start` is sent on a thread of
//! its own while the command runs; when the run ends, `URL` for a success, or `URL/fail` for a
//! failure, its body a line with the exit status and why the run ended and then the tail of the
//! last try's output, each with `?rid=RUN_ID`. A `cronitor.link` URL gets Cronitor's `?state=run`, `complete` or `fail`
//! instead. A run that ran no command pings nothing. The URL is a secret: a warning shows it as
//! `http::shown` does. A ping that fails is a warning, and changes nothing else.

use std::time::Duration;

use crate::exit::ExitStatus;
use crate::http::{self, HttpError, Method, Pending, Request};
use crate::outcome::RunOutcome;
use crate::report::event::{Envelope, Event, OutputTail, Warning};
use crate::report::facts::{RunFacts, Sink};

/// The most of the last try's output that a failure's ping carries: its last bytes.
pub const PING_TAIL_MOST: usize = 10_000;

/// The most of it that a Cronitor ping carries, in its URL (Cronitor keeps 2,000 characters
/// of a message).
const CRONITOR_MOST: usize = 1_000;

/// What a ping says.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Says {
    Start,
    Success,
    /// The run's exit status, and the line that says it with why the run ended.
    Failure(i32, String),
}

/// Pings `--ping` when the command starts and when the run ends.
pub struct Ping {
    url: String,
    /// The end of the run's budget, from its start, if it has one: the end's ping has less
    /// time when the budget ends sooner ([`http::within`]).
    until: Option<Duration>,
    /// The start's ping, sent while the command runs: `None` until the first try starts.
    start: Option<Pending>,
    /// The tail of the last try's output.
    tail: Option<OutputTail>,
}

impl Ping {
    pub fn new(url: String, until: Option<Duration>) -> Ping {
        Ping {
            url,
            until,
            start: None,
            tail: None,
        }
    }

    /// The request that says `says` of the run `run_id`.
    fn request(&self, says: Says, run_id: &str) -> Request {
        let (path, query) = match self.url.split('#').next().unwrap_or("").split_once('?') {
            Some((path, query)) => (path, format!("{query}&")),
            None => (self.url.split('#').next().unwrap_or(""), String::new()),
        };
        let path = path.trim_end_matches('/');
        let rid = encode(run_id);
        let tail = match &says {
            Says::Failure(..) => self.tail_bytes(),
            _ => Vec::new(),
        };
        if cronitor(&self.url) {
            let state = match &says {
                Says::Start => "run".to_string(),
                Says::Success => "complete&status_code=0".to_string(),
                Says::Failure(code, _) => {
                    let cut = &tail[tail.len().saturating_sub(CRONITOR_MOST)..];
                    let message = encode(&String::from_utf8_lossy(cut));
                    format!("fail&status_code={code}&message={message}")
                }
            };
            return Request {
                method: Method::Get,
                url: format!("{path}?{query}state={state}&series={rid}"),
                headers: Vec::new(),
                body: Vec::new(),
            };
        }
        let (end, body) = match says {
            Says::Start => ("/start", Vec::new()),
            Says::Success => ("", Vec::new()),
            Says::Failure(_, line) => ("/fail", [line.into_bytes(), tail].concat()),
        };
        Request {
            method: Method::Post,
            url: format!("{path}{end}?{query}rid={rid}"),
            headers: vec![(
                "content-type".to_string(),
                "text/plain; charset=utf-8".to_string(),
            )],
            body,
        }
    }

    /// The last [`PING_TAIL_MOST`] bytes of the last try's output, from the start of a
    /// character.
    fn tail_bytes(&self) -> Vec<u8> {
        let Some(tail) = &self.tail else {
            return Vec::new();
        };
        let mut from = tail.bytes.len().saturating_sub(PING_TAIL_MOST);
        while from < tail.bytes.len() && from > 0 && tail.bytes[from] & 0xc0 == 0x80 {
            from += 1;
        }
        tail.bytes[from..].to_vec()
    }

    /// Sends the end's ping of the run that ended as `outcome`, after the start's answer, both
    /// within the deadline; a run that ran no command pings nothing.
    fn end(
        &mut self,
        outcome: &RunOutcome,
        facts: &RunFacts,
        elapsed: Duration,
    ) -> Option<Warning> {
        let start = self.start.take()?;
        let says = match outcome.status {
            ExitStatus::Success => Says::Success,
            status => Says::Failure(status.code(), failure_line(outcome)),
        };
        let left = self.until.map(|end| end.saturating_sub(elapsed));
        let request = self.request(says, &facts.run_id);
        let (started, ended) = start.then(&request, http::within(left));
        let (what, e) = match (started, ended) {
            (Ok(_), Ok(_)) => return None,
            (Err(_), Err(e)) => ("the run's start and end", e),
            (Err(e), Ok(_)) => ("the run's start", e),
            (Ok(_), Err(e)) => ("the run's end", e),
        };
        Some(Warning::NotReported {
            option: "--ping",
            what,
            url: http::shown(&self.url),
            why: without_secret(e, &self.url).to_string(),
        })
    }
}

/// The first line of a failure's body: the run's exit status and why it ended, in the words
/// and order of the step outputs (docs/ci.md#step-outputs), so that the check's log shows the
/// status that healthchecks.io's `/fail` does not carry.
fn failure_line(outcome: &RunOutcome) -> String {
    format!(
        "exit_code={} outcome={} reason={} tries={}\n",
        outcome.status.code(),
        outcome.word(),
        outcome.reason().unwrap_or(""),
        outcome.tries.counted,
    )
}

/// `e`, with the server's answer left out when it repeats a piece of the URL's path or query
/// (the check's secret): a web server's page for a missing file names the path it was asked
/// for. A piece is any 8 bytes in a row of them, or all of them when they are shorter.
fn without_secret(e: HttpError, url: &str) -> HttpError {
    let HttpError::Status { status, said } = e else {
        return e;
    };
    let after_host = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| &rest[at..]))
        .unwrap_or("");
    let secret = after_host.split('#').next().unwrap_or("").as_bytes();
    let piece = secret.len().min(8);
    let repeats = piece >= 2
        && secret
            .windows(piece)
            .any(|w| said.as_bytes().windows(piece).any(|s| s == w));
    match repeats {
        true => HttpError::Status {
            status,
            said: "(its answer is not shown: it repeats a part of the URL)".to_string(),
        },
        false => HttpError::Status { status, said },
    }
}

/// Whether `url` is Cronitor's, whose pings take their state in the query.
fn cronitor(url: &str) -> bool {
    let host = url.split_once("://").map_or("", |(_, rest)| {
        rest.split(['/', '?', '#', ':']).next().unwrap_or("")
    });
    host.eq_ignore_ascii_case("cronitor.link")
}

/// `text` as a URL's query holds it: every byte but letters, digits and `-_.~` as `%XX`.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            true => out.push(b as char),
            false => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Sink for Ping {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        match &envelope.event {
            Event::TryStarted { .. } if self.start.is_none() => {
                let request = self.request(Says::Start, &facts.run_id);
                self.start = Some(Pending::send(request, http::DEADLINE));
            }
            Event::TryOutputDone { output, .. } => self.tail = output.clone(),
            Event::RunEnded(outcome) => return self.end(outcome, facts, envelope.stamp.elapsed),
            // The run's end is its outcome's; the rest tells nothing a ping carries.
            Event::Start { .. }
            | Event::Stagger { .. }
            | Event::TryStarted { .. }
            | Event::TryEnded(_)
            | Event::TryInterrupted(_)
            | Event::TryHeld(_)
            | Event::RequestIgnored { .. }
            | Event::Leftovers { .. }
            | Event::Wait { .. }
            | Event::HookFailed { .. }
            | Event::NoTimeAfterHook { .. }
            | Event::Quota { .. }
            | Event::Succeeded { .. }
            | Event::RepeatEnded { .. }
            | Event::Received { .. }
            | Event::GaveUp { .. }
            | Event::DoneBefore { .. }
            | Event::DeadLettered { .. }
            | Event::Countdown { .. }
            | Event::StatusCleared
            | Event::Concluded { .. }
            | Event::Warning(_)
            | Event::Error(_)
            | Event::ReplayStart { .. }
            | Event::ReplayEnd { .. }
            | Event::ReplaySummary { .. } => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RID: &str = "0b2f7a10-8f1c-4f3e-b0a5-5d7a1a0e4b11";

    #[test]
    fn pings_follow_the_scheme_of_healthchecks() {
        let mut ping = Ping::new("https://hc-ping.com/KEY/".into(), None);
        let start = ping.request(Says::Start, RID);
        assert_eq!(
            start.url,
            format!("https://hc-ping.com/KEY/start?rid={RID}")
        );
        assert_eq!(
            ping.request(Says::Success, RID).url,
            format!("https://hc-ping.com/KEY?rid={RID}")
        );
        ping.tail = Some(OutputTail {
            bytes: b"disk full\n".to_vec(),
            cut: false,
        });
        let line = "exit_code=3 outcome=gave_up reason=tries tries=2\n".to_string();
        let failed = ping.request(Says::Failure(3, line), RID);
        assert_eq!(
            failed.url,
            format!("https://hc-ping.com/KEY/fail?rid={RID}")
        );
        assert_eq!(
            failed.body,
            b"exit_code=3 outcome=gave_up reason=tries tries=2\ndisk full\n"
        );
        let slug = Ping::new("https://hc-ping.com/PK/nightly?create=1".into(), None);
        assert_eq!(
            slug.request(Says::Start, RID).url,
            format!("https://hc-ping.com/PK/nightly/start?create=1&rid={RID}")
        );
    }

    #[test]
    fn cronitor_gets_its_state_in_the_query() {
        let mut ping = Ping::new("https://cronitor.link/p/KEY/nightly".into(), None);
        let url = |p: &Ping, s: Says| p.request(s, "r1").url;
        assert_eq!(
            url(&ping, Says::Start),
            "https://cronitor.link/p/KEY/nightly?state=run&series=r1"
        );
        ping.tail = Some(OutputTail {
            bytes: "no space: /var €".as_bytes().to_vec(),
            cut: false,
        });
        assert_eq!(
            url(&ping, Says::Failure(1, "exit_code=1\n".into())),
            "https://cronitor.link/p/KEY/nightly?state=fail&status_code=1&message=\
             no%20space%3A%20%2Fvar%20%E2%82%AC&series=r1"
        );
    }

    #[test]
    fn an_answer_that_repeats_a_piece_of_the_urls_path_is_left_out() {
        let echo = |said: &str| HttpError::Status {
            status: 404,
            said: said.to_string(),
        };
        let url = "https://hc-ping.com/5e3c7f0a-91d2-4c1b?create=1#x";
        for said in [
            "The requested URL /5e3c7f0a-91d2-4c1b/fail was not found",
            "no check 91d2-4c1b",
        ] {
            let shown = without_secret(echo(said), url).to_string();
            assert_eq!(
                shown,
                "the server answered 404: (its answer is not shown: it repeats a part of the URL)"
            );
        }
        assert_eq!(
            without_secret(echo("rate limited"), url).to_string(),
            "the server answered 404: rate limited"
        );
        let timeout = HttpError::Timeout(Duration::from_secs(2));
        assert_eq!(without_secret(timeout.clone(), url), timeout);
    }

    #[test]
    fn a_failure_carries_the_last_bytes_of_the_output_from_a_characters_start() {
        let mut ping = Ping::new("http://h/k".into(), None);
        let mut bytes = vec![b'a'; 20_000];
        bytes.extend("é".repeat(10).as_bytes());
        ping.tail = Some(OutputTail { bytes, cut: true });
        let tail = ping.tail_bytes();
        assert!(tail.len() <= PING_TAIL_MOST);
        assert!(
            std::str::from_utf8(&tail)
                .unwrap()
                .ends_with(&"é".repeat(10))
        );
        assert!(tail.len() >= PING_TAIL_MOST - 3);
    }
}
