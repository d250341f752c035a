//! HTTP for what a run tells the world outside (`--pushgateway`, `--ping`): one request at a
//! time, each exchange (the name looked up, connecting, TLS, sending, the answer read) within
//! one deadline, tried again on 429 and 5xx while the deadline allows. Over ureq, with
//! rustls and ring as `rediss://` uses them: the server's certificate verified against the
//! system's trusted roots (those that `SSL_CERT_FILE` or `SSL_CERT_DIR` name when set, as
//! OpenSSL and curl read them), no way to skip it, no redirect followed.
//!
//! Nothing here runs, and nothing is read or made, unless a request is sent: a run that names
//! no URL never calls it. The errors are one line each that never holds the URL (whose path
//! may be a secret): the caller names the URL as it may be shown ([`shown`]).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::Agent;
use ureq::http::Uri;
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

/// The most of an answer's body read: what a Pushgateway or a ping receiver says of an error.
pub const MOST_ANSWER: u64 = 16 * 1024;

/// The tries of one request at most (the first and two more), on 429, 5xx or a failed
/// connection, within its deadline.
pub const MOST_TRIES: u32 = 3;

/// The most a request of a run's report (a push, a ping) may take, the tries again included.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// The least it is given when the run's budget ends sooner: what a request to a server near by
/// needs, so that a run that used up its budget still reports how it ended.
pub const LEAST_DEADLINE: Duration = Duration::from_millis(500);

/// The time a request of a run's report is given, when `left` of the run's budget is left (if
/// it has one): what is left, but at least [`LEAST_DEADLINE`] and at most [`DEADLINE`].
pub fn within(left: Option<Duration>) -> Duration {
    left.unwrap_or(DEADLINE).clamp(LEAST_DEADLINE, DEADLINE)
}

/// The method of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
}

/// One request: where, how, what it carries.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: Method,
    pub url: String,
    /// Its headers, by name and value.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What the server answered: its status and the start of its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why a request was not answered with a success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// No answer within the deadline, of this length.
    Timeout(Duration),
    /// The connection could not be made or broke, in the system's words.
    Connection(String),
    /// TLS failed: the server's certificate is not trusted, or the handshake failed.
    Tls(String),
    /// The server answered with a status that is not a success (2xx), and this much of its
    /// body, on one line.
    Status { status: u16, said: String },
    /// Anything else, in the client's words.
    Other(String),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Timeout(d) => write!(f, "no answer within {}", crate::duration::hms(*d)),
            HttpError::Connection(why) => write!(f, "cannot connect: {why}"),
            HttpError::Tls(why) => write!(f, "TLS: {why}"),
            HttpError::Status { status, said } if said.is_empty() => {
                write!(f, "the server answered {status}")
            }
            HttpError::Status { status, said } => {
                write!(f, "the server answered {status}: {said}")
            }
            HttpError::Other(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// Why a URL is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadUrl {
    /// Not a URL at all.
    NotAUrl,
    /// A scheme other than `http` and `https`.
    Scheme(String),
    /// No host.
    NoHost,
    /// A user or password before the host, which other users would read in the process list.
    Credentials,
}

impl fmt::Display for BadUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadUrl::NotAUrl => write!(f, "not an http:// or https:// URL"),
            BadUrl::Scheme(s) => write!(f, "the scheme {s}:// is not http:// or https://"),
            BadUrl::NoHost => write!(f, "the URL names no host"),
            BadUrl::Credentials => write!(
                f,
                "a user or password in the URL is seen by every user in the process list"
            ),
        }
    }
}

/// Checks `text` as a URL a request can go to: `http://` or `https://`, a host, no user or
/// password before it.
pub fn check_url(text: &str) -> Result<(), BadUrl> {
    let (scheme, _) = text.split_once("://").ok_or(BadUrl::NotAUrl)?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            return Err(BadUrl::NotAUrl);
        }
        return Err(BadUrl::Scheme(scheme.to_string()));
    }
    let uri: Uri = text.parse().map_err(|_| BadUrl::NotAUrl)?;
    let authority = uri.authority().ok_or(BadUrl::NoHost)?;
    if authority.as_str().contains('@') {
        return Err(BadUrl::Credentials);
    }
    if authority.host().is_empty() {
        return Err(BadUrl::NoHost);
    }
    Ok(())
}

/// `url` as it may be printed: its scheme, host and port, and `…` for the rest, whose path may
/// be a secret (a ping URL's key); a URL that cannot be read shows as `…` alone.
pub fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "…".to_string();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let printable = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.:[]".contains(c))
    };
    if !printable(scheme) || !printable(host) || host.is_empty() {
        return "…".to_string();
    }
    format!("{scheme}://{host}/…")
}

/// Posts `body` to `url` with `headers`, within `within`, tried again on 429, 5xx or a failed
/// connection (at most [`MOST_TRIES`] times) while the deadline allows.
pub fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    within: Duration,
) -> Result<Answer, HttpError> {
    let request = Request {
        method: Method::Post,
        url: url.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.to_vec(),
    };
    deliver(&request, within)
}

/// Sends `request` within `within`, tried again as [`post`] says.
pub fn deliver(request: &Request, within: Duration) -> Result<Answer, HttpError> {
    let deadline = Instant::now() + within;
    let agent = agent_for(&request.url)?;
    let mut pause = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HttpError::Timeout(within));
        }
        let result = exchange(&agent, request, left).map_err(|e| match e {
            HttpError::Timeout(_) => HttpError::Timeout(within),
            other => other,
        });
        let again = match &result {
            Err(HttpError::Status { status, .. }) => *status == 429 || *status >= 500,
            Err(HttpError::Connection(_)) => true,
            _ => false,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if !again || tries >= MOST_TRIES || left <= pause {
            return result;
        }
        std::thread::sleep(pause);
        pause *= 4;
    }
}

/// A request sent on a thread of its own, whose answer is waited for later.
pub struct Pending {
    answer: std::sync::mpsc::Receiver<Result<Answer, HttpError>>,
    within: Duration,
}

impl Pending {
    /// Sends `request` within `within` on a thread of its own.
    pub fn send(request: Request, within: Duration) -> Pending {
        let (tx, answer) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || {
                let _ = tx.send(deliver(&request, within));
            });
        if let Err(e) = spawned {
            let (tx, rx) = std::sync::mpsc::channel();
            let _ = tx.send(Err(HttpError::Other(format!("cannot start a thread: {e}"))));
            return Pending { answer: rx, within };
        }
        Pending { answer, within }
    }

    /// The answer, waited for until `until` at most (the thread is left to end by itself
    /// after it: its own deadline ends it).
    pub fn wait(self, until: Instant) -> Result<Answer, HttpError> {
        let left = until.saturating_duration_since(Instant::now());
        self.answer
            .recv_timeout(left)
            .unwrap_or(Err(HttpError::Timeout(self.within)))
    }

    /// The answer, then `next` sent: both within `within` from now, so that the request
    /// before, still unanswered, and the next one cost no more together.
    pub fn then(
        self,
        next: &Request,
        within: Duration,
    ) -> (Result<Answer, HttpError>, Result<Answer, HttpError>) {
        let deadline = Instant::now() + within;
        let before = self.wait(deadline);
        let left = deadline.saturating_duration_since(Instant::now());
        let after = match left.is_zero() {
            true => Err(HttpError::Timeout(within)),
            false => deliver(next, left).map_err(|e| match e {
                HttpError::Timeout(_) => HttpError::Timeout(within),
                other => other,
            }),
        };
        (before, after)
    }
}

/// An agent for `url`: the system's trusted roots read for `https://` only.
fn agent_for(url: &str) -> Result<Agent, HttpError> {
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    let mut tls = TlsConfig::builder().provider(TlsProvider::Rustls);
    if https {
        tls = tls
            .root_certs(system_roots()?)
            .unversioned_rustls_crypto_provider(provider());
    }
    let config = Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("retry/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls.build())
        .build();
    Ok(config.new_agent())
}

/// ring's provider, with the key exchanges in the order `rediss://` offers them (X25519
/// first: docs/decisions.md says why).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    {
        use rustls::crypto::ring::kx_group::{SECP256R1, SECP384R1, X25519};
        provider.kx_groups = vec![X25519, SECP256R1, SECP384R1];
    }
    Arc::new(provider)
}

/// The system's trusted roots.
fn system_roots() -> Result<RootCerts, HttpError> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), ToString::to_string);
        return Err(HttpError::Tls(format!(
            "the system's trusted certificates cannot be read ({}); install ca-certificates, \
             or name a bundle in SSL_CERT_FILE",
            one_line(&why)
        )));
    }
    let certs: Vec<Certificate<'static>> = found
        .certs
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    Ok(RootCerts::new_with_certs(&certs))
}

/// One exchange of `request` within `within`.
fn exchange(agent: &Agent, request: &Request, within: Duration) -> Result<Answer, HttpError> {
    let mut builder = ureq::http::Request::builder()
        .method(match request.method {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
        })
        .uri(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let req = builder
        .body(request.body.clone())
        .map_err(|_| HttpError::Other("the request cannot be made of this URL".into()))?;
    let req = agent
        .configure_request(req)
        .timeout_global(Some(within))
        .build();
    let mut answer = agent.run(req).map_err(|e| error_of(e, within))?;
    let status = answer.status().as_u16();
    let body = answer
        .body_mut()
        .with_config()
        .limit(MOST_ANSWER)
        .read_to_vec()
        .unwrap_or_default();
    if (200..300).contains(&status) {
        return Ok(Answer { status, body });
    }
    let said = one_line(&String::from_utf8_lossy(&body));
    let said: String = said.chars().take(200).collect();
    Err(HttpError::Status { status, said })
}

/// The words of one of ureq's errors, which never hold the URL.
fn error_of(e: ureq::Error, within: Duration) -> HttpError {
    use ureq::Error as E;
    match e {
        E::Timeout(_) => HttpError::Timeout(within),
        E::Io(io) => io_error(&io, within),
        E::Rustls(tls) => HttpError::Tls(tls_words(&tls)),
        E::HostNotFound => HttpError::Connection("the host's name is not known".into()),
        E::ConnectionFailed => HttpError::Connection("no address of the host answered".into()),
        E::BadUri(_) | E::Http(_) => HttpError::Other("the URL cannot be read".into()),
        E::Protocol(p) => HttpError::Other(format!("the server's answer is not HTTP: {p}")),
        E::LargeResponseHeader(..) => {
            HttpError::Other("the server's answer has headers too large".into())
        }
        other => HttpError::Other(format!(
            "the request failed: {}",
            one_line(&other.to_string())
        )),
    }
}

/// The words of an error of the connection: rustls's own, a timeout, or the system's.
fn io_error(e: &std::io::Error, within: Duration) -> HttpError {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return HttpError::Tls(tls_words(tls));
    }
    match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => HttpError::Timeout(within),
        _ => HttpError::Connection(one_line(&e.to_string())),
    }
}

/// Why rustls refused the server, in plain words.
fn tls_words(e: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "the server's certificate was issued by an unknown authority, \
                                 none of the system's trusted roots (SSL_CERT_FILE may name \
                                 another bundle)"
                .to_string(),
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the server's certificate is for another name".to_string()
            }
            C::Expired | C::ExpiredContext { .. } => {
                "the server's certificate has expired".to_string()
            }
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet".to_string()
            }
            other => format!("the server's certificate is refused: {other}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "the server does not answer in TLS (is this an http:// port?)".to_string()
        }
        other => one_line(&other.to_string()),
    }
}

/// `text` on one line, its control characters shown escaped.
fn one_line(text: &str) -> String {
    crate::text::printable(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A server on a port of its own that answers each connection with the next of `statuses`
    /// (or, for 0, reads and never answers), and the requests it read.
    fn server(statuses: Vec<u16>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/metrics/job/x", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut held = Vec::new();
            for status in statuses {
                let (mut conn, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).unwrap_or(0);
                seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                if status == 0 {
                    held.push(conn);
                    continue;
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
            seen
        });
        (url, handle)
    }

    #[test]
    fn a_5xx_answer_is_tried_again_within_the_deadline() {
        let (url, server) = server(vec![503, 200]);
        let answer = post(&url, &[("x-a", "b")], b"m 1\n", Duration::from_secs(5)).unwrap();
        assert_eq!(answer.status, 200);
        let seen = server.join().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(
            seen[1].starts_with("POST /metrics/job/x HTTP/1.1"),
            "{}",
            seen[1]
        );
        assert!(seen[1].contains("x-a: b"), "{}", seen[1]);
    }

    #[test]
    fn a_4xx_answer_is_not_tried_again_and_is_said_in_one_line() {
        let (url, server) = server(vec![400]);
        let e = post(&url, &[], b"", Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.to_string(), "the server answered 400: no");
        assert_eq!(server.join().unwrap().len(), 1);
    }

    #[test]
    fn a_server_that_never_answers_costs_no_more_than_the_deadline() {
        let (url, _server) = server(vec![0, 0, 0]);
        let started = Instant::now();
        let e = post(&url, &[], b"", Duration::from_millis(300)).unwrap_err();
        let took = started.elapsed();
        assert_eq!(e, HttpError::Timeout(Duration::from_millis(300)));
        assert!(took >= Duration::from_millis(290), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn a_url_is_shown_without_its_path_query_or_credentials() {
        assert_eq!(
            shown("https://hc-ping.com/0b2f7a10-8f1c-4f3e-b0a5-5d7a1a0e4b11"),
            "https://hc-ping.com/…"
        );
        assert_eq!(
            shown("https://cronitor.link/p/KEY/nightly?state=run"),
            "https://cronitor.link/…"
        );
        assert_eq!(shown("http://127.0.0.1:9091"), "http://127.0.0.1:9091/…");
        assert_eq!(shown("http://u:secret@h/x"), "http://h/…");
        assert_eq!(shown("nonsense"), "…");
        assert_eq!(shown("http://a\u{1b}b/x"), "…");
    }

    #[test]
    fn only_http_and_https_urls_with_a_host_and_no_credentials_are_taken() {
        assert_eq!(check_url("https://hc-ping.com/x"), Ok(()));
        assert_eq!(check_url("HTTP://127.0.0.1:9091"), Ok(()));
        assert_eq!(check_url("ftp://x"), Err(BadUrl::Scheme("ftp".into())));
        assert_eq!(check_url("notaurl"), Err(BadUrl::NotAUrl));
        assert_eq!(check_url("http://"), Err(BadUrl::NotAUrl));
        assert_eq!(check_url("https://u:p@h/x"), Err(BadUrl::Credentials));
        assert_eq!(check_url("http://a b/"), Err(BadUrl::NotAUrl));
    }
}
