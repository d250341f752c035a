//! The shared retry quota (docs/herd.md#shared-retry-quota) as arithmetic: the `--quota` value, and
//! a token bucket that first tries fill and retries drain. Time is passed in as milliseconds since
//! the Unix epoch, because the bucket is shared by runs in different processes (or on different
//! machines) and only the wall clock means the same thing to all of them; nothing here reads it.
//!
//! A bucket is stored as one fixed-size record, so that a store can replace it with a single
//! write and a run killed at any moment leaves either the old record or the new one.

use std::fmt;
use std::str::FromStr;

/// The bucket's parameters, as `ratio=0.2,floor=1/s,cap=10` sets them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuotaParams {
    /// Tokens each first try deposits.
    pub ratio: f64,
    /// Tokens that accrue per second whatever the runs do.
    pub floor: f64,
    /// The most tokens the bucket holds; a new bucket starts full.
    pub cap: f64,
}

impl QuotaParams {
    /// The largest cap accepted: it keeps every count of tokens within the record's width.
    pub const MAX_CAP: f64 = 1_000_000.0;
}

impl Default for QuotaParams {
    fn default() -> QuotaParams {
        QuotaParams {
            ratio: 0.2,
            floor: 1.0,
            cap: 10.0,
        }
    }
}

impl fmt::Display for QuotaParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ratio={},floor={}/s,cap={}",
            short(self.ratio),
            short(self.floor),
            short(self.cap)
        )
    }
}

/// A number as a log line shows it: as Rust writes it (`0.2`), unless that is long, when the
/// exponent form is shorter (`1e-300`, not three hundred digits).
pub fn short(x: f64) -> String {
    let plain = x.to_string();
    if plain.len() <= 12 {
        return plain;
    }
    let exponent = format!("{x:e}");
    if exponent.len() < plain.len() {
        exponent
    } else {
        plain
    }
}

/// Where the bucket lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaStore {
    /// A file on this machine, shared by the runs of one user.
    Local,
    /// A Redis server shared by a fleet.
    Redis(RedisAddress),
}

pub use crate::redis_url::{DEFAULT_PORT as DEFAULT_REDIS_PORT, RedisAddress, check_name};

/// The value of `--quota`: `NAME[:PARAMS]` or `redis://[:PASSWORD@]HOST[:PORT]/NAME[:PARAMS]`,
/// where PARAMS is any of `ratio=R`, `floor=F/s` (or `floor=F`) and `cap=C`, comma-separated, in
/// any order.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaSpec {
    pub name: String,
    pub store: QuotaStore,
    pub params: QuotaParams,
}

impl FromStr for QuotaSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<QuotaSpec, String> {
        let s = s.trim();
        if s.contains("://") {
            return parse_redis(s);
        }
        let (name, params) = split_params(s);
        check_name(name)?;
        Ok(QuotaSpec {
            name: name.to_string(),
            store: QuotaStore::Local,
            params: parse_params(params)?,
        })
    }
}

impl QuotaSpec {
    /// Where the quota lives: the name, or the Redis URL with its password replaced by `***`.
    fn place(&self) -> String {
        match &self.store {
            QuotaStore::Local => self.name.clone(),
            QuotaStore::Redis(address) => address.hidden(),
        }
    }

    /// Where the quota lives with no password, not even `***`: the name, or
    /// `redis://HOST[:PORT]/NAME`.
    pub fn address(&self) -> String {
        match &self.store {
            QuotaStore::Local => self.name.clone(),
            QuotaStore::Redis(address) => address.to_string(),
        }
    }

    /// Whether the Redis address holds a password, which every user of the machine can read
    /// in the process list.
    pub fn has_password(&self) -> bool {
        match &self.store {
            QuotaStore::Local => false,
            QuotaStore::Redis(address) => address.password().is_some(),
        }
    }

    /// Where the quota lives as a log line names it: a local name in quotes, or the URL.
    pub fn shown(&self) -> String {
        match self.store {
            QuotaStore::Local => format!("'{}'", self.place()),
            QuotaStore::Redis(_) => self.place(),
        }
    }
}

impl fmt::Display for QuotaSpec {
    /// The quota as the log shows it: the value given, with a Redis password replaced by `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.place(), self.params)
    }
}

/// A retry the quota had no token for: what the log says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaRefusal {
    /// The quota as the log shows it (`QuotaSpec`'s `Display`, without the parameters).
    pub quota: String,
    /// Tokens left in the bucket, fewer than one; `None` when other runs had the store for
    /// longer than a run waits, so that no token could be taken.
    pub tokens: Option<f64>,
    pub params: QuotaParams,
}

// Its numbers are finite (the parameters are checked when parsed, and a bucket never holds a
// NaN), so equality is reflexive.
impl Eq for QuotaRefusal {}

impl fmt::Display for QuotaRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.params;
        match self.tokens {
            Some(tokens) => write!(
                f,
                "the retry quota {} has {tokens:.2} tokens and a retry takes 1 (each first try adds {}, and {}/s come back, up to {})",
                self.quota,
                short(p.ratio),
                short(p.floor),
                short(p.cap)
            ),
            None => write!(
                f,
                "the retry quota {} stayed locked by other runs for longer than a run waits, so no token could be taken",
                self.quota
            ),
        }
    }
}

/// Splits `NAME:PARAMS`. A name never holds a ':', so the first one starts the parameters.
fn split_params(s: &str) -> (&str, Option<&str>) {
    match s.split_once(':') {
        Some((name, params)) => (name, Some(params)),
        None => (s, None),
    }
}

/// Reads a `--quota` URL: the address, and the parameters after its name.
fn parse_redis(url: &str) -> Result<QuotaSpec, String> {
    let (address, params) = crate::redis_url::parse(url)?;
    Ok(QuotaSpec {
        name: address.name().to_string(),
        store: QuotaStore::Redis(address),
        params: parse_params(params)?,
    })
}

/// Parses `ratio=R,floor=F/s,cap=C` (any subset, any order); `None` gives the defaults.
fn parse_params(s: Option<&str>) -> Result<QuotaParams, String> {
    let mut params = QuotaParams::default();
    let Some(s) = s else {
        return Ok(params);
    };
    if s.trim().is_empty() {
        return Err("no parameters after ':' (ratio=R,floor=F/s,cap=C)".into());
    }
    // Each value as written, for the errors: `1e308` rather than the 309 digits of its value.
    let mut written: [Option<&str>; 3] = [None; 3];
    for item in s.split(',') {
        let item = item.trim();
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!(
                "the parameter '{item}' is not KEY=VALUE (ratio=R,floor=F/s,cap=C)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let (slot, field) = match key {
            "ratio" => (0, &mut params.ratio),
            "floor" => (1, &mut params.floor),
            "cap" => (2, &mut params.cap),
            _ => {
                return Err(format!("unknown parameter '{key}' (ratio, floor or cap)"));
            }
        };
        if written[slot].replace(value).is_some() {
            return Err(format!("the parameter '{key}' is given twice"));
        }
        *field = parse_param(key, value)?;
    }
    validate(params, written)
}

/// The number of one parameter: `floor` may say its unit (`0.5/s`).
fn parse_param(key: &str, value: &str) -> Result<f64, String> {
    let number = if key == "floor" {
        value.strip_suffix("/s").unwrap_or(value)
    } else {
        value
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok(n),
        _ => Err(format!(
            "{key}={}: expected a number{}",
            clipped(value),
            if key == "floor" {
                " of tokens per second (0.5/s)"
            } else {
                ""
            }
        )),
    }
}

/// Checks the parameters; an error shows each value as it was `written` (or, for a default,
/// in [`short`] form).
fn validate(p: QuotaParams, written: [Option<&str>; 3]) -> Result<QuotaParams, String> {
    let shown = |slot: usize, value: f64| written[slot].map_or_else(|| short(value), clipped);
    if !(p.cap >= 1.0 && p.cap <= QuotaParams::MAX_CAP) {
        return Err(format!(
            "cap={}: expected a number from 1 to {}",
            shown(2, p.cap),
            QuotaParams::MAX_CAP
        ));
    }
    if p.floor < 0.0 {
        let floor = shown(1, p.floor);
        let unit = if floor.ends_with("/s") { "" } else { "/s" };
        return Err(format!(
            "floor={floor}{unit}: expected a rate of at least 0"
        ));
    }
    if !(p.ratio >= 0.0 && p.ratio <= p.cap) {
        return Err(format!(
            "ratio={}: expected a number from 0 to the cap ({})",
            shown(0, p.ratio),
            shown(2, p.cap)
        ));
    }
    Ok(p)
}

/// A value as written, cut to 24 characters: enough to recognise it in a one-line error.
fn clipped(value: &str) -> String {
    match value.char_indices().nth(24) {
        Some((end, _)) => format!("{}...", &value[..end]),
        None => value.to_string(),
    }
}

/// `value` (an option's value, as an error would show it) with the user and password of a
/// `SCHEME://USER:PASSWORD@HOST` address replaced by `***`; `None` when it holds none. The
/// last '@' ends them, as [`QuotaSpec`] reads the address.
pub fn hide_password(value: &str) -> Option<String> {
    let (scheme, rest) = value.split_once("://")?;
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        // Without an '@', a ':' that no port follows (`redis://:secret/x`, the '@' forgotten)
        // may start a password all the same.
        let authority = rest.split('/').next().unwrap_or_default();
        let (_, port) = authority.rsplit_once(':')?;
        if port.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return Some(format!("{scheme}://***{}", &rest[authority.len()..]));
    };
    let hidden = if userinfo.starts_with(':') {
        ":***"
    } else {
        "***"
    };
    Some(format!("{scheme}://{hidden}@{host}"))
}

/// A token bucket at one moment: `tokens` as they were at `at_ms` (ms since the Unix epoch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    pub at_ms: u64,
}

/// A retry needs one token; this slack absorbs the rounding of sums such as 5 × 0.2.
const ONE_TOKEN: f64 = 1.0 - 1e-9;

impl Bucket {
    /// A new bucket: full, so that the first runs after a quiet time may retry at once.
    pub fn full(params: &QuotaParams, now_ms: u64) -> Bucket {
        Bucket {
            tokens: params.cap,
            at_ms: now_ms,
        }
    }

    /// Adds what the floor rate accrued since the bucket was last seen, up to the cap. When the
    /// clock went backwards nothing accrues, and the bucket counts from the new time on: a
    /// record stamped far in the future (a clock once set wrong) must not stop the floor for
    /// as long as it takes to get there. The cap bounds what a clock that goes back and forth
    /// could add.
    pub fn refill(&mut self, params: &QuotaParams, now_ms: u64) {
        let elapsed_ms = now_ms.saturating_sub(self.at_ms);
        let accrued = params.floor * (elapsed_ms as f64 / 1000.0);
        self.tokens = (self.tokens.max(0.0) + accrued).min(params.cap);
        self.at_ms = now_ms;
    }

    /// A first try: refill, then deposit `ratio`, up to the cap.
    pub fn deposit(&mut self, params: &QuotaParams, now_ms: u64) {
        self.refill(params, now_ms);
        self.tokens = (self.tokens + params.ratio).min(params.cap);
    }

    /// A retry: refill, then take one token if there is one. False means the retry may not run.
    pub fn take(&mut self, params: &QuotaParams, now_ms: u64) -> bool {
        self.refill(params, now_ms);
        if self.tokens >= ONE_TOKEN {
            self.tokens = (self.tokens - 1.0).max(0.0);
            true
        } else {
            false
        }
    }

    /// The bucket as its record: `retry-quota v1 tokens=9.400000 at=1764480000123`, padded with
    /// spaces to [`RECORD_LEN`] bytes, the last one a newline. Tokens are kept to a millionth.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let tokens = if self.tokens.is_finite() {
            self.tokens.clamp(0.0, QuotaParams::MAX_CAP)
        } else {
            0.0
        };
        let text = format!("{RECORD_PREFIX}{tokens:.6} at={}", self.at_ms);
        let mut record = [b' '; RECORD_LEN];
        // At most 22 + 14 + 4 + 20 = 60 bytes: the tokens are clamped and `at` is a u64.
        let len = text.len().min(RECORD_LEN - 1);
        record[..len].copy_from_slice(&text.as_bytes()[..len]);
        record[RECORD_LEN - 1] = b'\n';
        record
    }

    /// Reads a record that [`Bucket::encode`] wrote. Anything else, a record cut short or one
    /// too long included, is `None`: the store then resets the bucket.
    pub fn decode(bytes: &[u8]) -> Option<Bucket> {
        if bytes.len() != RECORD_LEN || bytes[RECORD_LEN - 1] != b'\n' {
            return None;
        }
        let text = std::str::from_utf8(&bytes[..RECORD_LEN - 1]).ok()?;
        let fields = text.trim_end_matches(' ').strip_prefix(RECORD_PREFIX)?;
        let (tokens, at) = fields.split_once(" at=")?;
        let is_decimal = |s: &str, point: bool| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (point && b == b'.'))
                && s.bytes().filter(|&b| b == b'.').count() <= 1
                && !s.starts_with('.')
                && !s.ends_with('.')
        };
        if !is_decimal(tokens, true) || !is_decimal(at, false) {
            return None;
        }
        let tokens: f64 = tokens.parse().ok()?;
        if !tokens.is_finite() || tokens > QuotaParams::MAX_CAP {
            return None;
        }
        Some(Bucket {
            tokens,
            at_ms: at.parse().ok()?,
        })
    }
}

/// The size of a stored bucket, in bytes.
pub const RECORD_LEN: usize = 64;

const RECORD_PREFIX: &str = "retry-quota v1 tokens=";

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> QuotaSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn error(s: &str) -> String {
        match s.parse::<QuotaSpec>() {
            Ok(q) => panic!("{s} parsed as {q:?}"),
            Err(e) => e,
        }
    }

    fn params(ratio: f64, floor: f64, cap: f64) -> QuotaParams {
        QuotaParams { ratio, floor, cap }
    }

    #[test]
    fn a_bare_name_is_a_local_quota_with_the_default_parameters() {
        assert_eq!(
            spec("deploys"),
            QuotaSpec {
                name: "deploys".into(),
                store: QuotaStore::Local,
                params: params(0.2, 1.0, 10.0),
            }
        );
    }

    #[test]
    fn parameters_follow_the_name_in_any_order_and_any_subset() {
        assert_eq!(
            spec("q:ratio=0.1,floor=0.5/s,cap=20").params,
            params(0.1, 0.5, 20.0)
        );
        assert_eq!(spec("q:cap=3,ratio=0").params, params(0.0, 1.0, 3.0));
        assert_eq!(spec("q:floor=2").params, params(0.2, 2.0, 10.0));
        assert_eq!(spec("q:floor=0/s").params, params(0.2, 0.0, 10.0));
    }

    #[test]
    fn names_are_letters_digits_dots_underscores_and_dashes() {
        assert_eq!(spec("db-1.prod_eu").name, "db-1.prod_eu");
        assert_eq!(spec(&"a".repeat(64)).name.len(), 64);
        assert!(error("").contains("empty"));
        assert!(error(&"a".repeat(65)).contains("longer than 64"));
        assert!(error(".hidden").contains("starts with '.'"));
        assert!(error("a/b").contains("contains '/'"));
        assert!(error("..").contains("starts with '.'"));
        assert!(error("é").contains("contains 'é'"));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(error("q:").contains("no parameters"));
        assert!(error("q:ratio").contains("'ratio' is not KEY=VALUE"));
        assert!(error("q:burst=3").contains("unknown parameter 'burst'"));
        assert!(error("q:cap=3,cap=4").contains("'cap' is given twice"));
        assert!(error("q:ratio=x").contains("ratio=x: expected a number"));
        assert!(error("q:floor=1/m").contains("tokens per second"));
        assert!(error("q:floor=-1").contains("at least 0"));
        assert!(error("q:floor=inf").contains("floor=inf"));
        assert!(error("q:cap=0.5").contains("cap=0.5"));
        assert!(error("q:cap=NaN").contains("cap=NaN"));
        assert!(error("q:cap=1e7").contains("from 1 to 1000000"));
        assert!(error("q:ratio=11").contains("ratio=11: expected a number from 0 to the cap (10)"));
        assert!(error("q:ratio=-0.1").contains("ratio=-0.1"));
        assert!(error("q:ratio=0.1,").contains("'' is not KEY=VALUE"));
        assert_eq!(spec("q:ratio=20,cap=20").params, params(20.0, 1.0, 20.0));
    }

    #[test]
    fn a_value_too_large_is_shown_as_written() {
        let e = error("q:ratio=1e308");
        assert_eq!(e, "ratio=1e308: expected a number from 0 to the cap (10)");
        assert_eq!(
            error("q:cap=2e300,ratio=1"),
            "cap=2e300: expected a number from 1 to 1000000"
        );
        assert_eq!(
            error("q:floor=-1e300/s"),
            "floor=-1e300/s: expected a rate of at least 0"
        );
        assert_eq!(
            error("q:floor=-1e300"),
            "floor=-1e300/s: expected a rate of at least 0"
        );
        let long = format!("q:ratio=1{}", "0".repeat(400));
        assert!(error(&long).len() < 80, "{}", error(&long));
        let long = format!("q:ratio=x{}", "0".repeat(400));
        assert!(error(&long).len() < 80, "{}", error(&long));
        // A default in the message is short too, and so is the display of tiny numbers.
        assert_eq!(
            spec("q:ratio=1e-300,floor=1e300").params.to_string(),
            "ratio=1e-300,floor=1e300/s,cap=10"
        );
        assert_eq!(short(0.2), "0.2");
        assert_eq!(short(1_000_000.0), "1000000");
        assert_eq!(short(0.123_456_789_012_345), "0.123456789012345");
    }

    #[test]
    fn a_password_is_hidden_from_a_value_shown_in_an_error() {
        assert_eq!(
            hide_password("redis://:s3cret@h:1/q:cap=0").as_deref(),
            Some("redis://:***@h:1/q:cap=0")
        );
        assert_eq!(
            hide_password("redis://user:s3c@ret@h/q").as_deref(),
            Some("redis://***@h/q")
        );
        assert_eq!(
            hide_password("rediss://:s3cret@h/q").as_deref(),
            Some("rediss://:***@h/q")
        );
        assert_eq!(hide_password("redis://h/q"), None);
        assert_eq!(hide_password("redis://h:6379/q"), None);
        assert_eq!(
            hide_password("redis://:s3cret/q").as_deref(),
            Some("redis://***/q")
        );
        assert_eq!(hide_password("q:cap=0"), None);
    }

    #[test]
    fn the_address_of_a_quota_holds_no_password() {
        assert_eq!(
            spec("redis://:s3c@ret@h:1/q:cap=3").address(),
            "redis://h:1/q"
        );
        assert_eq!(spec("redis://h/q").address(), "redis://h/q");
        assert_eq!(spec("q").address(), "q");
    }

    #[test]
    fn a_password_in_the_address_is_known_to_be_there() {
        assert!(spec("redis://:s3cret@h/q").has_password());
        assert!(!spec("redis://h/q").has_password());
        assert!(!spec("q").has_password());
    }

    #[test]
    fn errors_are_one_line() {
        for bad in ["", "q:", "q:x=1", "redis://h", "ftp://h/q", "q:ratio=11"] {
            assert!(!error(bad).contains('\n'), "{bad}");
        }
    }

    /// The Redis address of a quota: host, port, password and name.
    fn redis(s: &str) -> (String, u16, Option<String>, String) {
        match spec(s).store {
            QuotaStore::Redis(a) => (
                a.host().to_string(),
                a.port(),
                a.password().map(str::to_string),
                a.name().to_string(),
            ),
            QuotaStore::Local => panic!("{s} is a local quota"),
        }
    }

    fn parts(
        host: &str,
        port: u16,
        password: Option<&str>,
        name: &str,
    ) -> (String, u16, Option<String>, String) {
        (host.into(), port, password.map(str::to_string), name.into())
    }

    #[test]
    fn a_redis_url_keeps_host_port_password_and_name_apart_from_the_parameters() {
        let s = "redis://:s3cret@cache.internal:6380/deploys:ratio=0.1,cap=20";
        assert_eq!(
            redis(s),
            parts("cache.internal", 6380, Some("s3cret"), "deploys")
        );
        assert_eq!(spec(s).name, "deploys");
        assert_eq!(spec(s).params, params(0.1, 1.0, 20.0));

        assert_eq!(
            redis("redis://127.0.0.1/q"),
            parts("127.0.0.1", 6379, None, "q")
        );
        assert_eq!(spec("redis://127.0.0.1/q").params, QuotaParams::default());

        let s = "redis://[::1]:6379/q:floor=0.5/s";
        assert_eq!(redis(s), parts("::1", 6379, None, "q"));
        assert_eq!(spec(s).params.floor, 0.5);
        assert_eq!(
            redis("redis://[fe80::1]/q"),
            parts("fe80::1", 6379, None, "q")
        );
        assert_eq!(redis("redis://[::1]:7000/q"), parts("::1", 7000, None, "q"));
    }

    #[test]
    fn a_redis_password_may_hold_colons_equals_signs_slashes_and_at_signs() {
        let s = "redis://:a:b=c/d@e@h:1/q";
        assert_eq!(redis(s), parts("h", 1, Some("a:b=c/d@e"), "q"));
        assert_eq!(spec(s).params, QuotaParams::default());
        assert_eq!(
            redis("redis://:p@ss:w@rd@10.0.0.7:6380/deploys"),
            parts("10.0.0.7", 6380, Some("p@ss:w@rd"), "deploys")
        );
    }

    #[test]
    fn a_redis_address_is_shown_as_written_and_its_debug_hides_the_password() {
        for written in ["h:+6379", "h:06379", "::1:6379", "[::1]", "Cache.Internal"] {
            let s = format!("redis://:s3cret@{written}/q:cap=3");
            assert_eq!(spec(&s).address(), format!("redis://{written}/q"));
            assert_eq!(spec(&s).shown(), format!("redis://:***@{written}/q"));
            assert!(!format!("{:?}", spec(&s)).contains("s3cret"), "{s}");
        }
    }

    #[test]
    fn bad_redis_urls_are_named() {
        assert!(error("redis://host").contains("no NAME"));
        assert!(error("redis:///q").contains("no host"));
        assert!(error("redis://[]/q").contains("no host"));
        assert!(error("redis://h:0/q").contains("port '0'"));
        assert!(error("redis://h:99999/q").contains("port '99999'"));
        assert!(error("redis://h:x/q").contains("port 'x'"));
        assert!(error("redis://h:/q").contains("port ''"));
        assert!(error("redis://:@h/q").contains("password is empty"));
        assert!(error("redis://[::1/q").contains("closing ']'"));
        assert!(error("redis://[::1]x/q").contains("unexpected 'x' after the host '[::1]'"));
        assert!(error("redis://[a b]/q").contains("the host '[a b]' contains ' '"));
        assert!(error("redis://h/").contains("empty"));
        assert!(error("redis://h/a/b").contains("the database 'a' is not a number"));
        assert!(error("redis://h/1/a/b").contains("contains '/'"));
        assert!(error("redis://h/q:cap=0").contains("cap=0"));
        for secret in ["redis://u:secret@h/x y", "redis://:secret@h:0/q"] {
            assert!(!error(secret).contains("secret"), "{secret}");
        }
    }

    #[test]
    fn the_display_hides_the_redis_password() {
        assert_eq!(
            spec("redis://:s3cret@h:6380/q:cap=20").to_string(),
            "redis://:***@h:6380/q (ratio=0.2,floor=1/s,cap=20)"
        );
        assert_eq!(
            spec("redis://h/q").to_string(),
            "redis://h/q (ratio=0.2,floor=1/s,cap=10)"
        );
        assert_eq!(
            spec("q:floor=0.5").to_string(),
            "q (ratio=0.2,floor=0.5/s,cap=10)"
        );
    }

    const T0: u64 = 1_764_480_000_000;

    #[test]
    fn a_new_bucket_is_full() {
        assert_eq!(
            Bucket::full(&QuotaParams::default(), T0),
            Bucket {
                tokens: 10.0,
                at_ms: T0
            }
        );
    }

    #[test]
    fn tokens_accrue_at_the_floor_rate_up_to_the_cap() {
        let p = params(0.2, 0.5, 10.0);
        let mut b = Bucket {
            tokens: 2.0,
            at_ms: T0,
        };
        b.refill(&p, T0 + 3_000);
        assert_eq!(b.tokens, 3.5);
        assert_eq!(b.at_ms, T0 + 3_000);
        b.refill(&p, T0 + 3_100);
        assert_eq!(b.tokens, 3.55);
        b.refill(&p, T0 + 1_000_000);
        assert_eq!(b.tokens, 10.0);
    }

    #[test]
    fn a_clock_gone_backwards_refills_nothing_and_counts_from_the_new_time() {
        let p = params(0.2, 1.0, 10.0);
        let mut b = Bucket {
            tokens: 2.0,
            at_ms: T0,
        };
        b.refill(&p, T0 - 60_000);
        assert_eq!(b.tokens, 2.0);
        assert_eq!(b.at_ms, T0 - 60_000);
        b.refill(&p, T0 - 59_000);
        assert_eq!(b.tokens, 3.0);
    }

    #[test]
    fn a_bucket_from_a_quota_with_a_larger_cap_is_cut_to_this_cap() {
        let mut b = Bucket {
            tokens: 15.0,
            at_ms: T0,
        };
        b.refill(&params(0.2, 1.0, 10.0), T0);
        assert_eq!(b.tokens, 10.0);
    }

    #[test]
    fn a_first_try_deposits_the_ratio_up_to_the_cap() {
        let p = params(0.25, 0.0, 10.0);
        let mut b = Bucket {
            tokens: 1.5,
            at_ms: T0,
        };
        b.deposit(&p, T0 + 10_000);
        assert_eq!(b.tokens, 1.75);
        assert_eq!(b.at_ms, T0 + 10_000);
        let mut full = Bucket::full(&p, T0);
        full.deposit(&p, T0);
        assert_eq!(full.tokens, 10.0);
    }

    #[test]
    fn a_retry_takes_one_token_or_is_refused() {
        let p = params(0.2, 0.0, 10.0);
        let mut b = Bucket {
            tokens: 1.5,
            at_ms: T0,
        };
        assert!(b.take(&p, T0));
        assert_eq!(b.tokens, 0.5);
        assert!(!b.take(&p, T0));
        assert_eq!(b.tokens, 0.5);
    }

    #[test]
    fn five_deposits_of_a_fifth_pay_for_one_retry() {
        let p = params(0.2, 0.0, 10.0);
        let mut b = Bucket {
            tokens: 0.0,
            at_ms: T0,
        };
        for _ in 0..4 {
            b.deposit(&p, T0);
        }
        assert!(!b.take(&p, T0));
        b.deposit(&p, T0);
        assert!(b.take(&p, T0));
        assert!(!b.take(&p, T0));
    }

    #[test]
    fn the_floor_rate_pays_for_a_retry_after_its_time() {
        let p = params(0.0, 0.5, 10.0);
        let mut b = Bucket {
            tokens: 0.0,
            at_ms: T0,
        };
        assert!(!b.take(&p, T0 + 1_999));
        assert!(b.take(&p, T0 + 3_999));
        assert!(!b.take(&p, T0 + 3_999));
    }

    /// N runs of one first try and up to four retries each, interleaved, against one bucket
    /// that starts full: the retries granted never exceed `N × ratio + cap + floor × elapsed`.
    fn retries_granted(p: &QuotaParams, runs: u64, step_ms: u64) -> (f64, f64) {
        let mut b = Bucket::full(p, T0);
        let mut granted = 0u64;
        let mut now = T0;
        // Each round starts the next run and lets every earlier run that may still retry try.
        let mut retries_left = vec![0u32; runs as usize];
        for round in 0..runs + 4 {
            now += step_ms;
            if round < runs {
                b.deposit(p, now);
                retries_left[round as usize] = 4;
            }
            for left in retries_left.iter_mut().filter(|l| **l > 0) {
                now += step_ms / 4;
                if b.take(p, now) {
                    granted += 1;
                    *left -= 1;
                } else {
                    *left = 0;
                }
            }
        }
        let elapsed_s = (now - T0) as f64 / 1000.0;
        let bound = runs as f64 * p.ratio + p.cap + p.floor * elapsed_s;
        (granted as f64, bound)
    }

    #[test]
    fn the_retries_of_many_runs_stay_within_the_bound() {
        for (p, runs, step_ms) in [
            (params(0.2, 1.0, 10.0), 40, 5),
            (params(0.2, 1.0, 10.0), 500, 1),
            (params(0.1, 0.5, 20.0), 200, 20),
            (params(0.2, 0.0, 10.0), 40, 0),
            (params(0.0, 0.0, 1.0), 100, 10),
            (params(1.0, 2.0, 3.0), 100, 100),
        ] {
            let (granted, bound) = retries_granted(&p, runs, step_ms);
            assert!(
                granted <= bound + 1e-6,
                "{p}: {runs} runs every {step_ms} ms were granted {granted} > {bound}"
            );
        }
    }

    #[test]
    fn forty_runs_failing_at_once_share_what_the_bucket_holds() {
        // Deposits into a full bucket overflow: 40 first tries leave it at its cap of 10.
        let p = params(0.2, 1.0, 10.0);
        let mut b = Bucket::full(&p, T0);
        (0..40).for_each(|_| b.deposit(&p, T0));
        assert_eq!((0..160).filter(|_| b.take(&p, T0)).count(), 10);
        // Into an empty one, they deposit 40 × 0.2 = 8 retries.
        let mut b = Bucket {
            tokens: 0.0,
            at_ms: T0,
        };
        (0..40).for_each(|_| b.deposit(&p, T0));
        assert_eq!((0..160).filter(|_| b.take(&p, T0)).count(), 8);
    }

    #[test]
    fn a_record_is_64_ascii_bytes_ending_in_a_newline() {
        let record = Bucket {
            tokens: 9.4,
            at_ms: 1_764_480_000_123,
        }
        .encode();
        let text = std::str::from_utf8(&record).unwrap();
        assert_eq!(text.len(), 64);
        assert_eq!(
            text,
            format!(
                "{:<63}\n",
                "retry-quota v1 tokens=9.400000 at=1764480000123"
            )
        );
    }

    #[test]
    fn a_record_reads_back_as_the_bucket_written() {
        for b in [
            Bucket {
                tokens: 9.4,
                at_ms: 1_764_480_000_123,
            },
            Bucket {
                tokens: 0.0,
                at_ms: 0,
            },
            Bucket {
                tokens: QuotaParams::MAX_CAP,
                at_ms: u64::MAX,
            },
        ] {
            assert_eq!(Bucket::decode(&b.encode()), Some(b));
        }
    }

    #[test]
    fn anything_but_a_whole_record_is_damaged() {
        let good = Bucket {
            tokens: 9.4,
            at_ms: 1_764_480_000_123,
        }
        .encode();
        assert!(Bucket::decode(&good[..63]).is_none());
        assert!(Bucket::decode(&[good.as_slice(), b"x"].concat()).is_none());
        assert!(Bucket::decode(b"").is_none());
        assert!(Bucket::decode(&[0u8; 64]).is_none());
        let damaged = |text: &str| {
            let padded = format!("{text:<63}\n");
            assert_eq!(padded.len(), 64, "{text}");
            Bucket::decode(padded.as_bytes()).is_none()
        };
        assert!(!damaged("retry-quota v1 tokens=1.5 at=7"));
        assert!(damaged("retry-quota v2 tokens=1.5 at=7"));
        assert!(damaged("retry-quota v1 tokens=-1.5 at=7"));
        assert!(damaged("retry-quota v1 tokens=NaN at=7"));
        assert!(damaged("retry-quota v1 tokens=inf at=7"));
        assert!(damaged("retry-quota v1 tokens=1e3 at=7"));
        assert!(damaged("retry-quota v1 tokens=1..5 at=7"));
        assert!(damaged("retry-quota v1 tokens=.5 at=7"));
        assert!(damaged("retry-quota v1 tokens=2000000 at=7"));
        assert!(damaged("retry-quota v1 tokens=1.5 at=-7"));
        assert!(damaged("retry-quota v1 tokens=1.5 at=99999999999999999999"));
        assert!(damaged("retry-quota v1 tokens=1.5 at="));
        assert!(damaged("retry-quota v1 tokens=1.5"));
        assert!(damaged(" retry-quota v1 tokens=1.5 at=7"));
        assert!(damaged("retry-quota v1 tokens=1.5 at=7 x"));
        let mut no_newline = good;
        no_newline[63] = b' ';
        assert!(Bucket::decode(&no_newline).is_none());
    }

    /// One event on a shared bucket: a first try or a retry, some milliseconds after the last.
    #[derive(Clone, Copy, Debug)]
    enum Event {
        First(u64),
        Retry(u64),
    }

    fn event() -> impl proptest::strategy::Strategy<Value = Event> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..500).prop_map(Event::First),
            (0u64..500).prop_map(Event::Retry),
            (0u64..5).prop_map(Event::Retry),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn no_interleaving_of_runs_is_granted_more_than_the_bound(
            ratio in 0.0f64..2.0,
            floor in 0.0f64..3.0,
            cap in 2.0f64..30.0,
            events in proptest::collection::vec(event(), 0..300),
        ) {
            let p = params(ratio, floor, cap);
            let mut b = Bucket::full(&p, T0);
            let (mut now, mut firsts, mut granted) = (T0, 0u64, 0u64);
            for e in events {
                match e {
                    Event::First(after) => {
                        now += after;
                        firsts += 1;
                        b.deposit(&p, now);
                    }
                    Event::Retry(after) => {
                        now += after;
                        granted += u64::from(b.take(&p, now));
                    }
                }
                // Every stored bucket reads back to a millionth of a token.
                let stored = Bucket::decode(&b.encode()).unwrap();
                proptest::prop_assert!((stored.tokens - b.tokens).abs() <= 5e-7);
                b = stored;
            }
            let elapsed_s = (now - T0) as f64 / 1000.0;
            let bound = firsts as f64 * ratio + cap + floor * elapsed_s;
            proptest::prop_assert!(granted as f64 <= bound + 1e-3, "{} > {}", granted, bound);
        }
    }
}
