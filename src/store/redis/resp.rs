//! The client side of Redis's protocol (RESP2) that the fleet quota store speaks: one
//! connection to one node, each request sent and its reply read whole before one deadline, and
//! the replies parsed without trusting their lengths. A general client bounds each read rather
//! than an exchange and reads a reply of any size; this one fails as soon as a reply would pass
//! [`MAX_REPLY`] bytes, so that a hostile server costs a run neither its time nor its memory.

use std::fmt;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use crate::store::redis::conn::Conn;

/// The longest one quota decision may take with Redis, connecting included.
pub const DEADLINE: Duration = Duration::from_millis(250);

/// The most bytes a reply may take. The script's answer takes under 50, an error a line.
pub const MAX_REPLY: usize = 1024;

/// The most cluster redirects (`MOVED`, `ASK`) one update follows.
pub const MAX_REDIRECTS: usize = 3;

/// What went wrong in an exchange with a server.
#[derive(Debug)]
pub enum ExchangeError {
    /// The connection failed or was closed.
    Io(io::Error),
    /// The deadline passed: after `waited`, which was what was left of the run's budget when
    /// `budget` is set.
    TimedOut { waited: Duration, budget: bool },
    /// The server answered with an error.
    Server(String),
    /// The server refused AUTH, with this code word (`None`: one of no known code). The text
    /// after the code word is not kept: it may quote the command's arguments, the password
    /// among them, cut where the server cuts them.
    Auth(Option<&'static str>),
    /// The reply was longer than [`MAX_REPLY`] bytes.
    TooLarge,
    /// The reply was not one of Redis's protocol.
    Protocol(&'static str),
    /// More than [`MAX_REDIRECTS`] cluster redirects.
    Redirects,
    /// A plain connection met a port that speaks TLS: the first bytes back were a TLS record
    /// (`tls_bytes`), or the connection was closed or reset before any reply.
    NotPlain { tls_bytes: bool },
    /// TLS failed: its line, which names the host and the reason.
    Tls(String),
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExchangeError::Io(e) => write!(f, "{}", one_line(&e.to_string())),
            ExchangeError::TimedOut { waited, budget } => {
                write!(f, "no answer within {} ms", waited.as_millis())?;
                if *budget {
                    write!(f, ", what was left of the run's budget")?;
                }
                Ok(())
            }
            ExchangeError::Server(e) => write!(f, "{}", one_line(e)),
            ExchangeError::Auth(Some(code)) => write!(f, "the server refused AUTH: {code}"),
            ExchangeError::Auth(None) => {
                write!(f, "the server refused AUTH with an error of no known code")
            }
            ExchangeError::TooLarge => write!(
                f,
                "its reply is longer than {MAX_REPLY} bytes, which no quota reply is"
            ),
            ExchangeError::Protocol(what) => write!(f, "its reply is not Redis's protocol: {what}"),
            ExchangeError::Redirects => write!(
                f,
                "the cluster redirected the update more than {MAX_REDIRECTS} times"
            ),
            ExchangeError::Tls(why) => write!(f, "{}", one_line(why)),
            ExchangeError::NotPlain { tls_bytes: true } => {
                write!(f, "this port speaks TLS: use rediss://")
            }
            ExchangeError::NotPlain { tls_bytes: false } => write!(
                f,
                "the server closed the connection before any reply: if this port speaks TLS, use rediss://"
            ),
        }
    }
}

impl ExchangeError {
    /// The failure of the exchange that sent the password: an error the server sent is kept
    /// by its code word only.
    pub fn of_auth(self) -> ExchangeError {
        match self {
            ExchangeError::Server(message) => ExchangeError::Auth(code_word(&message)),
            other => other,
        }
    }

    /// The code word of the error the server sent, if it sent one that has a known code.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ExchangeError::Server(message) => code_word(message),
            ExchangeError::Auth(code) => *code,
            _ => None,
        }
    }
}

/// The texts of `ERR` replies that say which error it is and quote nothing sent.
const ERR_PHRASES: [&str; 6] = [
    "ERR unknown command",
    "ERR wrong number of arguments",
    "ERR invalid password",
    "ERR invalid username-password pair",
    "ERR Client sent AUTH, but no password is set",
    "ERR AUTH <password> called without any password configured",
];

/// The code words that start Redis's error replies.
const CODES: [&str; 18] = [
    "ERR",
    "WRONGPASS",
    "NOAUTH",
    "NOPERM",
    "WRONGTYPE",
    "BUSY",
    "LOADING",
    "MASTERDOWN",
    "READONLY",
    "MISCONF",
    "NOSCRIPT",
    "OOM",
    "NOPROTO",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "CROSSSLOT",
    "MOVED",
    "ASK",
];

/// The code word of an error reply (`WRONGPASS`, and for `ERR` the phrase that says which
/// error, `ERR unknown command`), as this program spells it, never as the server sent it;
/// `None` for a reply that starts with none of them.
pub fn code_word(message: &str) -> Option<&'static str> {
    let first = message.split_ascii_whitespace().next().unwrap_or("");
    ERR_PHRASES
        .into_iter()
        .find(|phrase| message.starts_with(phrase))
        .or_else(|| CODES.into_iter().find(|code| *code == first))
}

impl std::error::Error for ExchangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExchangeError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// `s` on one line, at most 200 characters: it comes from a server and goes into a log line.
pub fn one_line(s: &str) -> String {
    let mut line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if s.chars().nth(200).is_some() {
        line.push_str("...");
    }
    line
}

/// The moment an exchange must be over by, and how long that gave it.
pub struct Deadline {
    pub at: Instant,
    pub span: Duration,
    /// Whether the end of the run's budget set it, rather than [`DEADLINE`].
    pub budget: bool,
}

impl Deadline {
    /// [`DEADLINE`] from now, or the end of the run's budget when that comes first.
    pub fn new(until: Option<Instant>) -> Deadline {
        let now = Instant::now();
        let usual = now + DEADLINE;
        let (at, budget) = match until {
            Some(end) if end < usual => (end, true),
            _ => (usual, false),
        };
        Deadline {
            at,
            span: at.saturating_duration_since(now),
            budget,
        }
    }

    /// `span` from now.
    pub fn within(span: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + span,
            span,
            budget: false,
        }
    }

    /// The time left, or the failure of a deadline passed.
    pub fn left(&self) -> Result<Duration, ExchangeError> {
        self.at
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| self.timed_out())
    }

    pub fn timed_out(&self) -> ExchangeError {
        ExchangeError::TimedOut {
            waited: self.span,
            budget: self.budget,
        }
    }
}

/// A host and a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr {
    /// A host name or an IP address, without the brackets of an IPv6 one.
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Addr {
    /// `HOST:PORT` (`[HOST]:PORT` for IPv6); a socket's path alone (its port is 0).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.port == 0 {
            write!(f, "{}", self.host)
        } else if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A connection to one node, and what it has sent past the last reply read.
pub struct Node {
    pub addr: Addr,
    stream: Conn,
    /// Whether any reply has come: a connection closed before one, or bytes of TLS where the
    /// first reply should be, are a plain client at a port that speaks TLS.
    answered: bool,
    buf: Vec<u8>,
    /// The most bytes one reply may take: [`MAX_REPLY`] unless the caller reads lists.
    limit: usize,
}

impl Node {
    /// A node just connected to, nothing read from it yet.
    pub fn new(addr: Addr, stream: impl Into<Conn>) -> Node {
        Node {
            addr,
            stream: stream.into(),
            answered: false,
            buf: Vec::new(),
            limit: MAX_REPLY,
        }
    }

    /// Lets one reply take up to `limit` bytes: for the lists of records a replay reads, which
    /// a quota's answers never need. A server that sends more is still a failure.
    pub fn allow_replies_of(&mut self, limit: usize) {
        self.limit = limit.max(MAX_REPLY);
    }

    /// Sends one command and reads its reply, both before the deadline. An error reply is
    /// [`ExchangeError::Server`].
    pub fn request(&mut self, args: &[&[u8]], deadline: &Deadline) -> Result<Reply, ExchangeError> {
        self.send(&encode(args), deadline)?;
        match self.receive(deadline)? {
            Reply::Error(e) => Err(ExchangeError::Server(e)),
            value => Ok(value),
        }
    }

    /// Sends several commands at once and reads their replies, in order, all before the
    /// deadline: one round trip for them all. An error reply is [`ExchangeError::Server`].
    pub fn requests(
        &mut self,
        commands: &[Vec<&[u8]>],
        deadline: &Deadline,
    ) -> Result<Vec<Reply>, ExchangeError> {
        let mut all = Vec::new();
        for args in commands {
            all.extend_from_slice(&encode(args));
        }
        self.send(&all, deadline)?;
        let mut replies = Vec::with_capacity(commands.len());
        let mut failed = None;
        for _ in commands {
            // Every reply is read, an error one too, so that the connection stays in step.
            match self.receive(deadline)? {
                Reply::Error(e) => failed = failed.or(Some(ExchangeError::Server(e))),
                value => replies.push(value),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(replies),
        }
    }

    fn send(&mut self, mut request: &[u8], deadline: &Deadline) -> Result<(), ExchangeError> {
        while !request.is_empty() {
            let left = deadline.left()?;
            self.stream
                .set_write_timeout(Some(left))
                .map_err(ExchangeError::Io)?;
            match self.stream.write(request) {
                Ok(0) => return Err(ExchangeError::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => request = &request[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(deadline.timed_out()),
                Err(e) => return Err(ExchangeError::Io(e)),
            }
        }
        Ok(())
    }

    /// Reads one whole reply, of at most [`MAX_REPLY`] bytes.
    fn receive(&mut self, deadline: &Deadline) -> Result<Reply, ExchangeError> {
        // A quota's replies are a few bytes; a list is read in larger pieces, each parse of
        // what has come so far costing its length.
        let mut chunk = vec![0u8; if self.limit > MAX_REPLY { 1 << 16 } else { 512 }];
        // Whether the reply has all come is found by a scan that goes on from where it stopped,
        // so that a reply of megabytes, coming in many reads, is looked through once; it is
        // parsed once it has all come.
        let mut scan = Scan::default();
        loop {
            // A TLS record starts with its type: 0x15 an alert, 0x16 a handshake. No reply of
            // Redis's protocol starts so.
            if !self.answered && matches!(self.buf.first(), Some(0x15 | 0x16)) {
                return Err(ExchangeError::NotPlain { tls_bytes: true });
            }
            if scan.advance(&self.buf, self.limit)? {
                let (value, len) = parse_within(&self.buf, self.limit)?
                    .ok_or(ExchangeError::Protocol("a reply that ends too soon"))?;
                self.buf.drain(..len);
                self.answered = true;
                return Ok(value);
            }
            if self.buf.len() >= self.limit {
                return Err(ExchangeError::TooLarge);
            }
            let left = deadline.left()?;
            self.stream
                .set_read_timeout(Some(left))
                .map_err(ExchangeError::Io)?;
            let room = chunk.len().min(self.limit - self.buf.len());
            let read = self.stream.read(&mut chunk[..room]);
            if !self.answered && self.buf.is_empty() && closed(&read) {
                return Err(ExchangeError::NotPlain { tls_bytes: false });
            }
            match read {
                Ok(0) => {
                    return Err(ExchangeError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )));
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(deadline.timed_out()),
                Err(e) => return Err(ExchangeError::Io(e)),
            }
        }
    }
}

/// Whether a read found the connection closed or reset.
fn closed(read: &io::Result<usize>) -> bool {
    match read {
        Ok(n) => *n == 0,
        Err(e) => matches!(
            e.kind(),
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
        ),
    }
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// How far a reply has been looked through: where the next element starts, and how many items
/// each array open around it still has to come.
#[derive(Default)]
struct Scan {
    at: usize,
    open: Vec<i64>,
    complete: bool,
}

impl Scan {
    /// Looks through what came since the last look; true once the whole reply is in `buf`. The
    /// lengths are checked as [`parse_within`] checks them, before their bytes come.
    fn advance(&mut self, buf: &[u8], limit: usize) -> Result<bool, ExchangeError> {
        while !self.complete {
            let Some(&kind) = buf.get(self.at) else {
                return Ok(false);
            };
            let Some((line, next)) = line(buf, self.at + 1) else {
                return Ok(false);
            };
            match kind {
                b'+' | b'-' => self.element_ends(next),
                b':' => {
                    number(line)?;
                    self.element_ends(next);
                }
                b'$' => match number(line)? {
                    -1 => self.element_ends(next),
                    n if n < 0 => return Err(ExchangeError::Protocol("a negative length")),
                    n if n as u64 > limit as u64 => return Err(ExchangeError::TooLarge),
                    n => {
                        let end = next + n as usize + 2;
                        if buf.len() < end {
                            return Ok(false);
                        }
                        self.element_ends(end);
                    }
                },
                b'*' => match number(line)? {
                    -1 | 0 => self.element_ends(next),
                    n if n < 0 => return Err(ExchangeError::Protocol("a negative length")),
                    n if n as u64 > (limit / 3) as u64 => return Err(ExchangeError::TooLarge),
                    _ if self.open.len() >= MAX_DEPTH => {
                        return Err(ExchangeError::Protocol("arrays nested too deep"));
                    }
                    n => {
                        self.at = next;
                        self.open.push(n);
                    }
                },
                _ => return Err(ExchangeError::Protocol("an unknown type of reply")),
            }
        }
        Ok(true)
    }

    /// An element ended just before `next`: it is one item less for the array around it, which
    /// may end with it.
    fn element_ends(&mut self, next: usize) {
        self.at = next;
        loop {
            match self.open.last_mut() {
                None => {
                    self.complete = true;
                    return;
                }
                Some(left) => {
                    *left -= 1;
                    if *left > 0 {
                        return;
                    }
                    self.open.pop();
                }
            }
        }
    }
}

/// A command as Redis reads it: an array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A reply of Redis's protocol (RESP2).
#[derive(Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl fmt::Display for Reply {
    /// The reply as a log line shows it, when it is not what was expected.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Simple(s) | Reply::Error(s) => write!(f, "{s}"),
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Bulk(Some(b)) => write!(f, "{}", String::from_utf8_lossy(b)),
            Reply::Bulk(None) | Reply::Array(None) => write!(f, "nil"),
            Reply::Array(Some(items)) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// Arrays within arrays deeper than this are no reply to the commands sent.
const MAX_DEPTH: usize = 4;

/// The reply at the start of `buf` and its length; `None` while it is incomplete. A length
/// that would take it past [`MAX_REPLY`] fails at once, before its bytes come.
#[cfg(test)]
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ExchangeError> {
    parse_within(buf, MAX_REPLY)
}

/// [`parse`] for replies of at most `limit` bytes.
pub fn parse_within(buf: &[u8], limit: usize) -> Result<Option<(Reply, usize)>, ExchangeError> {
    parse_at(buf, 0, 0, limit)
}

fn parse_at(
    buf: &[u8],
    at: usize,
    depth: usize,
    limit: usize,
) -> Result<Option<(Reply, usize)>, ExchangeError> {
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some((line, mut next)) = line(buf, at + 1) else {
        return Ok(None);
    };
    let text = || String::from_utf8_lossy(line).into_owned();
    let value = match kind {
        b'+' => Reply::Simple(text()),
        b'-' => Reply::Error(text()),
        b':' => Reply::Int(number(line)?),
        b'$' => match number(line)? {
            -1 => Reply::Bulk(None),
            n if n < 0 => return Err(ExchangeError::Protocol("a negative length")),
            n if n as u64 > limit as u64 => return Err(ExchangeError::TooLarge),
            n => match bulk(buf, next, n as usize)? {
                Some((bytes, after)) => {
                    next = after;
                    Reply::Bulk(Some(bytes))
                }
                None => return Ok(None),
            },
        },
        b'*' => match number(line)? {
            -1 => Reply::Array(None),
            n if n < 0 => return Err(ExchangeError::Protocol("a negative length")),
            // Each item takes 3 bytes at least.
            n if n as u64 > (limit / 3) as u64 => return Err(ExchangeError::TooLarge),
            _ if depth >= MAX_DEPTH => {
                return Err(ExchangeError::Protocol("arrays nested too deep"));
            }
            n => {
                let mut items = Vec::new();
                for _ in 0..n {
                    let Some((item, after)) = parse_at(buf, next, depth + 1, limit)? else {
                        return Ok(None);
                    };
                    items.push(item);
                    next = after;
                }
                Reply::Array(Some(items))
            }
        },
        _ => return Err(ExchangeError::Protocol("an unknown type of reply")),
    };
    Ok(Some((value, next)))
}

/// The `len` bytes of a bulk string from `at`, and where its CRLF ends; `None` while they
/// are incomplete.
fn bulk(buf: &[u8], at: usize, len: usize) -> Result<Option<(Vec<u8>, usize)>, ExchangeError> {
    let end = at + len;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(ExchangeError::Protocol("a string longer than its length"));
    }
    Ok(Some((buf[at..end].to_vec(), end + 2)))
}

/// The line from `from` to the next CRLF, and where the next one starts.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(from..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], from + end + 2))
}

fn number(line: &[u8]) -> Result<i64, ExchangeError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ExchangeError::Protocol(
            "a length or number that is not one",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_server_is_shown_on_one_bounded_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
        assert_eq!(one_line(&"x".repeat(300)).len(), 203);
    }

    #[test]
    fn an_error_is_known_by_its_code_word_and_nothing_it_quotes() {
        let echoed = "ERR unknown command 'AUTH', with args beginning with: 'pa55-Word' ";
        assert_eq!(code_word(echoed), Some("ERR unknown command"));
        assert_eq!(
            code_word("WRONGPASS invalid username-password pair or user is disabled."),
            Some("WRONGPASS")
        );
        assert_eq!(code_word("NOAUTH Authentication required."), Some("NOAUTH"));
        assert_eq!(code_word("ERR something 'pa55-Word'"), Some("ERR"));
        assert_eq!(code_word("pa55-Word is wrong"), None);
        assert_eq!(code_word(""), None);
        let auth = ExchangeError::Server(echoed.into()).of_auth();
        assert_eq!(
            auth.to_string(),
            "the server refused AUTH: ERR unknown command"
        );
        assert_eq!(auth.code(), Some("ERR unknown command"));
        let unknown = ExchangeError::Server("pa55-Word".into()).of_auth();
        assert!(!unknown.to_string().contains("pa55"), "{unknown}");
    }

    #[test]
    fn a_reply_is_found_complete_however_it_comes_in_pieces() {
        let reply = b"*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$2\r\nid\r\n$0\r\n\r\n:7\r\n".to_vec();
        for cut in 0..reply.len() {
            let mut scan = Scan::default();
            assert!(
                !scan.advance(&reply[..cut], 1024).unwrap(),
                "complete at {cut}"
            );
            assert!(
                scan.advance(&reply, 1024).unwrap(),
                "incomplete after {cut}"
            );
        }
        let mut scan = Scan::default();
        assert!(matches!(
            scan.advance(b"$2000\r\n", 1024),
            Err(ExchangeError::TooLarge)
        ));
        let mut scan = Scan::default();
        assert!(scan.advance(b"*0\r\n", 1024).unwrap());
    }

    #[test]
    fn a_command_is_an_array_of_bulk_strings() {
        assert_eq!(
            encode(&[b"AUTH", b"p w"]),
            b"*2\r\n$4\r\nAUTH\r\n$3\r\np w\r\n".to_vec()
        );
    }

    fn parsed(bytes: &[u8]) -> Option<(Reply, usize)> {
        parse(bytes).unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(bytes)))
    }

    #[test]
    fn replies_are_read_whole_or_not_yet() {
        let reply = b"*2\r\n:1\r\n$3\r\n9.4\r\n";
        assert_eq!(
            parsed(reply),
            Some((
                Reply::Array(Some(vec![
                    Reply::Int(1),
                    Reply::Bulk(Some(b"9.4".to_vec()))
                ])),
                reply.len()
            ))
        );
        for cut in 0..reply.len() {
            assert_eq!(parsed(&reply[..cut]), None, "{cut} bytes");
        }
        assert_eq!(
            parsed(b"+OK\r\n+PONG"),
            Some((Reply::Simple("OK".into()), 5))
        );
        assert_eq!(
            parsed(b"-NOSCRIPT No matching script\r\n"),
            Some((Reply::Error("NOSCRIPT No matching script".into()), 30))
        );
        assert_eq!(parsed(b"$-1\r\n"), Some((Reply::Bulk(None), 5)));
        assert_eq!(parsed(b"*-1\r\n"), Some((Reply::Array(None), 5)));
        assert_eq!(
            parsed(b"$0\r\n\r\n"),
            Some((Reply::Bulk(Some(Vec::new())), 6))
        );
    }

    #[test]
    fn a_reply_longer_than_a_quota_reply_fails_before_it_comes() {
        for header in [&b"$2000000000\r\n"[..], b"$1025\r\n", b"*1000\r\n"] {
            assert!(
                matches!(parse(header), Err(ExchangeError::TooLarge)),
                "{header:?}"
            );
        }
        assert!(parse(b"$1024\r\n").unwrap().is_none());
        for bad in [&b"?x\r\n"[..], b":x\r\n", b"$-2\r\n", b"$1\r\nab\r\n"] {
            assert!(
                matches!(parse(bad), Err(ExchangeError::Protocol(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            parse(b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"),
            Err(ExchangeError::Protocol(_))
        ));
    }

    #[test]
    fn a_deadline_is_the_usual_one_or_the_end_of_the_budget() {
        let usual = Deadline::new(None);
        assert_eq!(usual.span, DEADLINE);
        assert!(!usual.budget);
        let later = Deadline::new(Some(Instant::now() + Duration::from_secs(5)));
        assert_eq!(later.span, DEADLINE);
        let soon = Deadline::new(Some(Instant::now() + Duration::from_millis(40)));
        assert!(soon.budget && soon.span <= Duration::from_millis(40));
        let spent = Deadline::new(Some(Instant::now()));
        assert!(spent.left().is_err());
        assert!(
            spent
                .timed_out()
                .to_string()
                .ends_with("what was left of the run's budget")
        );
    }
}

#[cfg(test)]
mod plain_at_tls {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// The first reply of a node whose server end wrote `answer` and closed (or reset) it.
    fn first_reply(answer: &[u8]) -> Result<Reply, ExchangeError> {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let answer = answer.to_vec();
        // The server end reads the request, answers and closes.
        std::thread::spawn(move || {
            let _ = theirs.read(&mut [0u8; 64]);
            let _ = theirs.write_all(&answer);
        });
        let addr = Addr {
            host: "h".into(),
            port: 1,
        };
        Node::new(addr, ours).request(&[b"PING"], &Deadline::within(Duration::from_secs(5)))
    }

    #[test]
    fn tls_bytes_or_a_close_before_the_first_reply_name_rediss() {
        for (answer, tls_bytes) in [(&b"\x15\x03\x03\x00\x02\x02\x32"[..], true), (b"", false)] {
            let e = first_reply(answer).unwrap_err();
            assert!(
                matches!(e, ExchangeError::NotPlain { tls_bytes: t } if t == tls_bytes),
                "{e:?}"
            );
            assert!(e.to_string().contains("use rediss://"), "{e}");
        }
        assert!(matches!(first_reply(b"+PONG\r\n"), Ok(Reply::Simple(p)) if p == "PONG"));
    }
}
