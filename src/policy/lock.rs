//! `--lock NAME` and `--lock redis://…/NAME[:lease=DURATION]` as values
//! (docs/processes.md#one-run-at-a-time): the name, checked as a file name or taken as a lock
//! file's path; the lease of a fleet's lock; who holds a lock, as its file or lease says; and
//! that file's text, written and read back.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::redis_url::{RedisAddress, check_name, is_redis_url};
use crate::store::lease;

/// `--lock NAME` and `--lock-wait`: at most one run holding NAME at a time, on this machine or,
/// with a Redis URL, on the fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockSpec {
    /// Letters, digits, `.`, `_` and `-`, as a quota's name: a file name in the user's lock
    /// directory; or, with a `/`, the lock file's path ([`is_path`]).
    pub name: String,
    /// `--lock-wait`: how long a run waits for the lock before it is turned away.
    pub wait: Duration,
    /// The fleet's lease, when `--lock` gave a Redis URL.
    pub lease: Option<LeaseSpec>,
    /// `--once KEY`: the lock is the claim on KEY, which a run that succeeds marks done.
    pub once: Option<OnceSpec>,
}

/// `--once KEY` and `--once-for`: the job of KEY runs once; a run that finds KEY done within
/// `within` does not run the command, one that finds it claimed is turned away as by a held
/// lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnceSpec {
    /// `--once-for`: how long KEY stays done.
    pub within: Duration,
    /// The digest of the command line KEY is bound to (SHA-256, in hexadecimal).
    pub command: String,
}

impl LockSpec {
    /// The option that named the lock, for its messages.
    pub fn option(&self) -> &'static str {
        if self.once.is_some() {
            "--once"
        } else {
            "--lock"
        }
    }
}

/// `--once-for` when not given: a day, as long as payment APIs keep an idempotency key.
pub const DEFAULT_ONCE_FOR: Duration = Duration::from_secs(24 * 3600);

/// The run that made a `--once` KEY done: who (host, pid, run id), and when (`since`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DoneBefore {
    pub by: LockHolder,
    /// When it was made done, in milliseconds since the epoch.
    pub at_ms: u64,
}

/// A lock on the fleet's Redis: where, and how long each grant or renewal of its lease lasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSpec {
    pub address: RedisAddress,
    pub length: Duration,
}

/// The shortest lease a lock takes: renewed every third of it, a shorter one would be renewed
/// more often than an exchange with Redis may take.
pub const SHORTEST_LEASE: Duration = Duration::from_millis(300);

/// A lock, as `--lock` is given it: its name, and its lease when it is the fleet's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockName {
    pub name: String,
    pub lease: Option<LeaseSpec>,
}

impl FromStr for LockName {
    type Err = String;

    fn from_str(s: &str) -> Result<LockName, String> {
        if is_redis_url(s) {
            let (address, params) = crate::redis_url::parse(s)?;
            let length = lease_length(params)?;
            return Ok(LockName {
                name: address.name().to_string(),
                lease: Some(LeaseSpec { address, length }),
            });
        }
        if s.contains("://") {
            return Err(format!(
                "a lock is a NAME on this machine or {} on the fleet's Redis",
                crate::redis_url::FORMS
            ));
        }
        if is_path(s) {
            if s.ends_with('/') || s.ends_with("/.") || s.ends_with("/..") {
                return Err(format!(
                    "'{s}' names a directory: give the lock file's path, or a name \
                     (letters, digits, '.', '_' and '-')"
                ));
            }
        } else {
            check_name(s)?;
        }
        Ok(LockName {
            name: s.to_string(),
            lease: None,
        })
    }
}

/// Whether `--lock` was given a lock file's path (a name with a `/`, as `flock FILE` takes
/// one) rather than a name in the user's lock directory.
pub fn is_path(name: &str) -> bool {
    name.contains('/')
}

/// The lease's length that the parameters after the name give (`lease=DURATION`), or the
/// default one.
fn lease_length(params: Option<&str>) -> Result<Duration, String> {
    let Some(params) = params else {
        return Ok(lease::DEFAULT_LENGTH);
    };
    let mut length = None;
    for item in params.split(',') {
        let item = item.trim();
        match item.split_once('=') {
            Some(("lease", value)) if length.is_none() => {
                let parsed = crate::duration::parse_duration(value.trim())
                    .ok()
                    .filter(|d| *d >= SHORTEST_LEASE && *d <= Duration::from_secs(86_400));
                length = Some(parsed.ok_or_else(|| {
                    format!(
                        "lease={}: a lock's lease is a duration from 300ms to 1d, such as 30s",
                        value.trim()
                    )
                })?);
            }
            Some(("lease", _)) => return Err("lease= is given twice".into()),
            _ => {
                return Err(format!(
                    "unknown parameter '{item}': a lock on Redis takes lease=DURATION"
                ));
            }
        }
    }
    length.ok_or_else(|| "no parameters after ':' (lease=DURATION)".into())
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lease {
            None => f.write_str(&self.name),
            Some(lease) => write!(f, "{}", lease.address.hidden()),
        }
    }
}

/// Who holds a lock, as the holder wrote it into the lock's file when it took it. A field the
/// file does not have (a holder that has not written it yet, a damaged file) is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockHolder {
    /// The lock's name.
    pub name: String,
    pub host: String,
    pub pid: Option<u32>,
    /// Its `RETRY_RUN_ID`.
    pub run_id: String,
    /// When it took the lock, in RFC 3339.
    pub since: String,
}

/// What the lock's file holds: the holder, and the fencing token of the last grant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRecord {
    pub token: u64,
    /// The file's token is there but not a number: written by hand, or by another program.
    pub token_damaged: bool,
    pub holder: LockHolder,
    /// `--once`: the digest of the command line the key is bound to; empty for `--lock`.
    pub command: String,
    /// `--once`: when the holder marked the key done, in milliseconds since the epoch.
    pub done_ms: Option<u64>,
}

/// The longest text a lock's file is read to: a record is a few hundred bytes.
pub const RECORD_MAX: usize = 1024;

impl LockRecord {
    /// The file's text: one `key=value` a line, the fencing token first; `--once`'s command
    /// and done time last, when there are any.
    pub fn encode(&self) -> String {
        let h = &self.holder;
        let pid = h.pid.map_or_else(String::new, |p| p.to_string());
        let mut text = format!(
            "token={}\nhost={}\npid={pid}\nrun_id={}\nsince={}\n",
            self.token,
            one_line(&h.host),
            one_line(&h.run_id),
            one_line(&h.since)
        );
        if !self.command.is_empty() {
            text.push_str(&format!("command={}\n", one_line(&self.command)));
        }
        if let Some(ms) = self.done_ms {
            text.push_str(&format!("done_ms={ms}\n"));
        }
        text
    }

    /// The key's done record, when the holder marked it done at or after `since_ms`.
    pub fn done_since(&self, since_ms: u64) -> Option<DoneBefore> {
        let at_ms = self.done_ms.filter(|ms| *ms >= since_ms)?;
        Some(DoneBefore {
            by: self.holder.clone(),
            at_ms,
        })
    }

    /// The record in `text`, as far as it can be read: lines cut short or unknown are passed
    /// over, and a file with no token reads as token 0.
    pub fn decode(name: &str, text: &str) -> LockRecord {
        let mut record = LockRecord {
            holder: LockHolder {
                name: name.to_string(),
                ..LockHolder::default()
            },
            ..LockRecord::default()
        };
        // Only whole lines: a holder may be writing the file as it is read.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in whole.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key {
                "token" => match value.parse() {
                    Ok(token) => record.token = token,
                    Err(_) => record.token_damaged = true,
                },
                "host" => record.holder.host = value.to_string(),
                "pid" => record.holder.pid = value.parse().ok(),
                "run_id" => record.holder.run_id = value.to_string(),
                "since" => record.holder.since = value.to_string(),
                "command" => record.command = value.to_string(),
                "done_ms" => record.done_ms = value.parse().ok(),
                _ => {}
            }
        }
        record
    }
}

/// `text` with its line breaks made spaces: one value a line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_must_be_a_file_name() {
        assert!("nightly-backup.1".parse::<LockName>().is_ok());
        for bad in [
            "",
            "..",
            ".hidden",
            "a b",
            "ftp://h/n",
            "/tmp/",
            "a/.",
            "a/..",
        ] {
            assert!(bad.parse::<LockName>().is_err(), "{bad}");
        }
        for path in ["a/b", "./job.lock", "/var/lock/job"] {
            assert!(
                path.parse::<LockName>()
                    .is_ok_and(|n| is_path(&n.name) && n.lease.is_none()),
                "{path}"
            );
        }
    }

    #[test]
    fn a_lock_on_redis_takes_a_lease_and_nothing_else() {
        let lock: LockName = "redis://h/job".parse().unwrap();
        assert_eq!(lock.name, "job");
        assert_eq!(lock.lease.unwrap().length, lease::DEFAULT_LENGTH);
        let lock: LockName = "redis://h/job:lease=600ms".parse().unwrap();
        assert_eq!(lock.lease.unwrap().length, Duration::from_millis(600));
        for bad in [
            "redis://h/job:lease=0",
            "redis://h/job:lease=abc",
            "redis://h/job:lease=100ms",
            "redis://h/job:lease=2d",
            "redis://h/job:ttl=5s",
            "redis://h/job:lease=1s,lease=2s",
            "redis://h/job:",
            "redis://h/j b",
        ] {
            assert!(bad.parse::<LockName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_record_reads_back_as_written_and_a_cut_one_as_far_as_it_goes() {
        let record = LockRecord {
            token: 41,
            token_damaged: false,
            holder: LockHolder {
                name: "n".into(),
                host: "web\n1".into(),
                pid: Some(77),
                run_id: "abc".into(),
                since: "2026-01-01T00:00:00Z".into(),
            },
            ..LockRecord::default()
        };
        let text = record.encode();
        let mut back = LockRecord::decode("n", &text);
        assert_eq!(back.holder.host, "web 1");
        back.holder.host = "web\n1".into();
        assert_eq!(back, record);
        let cut = &text[..text.find("run_id").unwrap() + 4];
        let partial = LockRecord::decode("n", cut);
        assert_eq!((partial.token, partial.holder.pid), (41, Some(77)));
        assert_eq!(partial.holder.run_id, "");
        assert_eq!(LockRecord::decode("n", "garbage").token, 0);
        let once = LockRecord {
            command: "ab12".into(),
            done_ms: Some(5000),
            ..record
        };
        let back = LockRecord::decode("n", &once.encode());
        assert_eq!((back.command.as_str(), back.done_ms), ("ab12", Some(5000)));
        assert!(back.done_since(5000).is_some() && back.done_since(5001).is_none());
    }
}
