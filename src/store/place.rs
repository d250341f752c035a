//! Where a record option keeps its records (docs/dead-letters.md#a-fleets-failed-runs-on-redis):
//! a file, or a stream on the fleet's Redis, named as the quota names it (any form of
//! `redis_url.rs`: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME` and the others).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::redis_url::{RedisAddress, is_redis_url};

/// A dead-letter store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    File(PathBuf),
    Redis(RedisAddress),
}

impl Place {
    /// The place a record option's value names: a `redis://` URL is a stream on Redis, anything
    /// else a file. `Err` says what is wrong with a URL, never quoting its password.
    pub fn of(value: &Path) -> Result<Place, String> {
        let Some(url) = value.to_str().filter(|v| is_redis_url(v)) else {
            return Ok(Place::File(value.to_path_buf()));
        };
        // The quota's parameters follow its name after a ':'; a store of records has none.
        let (address, params) = crate::redis_url::parse(url)?;
        if params.is_some() {
            return Err(format!(
                "a store of records takes no parameters after its name: expected {}",
                address.hidden()
            ));
        }
        Ok(Place::Redis(address))
    }

    /// The place a replay's value names, and the length of its claims' leases when the URL
    /// gives one as its last part (`redis://HOST/NAME:lease=DURATION`); a file takes none.
    pub fn of_replay(value: &Path) -> Result<(Place, Option<std::time::Duration>), String> {
        let Some(url) = value.to_str().filter(|v| is_redis_url(v)) else {
            return Ok((Place::File(value.to_path_buf()), None));
        };
        let Some((rest, lease)) = url.rsplit_once(":lease=") else {
            return Place::of(value).map(|place| (place, None));
        };
        // A socket's `?db=N` may follow the lease: it belongs to the URL.
        let (lease, rest) = match lease.split_once('?') {
            Some((lease, query)) => (lease, format!("{rest}?{query}")),
            None => (lease, rest.to_string()),
        };
        let length = crate::duration::parse_duration(lease)
            .ok()
            .filter(|d| *d >= std::time::Duration::from_millis(300))
            .ok_or_else(|| {
                format!(
                    "lease={lease}: a claim's lease is a duration of at least 300ms, such as 30s"
                )
            })?;
        Place::of(Path::new(&rest)).map(|place| (place, Some(length)))
    }

    /// The file, when it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Place::File(path) => Some(path),
            Place::Redis(_) => None,
        }
    }

    /// The place as the log names it: the path, or the URL without its password, as a path
    /// (what the events of a record file carry).
    pub fn shown(&self) -> PathBuf {
        match self {
            Place::File(path) => path.clone(),
            Place::Redis(address) => PathBuf::from(address.to_string()),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::File(path) => write!(f, "{}", path.display()),
            Place::Redis(address) => write!(f, "{address}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_is_a_stream_and_anything_else_a_file() {
        assert_eq!(
            Place::of(Path::new("d.jsonl")),
            Ok(Place::File("d.jsonl".into()))
        );
        assert_eq!(
            Place::of(Path::new("./redis://h/x")),
            Ok(Place::File("./redis://h/x".into()))
        );
        let Ok(Place::Redis(a)) = Place::of(Path::new("redis://:pw-secret@10.0.0.5:6380/jobs"))
        else {
            panic!();
        };
        assert_eq!((a.host(), a.port(), a.name()), ("10.0.0.5", 6380, "jobs"));
        assert_eq!(Place::Redis(a).to_string(), "redis://10.0.0.5:6380/jobs");
        for bad in [
            "redis://h/jobs:ratio=0.1",
            "redis://h/",
            "redis://:pw-secret@h",
        ] {
            let e = Place::of(Path::new(bad)).unwrap_err();
            assert!(!e.contains("pw-secret"), "{e}");
        }
    }

    #[test]
    fn a_url_that_names_no_store_of_records_is_told_so_in_words_of_records_not_of_quotas() {
        for (bad, says) in [
            (
                "redis://h/jobs:ratio=0.1",
                "takes no parameters after its name",
            ),
            ("redis://h/a:b", "expected redis://h/a"),
            ("redis://:p:w/x@h/jobs:cap=5", "takes no parameters"),
            ("redis://h/", "the name is empty"),
            ("redis://h/a b", "the name 'a b' contains ' '"),
        ] {
            let e = Place::of(Path::new(bad)).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("quota") && !e.contains("ratio=R"), "{bad}: {e}");
        }
        // A password that holds ':' or '/' is no parameter.
        let Ok(Place::Redis(a)) = Place::of(Path::new("redis://:p:w/x@h/jobs")) else {
            panic!();
        };
        assert_eq!(a.name(), "jobs");
    }
}
