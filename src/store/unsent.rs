//! The records of runs that gave up while the fleet's Redis could not be reached
//! (docs/dead-letters.md#a-fleets-failed-runs-on-redis): kept in a private local file for that
//! store, with the rules of every record file, and moved to the stream by the next run or
//! replay of it on this machine that reaches Redis. The stream adds a run id once, so a move
//! cut short and done again never adds a record twice, and the file is emptied only once every
//! record in it is on the stream.

use std::io::{self, BufReader};
use std::path::PathBuf;

use nix::fcntl::FlockArg;

use crate::policy::quota::RedisAddress;
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
/// `~/.local/state/retry/unsent/`), named by the server and the store's name.
pub fn file_of(
    address: &RedisAddress,
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let base = match var("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(var("HOME").filter(|v| !v.is_empty())?).join(".local/state"),
    };
    let host: String = address
        .host()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("{host}_{}_{}.jsonl", address.port(), address.name());
    Some(base.join("retry").join("unsent").join(name))
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
    let held = match open_record_file(file, Access::Append) {
        Ok(held) => held,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.to_string()),
    };
    lock(&held, FlockArg::LockExclusiveNonblock, LOCK_WAIT).map_err(|e| e.to_string())?;
    let listing = deadletter::pending_from(BufReader::new(&held)).map_err(|e| e.to_string())?;
    let host = host_name();
    for p in &listing.pending {
        fleet.add(&p.record, &host).map_err(|e| e.to_string())?;
    }
    // Every record is on the stream: the file is emptied, under the same lock.
    held.set_len(0).map_err(|e| e.to_string())?;
    held.sync_data().map_err(|e| e.to_string())?;
    Ok(listing.pending.len())
}
