//! The one reading of a Redis URL (docs/redis.md), for every option that takes one: `--quota`,
//! `--dead-letter`, `--history`, `--replay`, `--forget`, `--prune` and `--stats`. Read once,
//! when the option is parsed, into a [`RedisAddress`] that the stores connect to as it is.
//!
//! - `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME` and `rediss://…` (TLS); the port is 6379
//!   for both, as redis-cli and redis-rs read them. `X@` without a ':' is refused: redis-cli
//!   reads X as a password and redis-rs as a user, and a user's name may be shown.
//! - `redis+unix:///PATH/TO/SOCKET/NAME[?db=DB]`: the last part of the path is the name, the
//!   rest the socket. It takes no user or password: the environment gives them.
//! - `redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]]…/MASTER[/DB]/NAME` and
//!   `rediss+sentinel://…`: read whole (the sentinels' port is 26379), but not connected to yet:
//!   [`RedisAddress::usable`] refuses it.
//!
//! A URL takes what follows its name after a ':' (a quota's `:cap=5`, a replay's `:lease=30s`):
//! [`parse`] hands that back for the option to read. Nothing is %-decoded: a password is
//! what is written, any character but none. The password is never shown: not by `Display`, not
//! by `Debug`, not in an error.

use std::fmt;
use std::path::{Path, PathBuf};

/// The port of `redis://HOST/NAME` and `rediss://HOST/NAME`.
pub const DEFAULT_PORT: u16 = 6379;

/// The port of a sentinel named without one.
pub const SENTINEL_PORT: u16 = 26379;

/// The forms of a Redis URL, as errors name them.
pub const FORMS: &str = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME (or rediss://, \
                         redis+unix:///PATH/SOCKET/NAME?db=DB)";

/// The schemes of a Redis URL.
const SCHEMES: [&str; 5] = [
    "redis",
    "rediss",
    "redis+unix",
    "redis+sentinel",
    "rediss+sentinel",
];

/// Where the server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A host name or an IP address (without the brackets of an IPv6 one), and a port.
    Tcp { host: String, port: u16 },
    /// A Unix socket.
    Unix(PathBuf),
    /// The sentinels to ask for MASTER's address.
    Sentinel {
        sentinels: Vec<(String, u16)>,
        master: String,
    },
}

/// A store's place on Redis, from a URL of one of the forms above. It holds the password: its
/// `Display` and `Debug` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisAddress {
    scheme: &'static str,
    endpoint: Endpoint,
    user: Option<String>,
    /// As written: no %-escapes.
    password: Option<String>,
    db: Option<u32>,
    name: String,
    /// What names the server as written: `HOST[:PORT]`, the sentinels, or the socket's path.
    written: String,
}

impl RedisAddress {
    /// Where the server is.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The host name or IP address (without the brackets of an IPv6 one); a socket's path;
    /// the first sentinel.
    pub fn host(&self) -> &str {
        match &self.endpoint {
            Endpoint::Tcp { host, .. } => host,
            Endpoint::Unix(path) => path.to_str().unwrap_or_default(),
            Endpoint::Sentinel { sentinels, .. } => &sentinels[0].0,
        }
    }

    /// The port ([`DEFAULT_PORT`] when the URL names none); 0 for a socket.
    pub fn port(&self) -> u16 {
        match &self.endpoint {
            Endpoint::Tcp { port, .. } => *port,
            Endpoint::Unix(_) => 0,
            Endpoint::Sentinel { sentinels, .. } => sentinels[0].1,
        }
    }

    /// The socket's path, for `redis+unix://`.
    pub fn socket(&self) -> Option<&Path> {
        match &self.endpoint {
            Endpoint::Unix(path) => Some(path),
            _ => None,
        }
    }

    /// Whether the connection is TLS (`rediss://`).
    pub fn tls(&self) -> bool {
        self.scheme.starts_with("rediss")
    }

    /// The ACL user the URL names.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The password the URL gives, as written, to be sent with AUTH.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The database to SELECT, when the URL names one.
    pub fn db(&self) -> Option<u32> {
        self.db
    }

    /// The master that the sentinels are asked for, for `redis+sentinel://`.
    pub fn master(&self) -> Option<&str> {
        match &self.endpoint {
            Endpoint::Sentinel { master, .. } => Some(master),
            _ => None,
        }
    }

    /// The store's name: the quota's, the stream's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL with its password replaced by `***`, if it has one.
    pub fn hidden(&self) -> String {
        match (&self.password, &self.user) {
            (Some(_), Some(user)) => self.shown(&format!("{user}:***@")),
            (Some(_), None) => self.shown(":***@"),
            _ => self.to_string(),
        }
    }

    /// The URL with `userinfo` before the server.
    fn shown(&self, userinfo: &str) -> String {
        let (scheme, written, name) = (self.scheme, &self.written, &self.name);
        match (&self.endpoint, self.db) {
            (Endpoint::Unix(_), None) => format!("{scheme}://{written}/{name}"),
            (Endpoint::Unix(_), Some(db)) => format!("{scheme}://{written}/{name}?db={db}"),
            (Endpoint::Sentinel { master, .. }, db) => {
                let db = db.map(|db| format!("/{db}")).unwrap_or_default();
                format!("{scheme}://{userinfo}{written}/{master}{db}/{name}")
            }
            (Endpoint::Tcp { .. }, db) => {
                let db = db.map(|db| format!("/{db}")).unwrap_or_default();
                format!("{scheme}://{userinfo}{written}{db}/{name}")
            }
        }
    }
}

impl fmt::Display for RedisAddress {
    /// The URL as written but with no password, not even `***`: `redis://HOST[:PORT]/NAME`,
    /// `redis://USER@HOST/NAME` with a user (a form that [`parse`] refuses, so that no one
    /// takes it for a URL to give).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self
            .user
            .as_ref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        f.write_str(&self.shown(&user))
    }
}

impl fmt::Debug for RedisAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisAddress")
            .field("endpoint", &self.endpoint)
            .field("tls", &self.tls())
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Whether `value` is meant as a Redis URL: it starts with one of the schemes and `://`.
pub fn is_redis_url(value: &str) -> bool {
    value
        .split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.contains(&scheme))
}

/// Reads a Redis URL: the address, and what follows its name after a ':', for the option to
/// read. `Err` is one line that never quotes the password.
pub fn parse(url: &str) -> Result<(RedisAddress, Option<&str>), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("expected {FORMS}"));
    };
    let Some(scheme) = SCHEMES.into_iter().find(|s| *s == scheme) else {
        return Err(format!("unknown store '{scheme}://': expected {FORMS}"));
    };
    match scheme {
        "redis+unix" => parse_unix(rest),
        "redis" | "rediss" => parse_tcp(scheme, rest),
        _ => parse_sentinel(scheme, rest),
    }
}

/// The user and password before the last '@', and what follows it. The password may hold any
/// character but the host and the name cannot hold '@', so the last '@' ends the password; the
/// first ':' ends the user.
fn userinfo(rest: &str) -> Result<(Option<&str>, Option<&str>, &str), String> {
    let Some((info, after)) = rest.rsplit_once('@') else {
        return Ok((None, None, rest));
    };
    let (user, password) = match info.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (info, None),
    };
    if password == Some("") {
        return Err(format!("the password is empty: expected {FORMS}"));
    }
    if let Some(c) = user
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == '/')
    {
        return Err(format!("the user '{user}' contains {c:?}"));
    }
    match (user, password) {
        ("", None) => Err(format!("nothing before '@': expected {FORMS}")),
        // As redis-cli reads it, `X@` alone is a password; taken for a user, as redis-rs takes
        // it, a password written without its ':' would be shown as a user's name.
        (_, None) => Err(
            "the part before '@' must be USER:PASSWORD or :PASSWORD (a user alone goes in \
             RETRY_REDIS_USER)"
                .to_string(),
        ),
        ("", password) => Ok((None, password, after)),
        (user, password) => Ok((Some(user), password, after)),
    }
}

/// What follows `SERVER/`: `[DB/]NAME[:REST]`, the database taken when `db` allows it.
fn db_and_name(path: &str, db: bool) -> Result<(Option<u32>, &str, Option<&str>), String> {
    let (path, rest) = match path.split_once(':') {
        Some((path, rest)) => (path, Some(rest)),
        None => (path, None),
    };
    let (db, name) = match path.split_once('/') {
        Some((n, name)) if db => (Some(parse_db(n)?), name),
        _ => (None, path),
    };
    check_name(name)?;
    Ok((db, name, rest))
}

fn parse_db(n: &str) -> Result<u32, String> {
    match n.parse::<u32>() {
        Ok(db) if n.bytes().all(|b| b.is_ascii_digit()) => Ok(db),
        _ => Err(format!(
            "the database '{n}' is not a number: expected /DB/NAME, as /2/jobs"
        )),
    }
}

fn parse_tcp<'a>(
    scheme: &'static str,
    rest: &'a str,
) -> Result<(RedisAddress, Option<&'a str>), String> {
    let (user, password, after) = userinfo(rest)?;
    let Some((written, path)) = after.split_once('/') else {
        return Err(format!("no NAME after the host: expected {FORMS}"));
    };
    let (host, port) = parse_host_port(written, DEFAULT_PORT)?;
    let (db, name, rest) = db_and_name(path, true)?;
    let address = RedisAddress {
        scheme,
        endpoint: Endpoint::Tcp {
            host: host.to_string(),
            port,
        },
        user: user.map(str::to_string),
        password: password.map(str::to_string),
        db,
        name: name.to_string(),
        written: written.to_string(),
    };
    Ok((address, rest))
}

fn parse_sentinel<'a>(
    scheme: &'static str,
    rest: &'a str,
) -> Result<(RedisAddress, Option<&'a str>), String> {
    const FORM: &str =
        "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]]…/MASTER[/DB]/NAME";
    let (user, password, after) = userinfo(rest)?;
    let Some((written, path)) = after.split_once('/') else {
        return Err(format!("no MASTER after the sentinels: expected {FORM}"));
    };
    let sentinels = written
        .split(',')
        .map(|s| parse_host_port(s, SENTINEL_PORT).map(|(h, p)| (h.to_string(), p)))
        .collect::<Result<Vec<_>, _>>()?;
    let Some((master, path)) = path.split_once('/') else {
        return Err(format!("no NAME after the master: expected {FORM}"));
    };
    check_name(master).map_err(|e| format!("the master: {e}"))?;
    let (db, name, rest) = db_and_name(path, true)?;
    let address = RedisAddress {
        scheme,
        endpoint: Endpoint::Sentinel {
            sentinels,
            master: master.to_string(),
        },
        user: user.map(str::to_string),
        password: password.map(str::to_string),
        db,
        name: name.to_string(),
        written: written.to_string(),
    };
    Ok((address, rest))
}

/// Reads `/PATH/SOCKET/NAME[?db=DB][:REST]`: the query may follow the name or the rest.
fn parse_unix(rest: &str) -> Result<(RedisAddress, Option<&str>), String> {
    const FORM: &str = "redis+unix:///PATH/TO/SOCKET/NAME, with ?db=DB after NAME";
    if !rest.starts_with('/') {
        return Err(match rest.contains('@') {
            true => "a socket's URL takes no user or password: give them in RETRY_REDIS_USER \
                     and RETRY_REDIS_PASSWORD"
                .to_string(),
            false => format!("the socket's path must be absolute: expected {FORM}"),
        });
    }
    // The name and what follows it: from the last '/' before the first ':'.
    let head_end = rest.find(':').unwrap_or(rest.len());
    let cut = rest[..head_end].rfind('/').unwrap_or(0);
    let (path, tail) = (&rest[..cut], &rest[cut + 1..]);
    if path.is_empty() {
        return Err(format!("no NAME after the socket's path: expected {FORM}"));
    }
    let (name_part, query, after) = match tail.split_once('?') {
        Some((name, query)) => match query.split_once(':') {
            Some((query, after)) => (name, Some(query), Some(after)),
            None => match name.split_once(':') {
                Some((name, after)) => (name, Some(query), Some(after)),
                None => (name, Some(query), None),
            },
        },
        None => match tail.split_once(':') {
            Some((name, after)) => (name, None, Some(after)),
            None => (tail, None, None),
        },
    };
    let db = match query {
        None => None,
        Some(q) => match q.strip_prefix("db=") {
            Some(n) => Some(parse_db(n)?),
            None => return Err(format!("unknown '?{q}': expected {FORM}")),
        },
    };
    check_name(name_part)?;
    let address = RedisAddress {
        scheme: "redis+unix",
        endpoint: Endpoint::Unix(PathBuf::from(path)),
        user: None,
        password: None,
        db,
        name: name_part.to_string(),
        written: path.to_string(),
    };
    Ok((address, after))
}

/// Reads `HOST[:PORT]`, where HOST may be a bracketed IPv6 address: the host without its
/// brackets, and the port (`default` when none is written).
fn parse_host_port(s: &str, default: u16) -> Result<(&str, u16), String> {
    // The host as written (brackets and all), the host, and the port.
    let (written, host, port) = if let Some(inner) = s.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return Err(format!("the host '{s}' lacks its closing ']'"));
        };
        match after {
            "" => (s, addr, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (&s[..s.len() - after.len()], addr, Some(port)),
                None => return Err(format!("unexpected '{after}' after the host '[{addr}]'")),
            },
        }
    } else {
        match s.rsplit_once(':') {
            Some((host, port)) => (host, host, Some(port)),
            None => (s, s, None),
        }
    };
    if host.is_empty() {
        return Err(format!("no host: expected {FORMS}"));
    }
    if let Some(c) = written
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == '/' || *c == ',')
    {
        return Err(format!("the host '{written}' contains {c:?}"));
    }
    let port = match port {
        None => default,
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("the port '{port}' is not a number from 1 to 65535")),
        },
    };
    Ok((host, port))
}

/// Checks a store's name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `.`. A local
/// quota's name becomes a file name, so it can neither leave the store's directory nor hide
/// in it.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > 64 {
        return Err(format!("the name '{name}' is longer than 64 characters"));
    }
    if name.starts_with('.') {
        return Err(format!("the name '{name}' starts with '.'"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "the name '{name}' contains '{c}' (letters, digits, '.', '_' and '-' only)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(url: &str) -> RedisAddress {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}")).0
    }

    fn error(url: &str) -> String {
        match parse(url).map(|_| ()) {
            Err(e) => e,
            Ok(()) => panic!("{url} was taken"),
        }
    }

    #[test]
    fn a_tcp_url_keeps_user_password_host_port_database_and_name() {
        let a = address("redis://fleet:s3cret-pass@cache.internal:6380/2/jobs");
        assert_eq!(
            a.endpoint(),
            &Endpoint::Tcp {
                host: "cache.internal".into(),
                port: 6380
            }
        );
        assert_eq!(a.user(), Some("fleet"));
        assert_eq!(a.password(), Some("s3cret-pass"));
        assert_eq!((a.db(), a.name(), a.tls()), (Some(2), "jobs", false));
        let a = address("redis://h/jobs");
        assert_eq!(
            (a.host(), a.port(), a.user(), a.password()),
            ("h", 6379, None, None)
        );
        assert_eq!(a.db(), None);
        let a = address("redis://:pw-only@[::1]:7000/0/q");
        assert_eq!((a.host(), a.port(), a.user()), ("::1", 7000, None));
        assert_eq!((a.password(), a.db()), (Some("pw-only"), Some(0)));
        // The last '@' ends the password, the first ':' the user.
        let a = address("redis://u:p@ss:w/rd@h/q");
        assert_eq!((a.user(), a.password()), (Some("u"), Some("p@ss:w/rd")));
    }

    #[test]
    fn rediss_is_the_same_url_with_tls() {
        let a = address("rediss://fleet:pw-secret@cache:6380/jobs");
        assert!(a.tls());
        assert_eq!(
            (a.host(), a.port(), a.user()),
            ("cache", 6380, Some("fleet"))
        );
        assert_eq!(address("rediss://h/q").port(), DEFAULT_PORT);
    }

    #[test]
    fn what_follows_the_name_is_handed_back() {
        let (a, rest) = parse("redis://:p@h/1/q:ratio=0.1,floor=1/s").unwrap();
        assert_eq!(
            (a.db(), a.name(), rest),
            (Some(1), "q", Some("ratio=0.1,floor=1/s"))
        );
        let (_, rest) = parse("redis://h/q").unwrap();
        assert_eq!(rest, None);
    }

    #[test]
    fn a_socket_url_is_the_path_then_the_name_then_the_database() {
        let a = address("redis+unix:///run/redis/redis.sock/jobs");
        assert_eq!(a.socket(), Some(Path::new("/run/redis/redis.sock")));
        assert_eq!((a.name(), a.db(), a.tls()), ("jobs", None, false));
        let (a, rest) = parse("redis+unix:///run/redis.sock/jobs?db=3").unwrap();
        assert_eq!((a.db(), rest), (Some(3), None));
        for url in [
            "redis+unix:///run/redis.sock/q?db=3:cap=5",
            "redis+unix:///run/redis.sock/q:cap=5?db=3",
        ] {
            let (a, rest) = parse(url).unwrap();
            assert_eq!(
                (a.name(), a.db(), rest),
                ("q", Some(3), Some("cap=5")),
                "{url}"
            );
        }
        assert_eq!(a.to_string(), "redis+unix:///run/redis.sock/jobs?db=3");
        assert_eq!((a.host(), a.port()), ("/run/redis.sock", 0));
    }

    #[test]
    fn a_sentinel_url_is_read_whole() {
        let url = "redis+sentinel://fleet:pw-secret@s1,s2:5000,[::1]/mymaster/4/jobs";
        let a = address(url);
        assert_eq!(
            a.endpoint(),
            &Endpoint::Sentinel {
                sentinels: vec![
                    ("s1".into(), SENTINEL_PORT),
                    ("s2".into(), 5000),
                    ("::1".into(), SENTINEL_PORT)
                ],
                master: "mymaster".into()
            }
        );
        assert_eq!((a.user(), a.password()), (Some("fleet"), Some("pw-secret")));
        assert_eq!((a.db(), a.name(), a.tls()), (Some(4), "jobs", false));
        assert_eq!(
            a.to_string(),
            "redis+sentinel://fleet@s1,s2:5000,[::1]/mymaster/4/jobs"
        );
        assert!(address("rediss+sentinel://s/m/q").tls());
    }

    #[test]
    fn display_and_debug_never_show_the_password() {
        for url in [
            "redis://fleet:pw-secret@h:1/2/q",
            "redis://:pw-secret@h/q",
            "rediss://fleet:pw-secret@h/q",
            "redis+sentinel://fleet:pw-secret@s/m/q",
        ] {
            let a = address(url);
            for shown in [a.to_string(), format!("{a:?}"), a.hidden()] {
                assert!(!shown.contains("pw-secret"), "{url}: {shown}");
            }
        }
        let a = address("redis://fleet:pw-secret@h:1/2/q");
        assert_eq!(a.to_string(), "redis://fleet@h:1/2/q");
        assert_eq!(a.hidden(), "redis://fleet:***@h:1/2/q");
        assert_eq!(
            address("redis://:pw-secret@h/q").hidden(),
            "redis://:***@h/q"
        );
        assert_eq!(address("redis://h/q").hidden(), "redis://h/q");
    }

    #[test]
    fn bad_urls_are_named_in_one_line_without_the_password() {
        for (url, says) in [
            ("redis://h", "no NAME after the host"),
            ("redis:///q", "no host"),
            ("redis://h:0/q", "port '0'"),
            ("redis://h:x/q", "port 'x'"),
            ("redis://[::1/q", "closing ']'"),
            ("redis://h/x/q", "the database 'x' is not a number"),
            ("redis://h/-1/q", "the database '-1'"),
            ("redis://h/1/q/r", "contains '/'"),
            ("redis://h/", "the name is empty"),
            ("redis://:@h/q", "the password is empty"),
            ("redis://u:@h/q", "the password is empty"),
            ("redis://@h/q", "nothing before '@'"),
            ("redis://pw-secret@h/q", "USER:PASSWORD or :PASSWORD"),
            ("redis://a b:pw-secret@h/q", "the user 'a b'"),
            ("memcached://h/q", "unknown store 'memcached://'"),
            ("redis+unix://run/redis.sock/q", "must be absolute"),
            (
                "redis+unix://u:pw-secret@/run/r.sock/q",
                "RETRY_REDIS_PASSWORD",
            ),
            ("redis+unix:///q", "no NAME after the socket's path"),
            ("redis+unix:///r.sock/q?database=1", "unknown '?database=1'"),
            ("redis+unix:///r.sock/q?db=x", "the database 'x'"),
            ("redis+sentinel://s", "no MASTER"),
            ("redis+sentinel://s/m", "no NAME after the master"),
            ("redis+sentinel://s,/m/q", "no host"),
            ("redis+sentinel://s/m m/q", "the master"),
        ] {
            let e = error(url);
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains('\n') && !e.contains("pw-secret"), "{url}: {e}");
        }
    }

    #[test]
    fn only_the_schemes_of_redis_are_redis_urls() {
        for url in [
            "redis://h/q",
            "rediss://h/q",
            "redis+unix:///s/q",
            "rediss+sentinel://s/m/q",
        ] {
            assert!(is_redis_url(url), "{url}");
        }
        for value in ["q", "./redis://h/q", "http://h/q", "redis:/h/q"] {
            assert!(!is_redis_url(value), "{value}");
        }
    }
}
