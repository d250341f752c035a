//! The records of runs that gave up while the fleet's Redis could not be reached
//! (docs/dead-letters.md#a-fleets-failed-runs-on-redis): kept in a private local file for that
//! store, with the rules of every record file, and moved to the stream by the next run or
//! replay of it on this machine that reaches Redis. The stream adds a run id once, so a move
//! cut short and done again never adds a record twice, and the file is emptied only once every
//! record in it is on the stream.

use std::io::{self, BufReader};
use std::path::PathBuf;

use nix::fcntl::FlockArg;

use crate::redis_url::RedisAddress;
use crate::store::deadletter::{self, Record};
use crate::store::fleet::{Fleet, FleetError, host_name};
use crate::store::open::{Access, open_record_file};
use crate::store::record::{self, LOCK_WAIT, lock};

/// Where a run that gave up was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    /// On the stream; with the records kept locally before it that went along, or why they
    /// could not (the file's runs stay there, and this is said).
    Stream { moved: Result<usize, String> },
    /// In the local file, since Redis failed as said.
    Kept { file: PathBuf, why: FleetError },
}

/// The local file of the store at `address`: `$XDG_STATE_HOME/retry/unsent/` (else
/// `~/.local/state/retry/unsent/`), named `HOST_PORT_NAME.jsonl` by the server and the store's
/// name, with `MASTER@` before it for a Sentinel's master and `+dbDB` after it for a database
/// other than 0, which `escaped` parts never hold: two databases or masters never share a
/// file. An `XDG_STATE_HOME` that is not an absolute path is ignored, as the XDG Base
/// Directory specification says: taken from the working directory, the runs of one store
/// would be kept in as many places as it is run from. In each part every character but a
/// letter, a digit, `.` and `-` is written `%XX` (its UTF-8 bytes), `_` and `%` included: the
/// `_` between the parts is then never one of theirs, and two stores never share a file
/// (`redis://x_1:2/n` and `redis://x:1/2_n` did). A store whose host and name hold none of
/// them keeps the name it always had.
pub fn file_of(
    address: &RedisAddress,
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let absolute = |v: &std::ffi::OsString| std::path::Path::new(v).is_absolute();
    let base = match var("XDG_STATE_HOME").filter(absolute) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(var("HOME").filter(|v| !v.is_empty())?).join(".local/state"),
    };
    let mut name = String::new();
    if let Some(master) = address.master() {
        name = format!("{}@", escaped(master));
    }
    name += &format!(
        "{}_{}_{}",
        escaped(address.host()),
        address.port(),
        escaped(address.name())
    );
    if let Some(db) = address.db().filter(|db| *db != 0) {
        name += &format!("+db{db}");
    }
    name += ".jsonl";
    Some(base.join("retry").join("unsent").join(name))
}

/// `part` with every byte but those of a letter, a digit, `.` and `-` written `%XX`.
fn escaped(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() || b == b'.' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Records `record` on the stream, moving along what was kept locally; or, when Redis fails,
/// in the local file. `Err` only when neither could take it.
pub fn send(
    address: &RedisAddress,
    record: &Record,
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> io::Result<Sent> {
    let mut fleet = Fleet::from_env(address, var);
    match fleet.add(record, &host_name()) {
        Ok(_) => {
            let moved = match file_of(address, var) {
                Some(file) => move_kept(&mut fleet, &file).map_err(|why| unmoved(&file, &why)),
                None => Ok(0),
            };
            Ok(Sent::Stream { moved })
        }
        Err(why) => {
            let file = file_of(address, var).ok_or_else(|| {
                io::Error::other(format!("{why}; and no local file for it: HOME is not set"))
            })?;
            deadletter::prepare(&file)
                .and_then(|()| record::append(&file, &record.line(), LOCK_WAIT))
                .map_err(|e| {
                    io::Error::other(format!(
                        "{why}; and its local file '{}': {e}",
                        file.display()
                    ))
                })?;
            Ok(Sent::Kept { file, why })
        }
    }
}

/// Moves the runs this machine kept locally for the store at `address` to it: what a replay, a
/// forget and a prune do first, so that they act on every run the listing shows as pending.
pub fn move_kept_here(
    fleet: &mut Fleet,
    address: &RedisAddress,
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), String> {
    let Some(file) = file_of(address, var) else {
        return Ok(());
    };
    move_kept(fleet, &file)
        .map(drop)
        .map_err(|why| unmoved(&file, &why))
}

/// Why the runs kept in `file` could not be moved to the stream.
pub fn unmoved(file: &std::path::Path, why: &str) -> String {
    format!(
        "cannot move the runs kept in '{}' to it: {why}",
        file.display()
    )
}

/// Moves the records of the local file `file` to the stream, under the file's lock: how many.
/// A file that is not there holds none.
pub fn move_kept(fleet: &mut Fleet, file: &std::path::Path) -> Result<usize, String> {
    let locked = match open_record_file(file, Access::Append) {
        Ok(locked) => locked,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.to_string()),
    };
    lock(&locked, FlockArg::LockExclusiveNonblock, LOCK_WAIT).map_err(|e| e.to_string())?;
    let listing = deadletter::pending_from(BufReader::new(&locked)).map_err(|e| e.to_string())?;
    let host = host_name();
    for p in &listing.pending {
        fleet.add(&p.record, &host).map_err(|e| e.to_string())?;
    }
    // Every record is on the stream: the file is emptied, under the same lock.
    locked.set_len(0).map_err(|e| e.to_string())?;
    locked.sync_data().map_err(|e| e.to_string())?;
    Ok(listing.pending.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(url: &str) -> RedisAddress {
        crate::store::place::Place::of(std::path::Path::new(url))
            .ok()
            .and_then(|p| match p {
                crate::store::place::Place::Redis(a) => Some(a),
                _ => None,
            })
            .expect(url)
    }

    fn file(url: &str, vars: &[(&str, &str)]) -> Option<PathBuf> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        file_of(&address(url), &|name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
        })
    }

    #[test]
    fn a_relative_xdg_state_home_is_ignored() {
        let home = [("HOME", "/home/ops")];
        let under = |state: &str| {
            file("redis://db/jobs", &[home[0], ("XDG_STATE_HOME", state)])
                .unwrap()
                .parent()
                .unwrap()
                .to_path_buf()
        };
        assert_eq!(
            under("/var/state"),
            PathBuf::from("/var/state/retry/unsent")
        );
        for relative in ["", "state", "./state", "../state"] {
            assert_eq!(
                under(relative),
                PathBuf::from("/home/ops/.local/state/retry/unsent"),
                "{relative:?}"
            );
        }
        assert_eq!(
            file("redis://db/jobs", &[("XDG_STATE_HOME", "state")]),
            None
        );
    }

    #[test]
    fn two_stores_never_share_a_local_file() {
        let vars = [("XDG_STATE_HOME", "/s")];
        let name = |url: &str| {
            file(url, &vars)
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        };
        assert_ne!(name("redis://x_1:2/n"), name("redis://x:1/2_n"));
        assert_eq!(name("redis://x_1:2/n"), "x%5F1_2_n.jsonl");
        assert_eq!(name("redis://x:1/2_n"), "x_1_2%5Fn.jsonl");
        // A plain host and name keep the name they always had.
        assert_eq!(
            name("redis://db-1.example:6380/jobs"),
            "db-1.example_6380_jobs.jsonl"
        );
        assert_eq!(name("redis://[::1]/jobs"), "%3A%3A1_6379_jobs.jsonl");
        assert_ne!(name("redis://a%5Fb/n"), name("redis://a_b/n"));
        // Another database, or another master of the same sentinels, is another store.
        assert_eq!(name("redis://h/3/n"), "h_6379_n+db3.jsonl");
        assert_eq!(name("redis://h/0/n"), name("redis://h/n"));
        assert_eq!(
            name("redis+sentinel://s1:26379/mymaster/n"),
            "mymaster@s1_26379_n.jsonl"
        );
        let all = [
            "redis://h/n",
            "redis://h/3/n",
            "redis://h/4/n",
            "redis+sentinel://h:6379/n/n",
            "redis+sentinel://h:6379/m/n",
            "redis+sentinel://h:6379/m/3/n",
        ];
        let names: std::collections::BTreeSet<String> = all.iter().map(|u| name(u)).collect();
        assert_eq!(names.len(), all.len(), "{names:?}");
    }
}
