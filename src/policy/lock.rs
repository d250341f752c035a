//! `--lock NAME` as values (docs/processes.md#one-run-at-a-time): the name, checked as a file
//! name or taken as a lock file's path; who holds a lock, as its file says; and that file's
//! text, written and read back.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::redis_url::check_name;

/// `--lock NAME` and `--lock-wait`: at most one run holding NAME at a time on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockSpec {
    /// Letters, digits, `.`, `_` and `-`, as a quota's name: a file name in the user's lock
    /// directory; or, with a `/`, the lock file's path ([`is_path`]).
    pub name: String,
    /// `--lock-wait`: how long a run waits for the lock before it is turned away.
    pub wait: Duration,
}

/// A lock's name, as `--lock` is given it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockName(pub String);

impl FromStr for LockName {
    type Err = String;

    fn from_str(s: &str) -> Result<LockName, String> {
        if s.contains("://") {
            return Err("a lock on Redis is not available yet: give a name (letters, digits, '.', '_' and '-') for a lock on this machine".into());
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
        Ok(LockName(s.to_string()))
    }
}

/// Whether `--lock` was given a lock file's path (a name with a `/`, as `flock FILE` takes
/// one) rather than a name in the user's lock directory.
pub fn is_path(name: &str) -> bool {
    name.contains('/')
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
}

/// The longest text a lock's file is read to: a record is a few hundred bytes.
pub const RECORD_MAX: usize = 1024;

impl LockRecord {
    /// The file's text: one `key=value` a line, the fencing token first.
    pub fn encode(&self) -> String {
        let h = &self.holder;
        let pid = h.pid.map_or_else(String::new, |p| p.to_string());
        format!(
            "token={}\nhost={}\npid={pid}\nrun_id={}\nsince={}\n",
            self.token,
            one_line(&h.host),
            one_line(&h.run_id),
            one_line(&h.since)
        )
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
            "redis://h/n",
            "/tmp/",
            "a/.",
            "a/..",
        ] {
            assert!(bad.parse::<LockName>().is_err(), "{bad}");
        }
        for path in ["a/b", "./job.lock", "/var/lock/job"] {
            assert!(
                path.parse::<LockName>().is_ok_and(|n| is_path(&n.0)),
                "{path}"
            );
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
    }
}
