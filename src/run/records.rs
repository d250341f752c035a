//! `retry --forget FILE ID...` and `retry --prune FILE --older-than DURATION`
//! (docs/dead-letters.md#picking-forgetting-pruning): an operator's work on a dead-letter file or
//! a history, which runs no command. Each takes the replay's hold on the file first: a replay
//! meanwhile would run a run being forgotten, or append about runs being dropped.

use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::config::{Config, LogFormat};
use crate::exit::ExitStatus;
use crate::redis_url::RedisAddress;
use crate::report::printable;
use crate::report::replay::{forgot, pruned, shown, trouble};
use crate::store::deadletter::{self, Hold, ReadError, forgotten_line};
use crate::store::fleet::Fleet;
use crate::store::pick;
use crate::store::place::Place;
use crate::store::prune::{self, PruneError};
use crate::store::record::{self, LOCK_WAIT};
use crate::store::unsent;

/// The most forgotten lines appended in one write: well under the longest line a reader takes.
const FORGOTTEN_PER_WRITE: usize = 4096;

/// Forgets the pending runs of `file` that `ids` name (`all`: every one).
pub fn forget(config: &Config, file: &Path, ids: &[String]) -> ExitStatus {
    if let Ok(Place::Redis(address)) = Place::of(file) {
        return forget_on_redis(config, &address, ids);
    }
    let shown_file = shown(file, config.charset);
    let fail = |why: String| {
        eprintln!("retry: --forget {shown_file}: {}", printable(&why));
        ExitStatus::Usage
    };
    let _locked = match deadletter::hold_for_replay(file) {
        Ok(locked) => locked,
        Err(Hold::Busy) => return fail("a replay of this file is running".into()),
        Err(Hold::Refused(r)) => return fail(r.to_string()),
        Err(Hold::Io(e)) => return fail(unopened(file, &e)),
    };
    let listing = match deadletter::read(file, None, LOCK_WAIT) {
        Ok(listing) => listing,
        Err(ReadError::Io(e)) => {
            return fail(format!(
                "cannot read it: {}; nothing was forgotten",
                trouble(&e)
            ));
        }
        Err(ReadError::Damaged(d)) => return fail(format!("line {}: {}", d.line, d.why)),
    };
    let pending: Vec<&str> = listing
        .pending
        .iter()
        .map(|p| p.record.id.as_str())
        .collect();
    let forgotten = match named(&pending, ids) {
        Ok(forgotten) => forgotten,
        Err(why) => return fail(why),
    };
    for (k, batch) in forgotten.chunks(FORGOTTEN_PER_WRITE).enumerate() {
        let lines: Vec<String> = batch.iter().map(|id| forgotten_line(id)).collect();
        if let Err(e) = record::append(file, &lines.join("\n"), LOCK_WAIT) {
            let done = k * FORGOTTEN_PER_WRITE;
            return fail(not_appended(&e, batch.len(), done, forgotten.len()));
        }
    }
    let json = config.log.format == LogFormat::Json;
    let left = pending.len() - forgotten.len();
    print(
        config,
        &forgot(file, &forgotten, left, json, config.charset),
    )
}

/// Why `file` could not be opened for `--forget` or `--prune`, in a user's words.
fn unopened(file: &Path, e: &io::Error) -> String {
    let missing = e.kind() == io::ErrorKind::NotFound;
    match file.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if missing && !dir.is_dir() => {
            format!(
                "its directory {} does not exist",
                shown(dir, Default::default())
            )
        }
        _ if missing => trouble(e),
        _ => format!("cannot open it: {}", trouble(e)),
    }
}

/// Why the `lines` forgotten lines appended after the `done` of `all` were not, and what the
/// file holds now.
fn not_appended(e: &io::Error, lines: usize, done: usize, all: usize) -> String {
    let what = match lines {
        1 => "the forgotten line".to_string(),
        n => format!("the {n} forgotten lines"),
    };
    let cut = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<record::CutShort>());
    let (why, left) = match cut {
        Some(cut) => (trouble(&cut.error), cut.not_cut_back.as_ref()),
        None => (trouble(e), None),
    };
    let then = match (left, done) {
        (Some(not_cut), _) => format!(
            "what was written of them could not be cut back ({}): some of them may be forgotten, \
             and the file's last line is cut short (a replay skips it)",
            trouble(not_cut)
        ),
        (None, 0) => "nothing was forgotten, and the file is left as it was".to_string(),
        (None, done) => format!(
            "the first {done} of the {all} runs were forgotten, and the others are still pending"
        ),
    };
    format!("cannot append {what}: {why}; {then}")
}

/// The ids of `pending` that `words` name (`all`: every one), in the order recorded, or why
/// one names none or several.
fn named(pending: &[&str], words: &[String]) -> Result<Vec<String>, String> {
    let mut chosen = vec![false; pending.len()];
    for word in words {
        if word == "all" {
            chosen.iter_mut().for_each(|c| *c = true);
            continue;
        }
        let k = pick::one(word, pending.iter().copied()).map_err(|e| e.to_string())?;
        chosen[k] = true;
    }
    Ok(pending
        .iter()
        .zip(&chosen)
        .filter(|(_, c)| **c)
        .map(|(id, _)| id.to_string())
        .collect())
}

/// The fleet's store at `address`, opened with the password of the environment.
fn fleet(address: &RedisAddress) -> Fleet {
    Fleet::from_env(address, &|name| std::env::var_os(name))
}

/// `--forget redis://.../NAME ID...`: the ids are picked among the fleet's pending runs.
fn forget_on_redis(config: &Config, address: &RedisAddress, ids: &[String]) -> ExitStatus {
    let fail = |why: String| {
        eprintln!("retry: --forget '{address}': {}", printable(&why));
        ExitStatus::Usage
    };
    let mut fleet = fleet(address);
    if let Err(why) = unsent::move_kept_here(&mut fleet, address, &|name| std::env::var_os(name)) {
        return fail(why);
    }
    let listed = match fleet.list(false) {
        Ok(listed) => listed,
        Err(e) => return fail(e.to_string()),
    };
    let pending: Vec<&str> = listed
        .iter()
        .map(|l| l.pending.record.id.as_str())
        .collect();
    let forgotten = match named(&pending, ids) {
        Ok(forgotten) => forgotten,
        Err(why) => return fail(why),
    };
    // A run a replay holds now is left to that replay, which settles it.
    let claimed = match fleet.forget(&forgotten) {
        Ok((_, claimed)) => claimed,
        Err(e) => return fail(e.to_string()),
    };
    for id in &claimed {
        eprintln!(
            "retry: --forget '{address}': run {id} is being replayed now: not forgotten (its replay settles it)"
        );
    }
    let forgotten: Vec<String> = forgotten
        .into_iter()
        .filter(|id| !claimed.contains(id))
        .collect();
    let json = config.log.format == LogFormat::Json;
    let shown_store = std::path::PathBuf::from(address.to_string());
    let left = pending.len() - forgotten.len();
    print(
        config,
        &forgot(&shown_store, &forgotten, left, json, config.charset),
    )
}

/// `--prune redis://.../NAME --older-than DURATION`: the dead letters without what is settled
/// or old, and the history without the runs that ended before the limit; a line for each that
/// holds anything.
fn prune_on_redis(config: &Config, address: &RedisAddress, older_than: Duration) -> ExitStatus {
    let cutoff = SystemTime::now()
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut store = fleet(address);
    if let Err(why) = unsent::move_kept_here(&mut store, address, &|name| std::env::var_os(name)) {
        eprintln!("retry: --prune '{address}': {}", printable(&why));
        return ExitStatus::Usage;
    }
    let done = store
        .prune(cutoff)
        .and_then(|letters| Ok((letters, store.prune_history(cutoff)?)));
    let (letters, (runs_dropped, runs_kept)) = match done {
        Ok(done) => done,
        Err(e) => {
            eprintln!("retry: --prune '{address}': {}", printable(&e.to_string()));
            return ExitStatus::Usage;
        }
    };
    let shown_store = std::path::PathBuf::from(address.to_string());
    let dead_letters = prune::Pruned {
        kind: prune::Kind::DeadLetters,
        resolved: letters.resolved,
        forgotten: letters.forgotten,
        old: letters.old,
        kept: letters.kept,
        ..Default::default()
    };
    let history = prune::Pruned {
        kind: prune::Kind::History,
        old: runs_dropped,
        kept: runs_kept,
        ..Default::default()
    };
    let holds = |p: &prune::Pruned| p.resolved + p.forgotten + p.old + p.kept > 0;
    let mut reports: Vec<prune::Pruned> = [dead_letters, history]
        .into_iter()
        .filter(|p| holds(p))
        .collect();
    if reports.is_empty() {
        reports.push(prune::Pruned::default());
    }
    let json = config.log.format == LogFormat::Json;
    for p in &reports {
        let status = print(config, &pruned(&shown_store, p, json, config.charset));
        if status != ExitStatus::Success {
            return status;
        }
    }
    ExitStatus::Success
}

/// Prunes `file` of what is settled, and of what is older than `older_than`.
pub fn prune(config: &Config, file: &Path, older_than: Duration) -> ExitStatus {
    if let Ok(Place::Redis(address)) = Place::of(file) {
        return prune_on_redis(config, &address, older_than);
    }
    let shown_file = shown(file, config.charset);
    let done = match prune::prune(file, older_than, SystemTime::now()) {
        Ok(done) => done,
        Err(e) => {
            let why = match e {
                PruneError::Hold(Hold::Busy) => "a replay of this file is running".to_string(),
                PruneError::Hold(Hold::Refused(r)) => r.to_string(),
                PruneError::Hold(Hold::Io(e)) => unopened(file, &e),
                PruneError::Io(e) if e.raw_os_error().is_none() => {
                    format!("{e}; the file is left as it was")
                }
                PruneError::Io(e) => {
                    format!(
                        "cannot read it: {}; the file is left as it was",
                        trouble(&e)
                    )
                }
                PruneError::Write(e) => format!(
                    "cannot write the new file beside it: {}; the file is left as it was",
                    trouble(&e)
                ),
                PruneError::Unsynced(e) => format!(
                    "it is pruned, but its directory could not be synced ({}): a crash of the \
                     machine now could bring back the old file",
                    trouble(&e)
                ),
                PruneError::Damaged(d) => {
                    format!("line {}: {}; the file is left as it is", d.line, d.why)
                }
                PruneError::NotRecords => {
                    "it holds neither dead letters nor a history; it is left as it is".to_string()
                }
            };
            eprintln!("retry: --prune {shown_file}: {}", printable(&why));
            return ExitStatus::Usage;
        }
    };
    let json = config.log.format == LogFormat::Json;
    print(config, &pruned(file, &done, json, config.charset))
}

/// Prints the line that says what was done, on stdout: with `-q`, nothing, as `flock -n` and
/// `timeout` say nothing when all went well (the JSON object is printed all the same: `-q`
/// shapes the human log only).
fn print(config: &Config, line: &str) -> ExitStatus {
    if config.log.quiet && config.log.format != LogFormat::Json {
        return ExitStatus::Success;
    }
    let mut out = io::stdout().lock();
    match writeln!(out, "{}", printable(line)).and_then(|()| out.flush()) {
        Ok(()) => ExitStatus::Success,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitStatus::Success,
        Err(e) => {
            eprintln!("retry: cannot write what was done: {e}");
            ExitStatus::Usage
        }
    }
}
