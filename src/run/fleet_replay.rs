//! `retry --replay redis://HOST[:PORT]/NAME` (docs/dead-letters.md#a-fleets-failed-runs-on-redis):
//! the replay of a fleet's dead letters. It moves along the runs this machine kept locally while
//! Redis could not be reached, reads the stream, takes the pending runs of this machine (of every
//! machine with `--any-host`), and runs each through the file's replay, claiming it first: two
//! replays at once, here or on other machines, never run one run twice. `--dry-run` lists the
//! fleet's pending runs, with their hosts and claims, and claims nothing.

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{self, Write};
use std::rc::Rc;

use crate::config::{Config, Mode};
use crate::exit::ExitStatus;
use crate::redis_url::RedisAddress;
use crate::report::printable;
use crate::report::replay::{FleetRun, ReplayRefusal, fleet_list};
use crate::run::claims::Claims;
use crate::run::replay::{Ledger, Run, configure, picked, place_from_here, run_replay, usage};
use crate::store::deadletter::Pending;
use crate::store::fleet::{Fleet, Listed, consumer_name, host_name};
use crate::store::unsent;

/// Replays the pending runs of the fleet's store at `address`; `args` is the whole command
/// line, whose options override those each run recorded.
/// Its claims are leases of `lease`, renewed while it runs.
pub fn replay(
    args: &[OsString],
    config: &Config,
    address: &RedisAddress,
    lease: std::time::Duration,
) -> ExitStatus {
    let shown = std::path::PathBuf::from(address.to_string());
    let mut fleet = Fleet::from_env(address, &|name| std::env::var_os(name));
    let unreachable = |why: String| {
        eprintln!("retry: --replay '{address}': {}", printable(&why));
        ExitStatus::Usage
    };
    let dry_run = config.is_dry_run();
    // What this machine kept while Redis could not be reached goes first: it is pending too.
    if !dry_run {
        if let Err(why) =
            unsent::move_kept_here(&mut fleet, address, &|name| std::env::var_os(name))
        {
            return unreachable(why);
        }
    }
    let picks = picks_of(config);
    let mut listed = match fleet.list(picks.all) {
        Ok(listed) => listed,
        Err(why) => return unreachable(why.to_string()),
    };
    let host = host_name();
    // A dry run moves nothing: what this machine keeps locally is listed as pending too, as
    // the replay would move it and run it. An --only that names another machine's run says
    // so, rather than that no run has it.
    let refused = match dry_run {
        true => kept_here(address, &host, &mut listed).err(),
        false if !picks.any_host => elsewhere(&picks.only, &listed, &host),
        false => None,
    };
    if let Some(why) = refused {
        return unreachable(why);
    }
    // A dry run lists the fleet's; a replay runs this machine's unless asked for the fleet's.
    let ours = |l: &Listed| dry_run || picks.any_host || l.host == host;
    // The runs pending in the store that this replay will not take, told at its end.
    let pending_in_store = listed.len();
    // Each run's record, and beside it where it ran and who runs it now, moved apart rather
    // than copied: a fleet's store may hold hundreds of thousands.
    let (pending, beside): (Vec<Pending>, Vec<(String, Option<String>)>) = listed
        .into_iter()
        .filter(ours)
        .map(|l| (l.pending, (l.host, l.claim)))
        .unzip();
    let ids: Vec<String> = match picks.everything() {
        true => Vec::new(),
        false => pending.iter().map(|p| p.record.id.clone()).collect(),
    };
    let picked = match picked(&shown, pending, config) {
        Ok(pending) => pending,
        Err(refusal) => return usage(&refusal),
    };
    let beside = beside_picked(picks.everything(), &ids, &beside, &picked);
    let pending = picked;
    let unpicked = pending_in_store - pending.len();
    if dry_run {
        let runs: Vec<FleetRun> = pending
            .iter()
            .zip(beside)
            .map(|(p, (host, claim))| FleetRun {
                pending: p,
                host,
                claim: claim.as_deref(),
            })
            .collect();
        return list(config, address, &runs);
    }
    let runs = match prepared(args, config, &shown, pending) {
        Ok(runs) => runs,
        Err(refusal) => return usage(&refusal),
    };
    // Started before the first run, so that every run finds it below retry already and
    // never takes it for what a try left running.
    let watchdog = crate::run::watchdog::Watchdog::start().ok();
    let claims = Claims::new(fleet, consumer_name(), lease, watchdog);
    let ledger = Ledger::Fleet(Rc::new(RefCell::new(claims)));
    run_replay(config, ledger, &shown, &runs, Vec::new(), unpicked)
}

/// Where each picked run ran and who runs it now, from `beside` (of the runs `ids`, in the
/// order listed): what was picked keeps that order, so each is found by walking on.
fn beside_picked<'a>(
    everything: bool,
    ids: &[String],
    beside: &'a [(String, Option<String>)],
    picked: &[Pending],
) -> Vec<&'a (String, Option<String>)> {
    if everything {
        return beside.iter().collect();
    }
    let mut rest = ids.iter().zip(beside);
    picked
        .iter()
        .filter_map(|p| rest.find(|(id, _)| **id == p.record.id).map(|(_, b)| b))
        .collect()
}

/// What the replay picks (`--only`, `--only-label`, `--all`, `--any-host`).
fn picks_of(config: &Config) -> crate::config::Picks {
    match &config.mode {
        Mode::Replay { picks, .. } => picks.clone(),
        _ => Default::default(),
    }
}

/// The runs this machine keeps in its local file for the store at `address` (Redis could not
/// be reached when they gave up), added to `listed` as the listing shows them; or why that file
/// cannot be read, as the replay would refuse it, rather than its runs left out of the listing.
/// A file that is not there keeps none.
fn kept_here(address: &RedisAddress, host: &str, listed: &mut Vec<Listed>) -> Result<(), String> {
    let var = |name: &str| std::env::var_os(name);
    let Some(file) = unsent::file_of(address, &var) else {
        return Ok(());
    };
    let lock_wait = crate::store::record::LOCK_WAIT;
    let kept = match crate::store::deadletter::read(&file, None, lock_wait) {
        Ok(kept) => kept,
        Err(crate::store::deadletter::ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(());
        }
        Err(why) => {
            return Err(format!(
                "cannot read the runs kept in '{}': {why}; a replay would not move them either",
                file.display()
            ));
        }
    };
    let before = listed.len();
    listed.extend(
        kept.pending
            .into_iter()
            .enumerate()
            .map(|(k, mut pending)| {
                pending.line = before + k + 1;
                Listed {
                    pending,
                    host: host.to_string(),
                    claim: None,
                    entry: String::new(),
                }
            }),
    );
    Ok(())
}

/// The line that says an `--only` of `only` names a pending run of another machine than
/// `host`, and no run of this one.
fn elsewhere(only: &[String], listed: &[Listed], host: &str) -> Option<String> {
    let ids = || listed.iter().map(|l| l.pending.record.id.as_str());
    let here = || {
        listed
            .iter()
            .filter(|l| l.host == host)
            .map(|l| l.pending.record.id.as_str())
    };
    only.iter().find_map(|word| {
        if crate::store::pick::one(word, here()).is_ok() {
            return None;
        }
        let k = crate::store::pick::one(word, ids()).ok()?;
        let there = &listed[k].host;
        Some(format!(
            "--only {word}: that run gave up on {there}, not on this machine ({host}); --any-host replays the runs of every machine"
        ))
    })
}

/// Each pending run with its options, checked before any runs.
fn prepared(
    args: &[OsString],
    config: &Config,
    shown: &std::path::Path,
    pending: Vec<Pending>,
) -> Result<Vec<Run>, ReplayRefusal> {
    let now = crate::argv::option_words(
        args,
        &["replay", "dry-run", "only", "only-label", "all", "any-host"],
    );
    let log_file = config
        .log
        .file
        .as_deref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
    let history = config.history.as_deref().map(place_from_here);
    pending
        .into_iter()
        .map(|p| configure(shown, p, &now, log_file.as_deref(), history.as_deref()))
        .collect()
}

/// `--replay redis://... --dry-run`: the fleet's pending runs on stdout.
fn list(config: &Config, address: &RedisAddress, runs: &[FleetRun<'_>]) -> ExitStatus {
    let json = config.log.format == crate::config::LogFormat::Json;
    let mut out = io::stdout().lock();
    let shown = address.to_string();
    match fleet_list(&mut out, &shown, runs, json, config.charset).and_then(|()| out.flush()) {
        Ok(()) => ExitStatus::Success,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitStatus::Success,
        Err(e) => {
            eprintln!("retry: cannot write the list: {e}");
            ExitStatus::Usage
        }
    }
}
