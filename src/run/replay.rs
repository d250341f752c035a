//! `retry --replay FILE` (docs/dead-letters.md#dead-letters-and-replay): runs again, one after
//! another, the runs of a dead-letter file that are still pending, each through the same runner as
//! any run, and appends to the file what became of each.
//!
//! The file is locked first, then read once: a second replay of it meanwhile ends at once, and
//! a run that gives up while the replay goes on is appended after the lines read, and waits
//! for the next replay. A run is marked resolved only after it succeeded, so a replay killed
//! between the success and that line runs it once more next time: at least once, never lost. The run keeps its recorded id as
//! `RETRY_RUN_ID`, which a command can use as an idempotency key against that.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

use crate::config::{self, Config, Mode, ParseOutcome};
use crate::exit::ExitStatus;
use crate::policy::{GiveUp, Signal};
use crate::report::event::{Event, Failure, Warning};
use crate::report::junit::{ReplayCases, ReplayJunit};
use crate::report::printable;
use crate::report::replay::pending_list;
use crate::report::replay::{OptionsProblem, ReplayRefusal};
use crate::report::words::replay_refusal;
use crate::run::claims::Claims;
use crate::run::clock::Moment;
use crate::run::keep::Kept;
use crate::run::runner::RunEnd;
use crate::run::setup::{check_junit, open_log, run_again, run_id};
use crate::run::signals::Signals;
use crate::run::stderr::Stderr;
use crate::store::deadletter::{self, Listing, Pending, ReadError, Replayed};
use crate::store::fleet::{Claim, Settled};
use crate::store::record;
use crate::text::Charset;

/// Replays the pending runs of `file`; `args` is the whole command line, whose options
/// override those each run recorded.
pub fn replay(args: &[OsString], config: &Config, file: &Path) -> ExitStatus {
    // Each run is replayed in its own directory: the file is named from here once and for all.
    let file = absolute(file);
    // Locked until the replay ends, and taken before the file is read: two replays never both
    // read a run as pending. A dry run runs nothing, and holds nothing.
    let locked = match hold(&file, config.is_dry_run()) {
        Ok(locked) => locked,
        Err(refusal) => return usage(&refusal),
    };
    let (runs, cut_short, unpicked) = match prepare(args, config, &file, locked.as_ref()) {
        Ok(prepared) => prepared,
        Err(refusal) => return usage(&refusal),
    };
    if config.is_dry_run() {
        for warning in &cut_short {
            let text = crate::report::words::warning_text(warning);
            eprintln!("retry: warning: {}", printable(&text));
        }
        let pending: Vec<Pending> = runs.into_iter().map(|(p, _)| p).collect();
        return list(config, &file, &pending);
    }
    // Started before the first run, so that every run finds it below retry already.
    let guard = crate::run::watchdog::Guard(crate::run::watchdog::Watchdog::start().ok());
    let ledger = Ledger::File(file.clone(), Rc::new(RefCell::new(guard)));
    run_replay(config, ledger, &file, &runs, cut_short, unpicked)
}

/// Runs the replay of `runs`, recording what became of each in `ledger`; `shown` names the
/// source in the log.
pub(crate) fn run_replay(
    config: &Config,
    ledger: Ledger,
    shown: &Path,
    runs: &[Run],
    warnings: Vec<Warning>,
    unpicked: usize,
) -> ExitStatus {
    let stderr = Stderr::new();
    let mut log = match open_log(config, &run_id(), Moment::now(), &stderr) {
        Ok(log) => log,
        Err(status) => return status,
    };
    let junit = match &config.junit {
        Some(path) => match check_junit(path, &mut log) {
            Ok(()) => {
                let shared = ReplayCases::default();
                log = log.with_sink(Box::new(ReplayJunit::new(path, shared.clone())));
                Some(shared)
            }
            Err(status) => return status,
        },
        None => None,
    };
    for warning in warnings {
        log.warn(warning);
    }
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            log.emit(Event::Error(Failure::SignalHandlers(e.to_string())));
            return ExitStatus::Usage;
        }
    };
    Replay {
        file: shown.to_path_buf(),
        ledger,
        log,
        resolved: 0,
        pending: 0,
        tries: 0,
        flaky: false,
        junit,
        named: matches!(&config.mode, Mode::Replay { picks, .. } if !picks.everything()),
        unpicked,
        stderr,
    }
    .run_all(runs, signals)
}

/// Where a replay records what became of each run, and how it takes one to run.
pub(crate) enum Ledger {
    /// The dead-letter file: the replay holds it, so every pending run is its own; its
    /// watchdog stops the run under way if the replay dies without warning (the hold ends with
    /// it, and the next replay would run the run again beside it).
    File(PathBuf, Kept),
    /// The fleet's store on Redis: each run is claimed before it runs, and its lease renewed
    /// while it runs (`run/claims.rs`).
    Fleet(Rc<RefCell<Claims>>),
}

/// What taking a run to run it came to.
enum Taken {
    /// This replay runs it; a fleet's lease on it is renewed as it runs. The replay whose
    /// lease on it lapsed without being let go is named, if one did.
    Mine(Option<Kept>, Option<String>),
    /// Another replay holds it, or settled it since it was listed: it is not this one's.
    Not(String),
}

impl Ledger {
    /// Takes the run `p` to run it.
    fn claim(&mut self, p: &Pending) -> Result<Taken, String> {
        let claims = match self {
            Ledger::File(_, guard) => return Ok(Taken::Mine(Some(guard.clone()), None)),
            Ledger::Fleet(claims) => claims,
        };
        let claim = claims.borrow_mut().claim(p)?;
        Ok(match claim {
            Claim::Granted { lapsed, .. } => {
                let kept: Kept = claims.clone();
                Taken::Mine(Some(kept), lapsed)
            }
            Claim::ClaimedByAnother(by) => Taken::Not(format!("another replay runs it now ({by})")),
            Claim::Settled => Taken::Not("it was resolved or forgotten since it was listed".into()),
            Claim::Replayed => {
                Taken::Not("another replay ran it since it was listed, and it failed again".into())
            }
            Claim::Gone => Taken::Not("a prune dropped it since it was listed".into()),
        })
    }

    /// Why the claim on the run under way was lost, if it was: then nothing is recorded of it.
    fn lost(&self) -> Option<String> {
        match self {
            Ledger::File(..) => None,
            Ledger::Fleet(claims) => claims.borrow().lost().map(str::to_string),
        }
    }

    /// Records what became of the run `p`: `false` when it was forgotten meanwhile (the forget
    /// stands, and nothing is recorded); `Err` when it cannot be recorded, or when the claim on
    /// it was lost (another replay holds it: what this one did is not recorded).
    fn record(&mut self, p: &Pending, replayed: &Replayed) -> Result<bool, String> {
        match self {
            Ledger::File(file, _) => record::append(
                file,
                &deadletter::replayed_line(&p.record.id, replayed),
                record::LOCK_WAIT,
            )
            .map(|()| true)
            .map_err(|e| e.to_string()),
            Ledger::Fleet(claims) => {
                let resolved = matches!(replayed, Replayed::Resolved { .. });
                match claims.borrow_mut().settle(&p.record.id, resolved)? {
                    Settled::Done | Settled::Gone => Ok(true),
                    Settled::Forgotten => Ok(false),
                    Settled::Lost => Err(format!(
                        "the claim on run {} was lost: another replay holds it now, and what this replay did is not recorded",
                        p.record.id
                    )),
                }
            }
        }
    }

    /// The replay ends: the runs it replayed that failed again are let go, pending for the
    /// next replay. A replay killed before this leaves them to the end of their leases.
    fn finish(&mut self) -> Result<(), String> {
        match self {
            Ledger::File(..) => Ok(()),
            Ledger::Fleet(claims) => claims.borrow_mut().release_all(),
        }
    }
}

/// A pending run, and the options it is replayed with.
pub(crate) type Run = (Pending, Config);

/// A usage error of the replay, on its one line: status 125.
pub(crate) fn usage(refusal: &ReplayRefusal) -> ExitStatus {
    eprintln!("retry: {}", printable(&replay_refusal(refusal)));
    ExitStatus::Usage
}

/// Whether `e`, met opening `file`, says only that no run has written it yet: the file is not
/// there, but its directory is (a path through a directory that is not there is a mistake,
/// told as one).
fn not_yet_made(file: &Path, e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound && file.parent().is_some_and(Path::is_dir)
}

/// Takes the replay's hold on `file` (none for a dry run), or the line that says why not. A
/// file not yet made holds nothing to replay: no run has given up since it was named
/// (`--dead-letter` makes it at the first), so there is nothing to hold either.
fn hold(file: &Path, dry_run: bool) -> Result<Option<File>, ReplayRefusal> {
    if dry_run {
        return Ok(None);
    }
    match deadletter::hold_for_replay(file) {
        Err(deadletter::Hold::Io(e)) if not_yet_made(file, &e) => return Ok(None),
        locked => locked,
    }
    .map(Some)
    .map_err(|why| {
        let file = file.to_path_buf();
        match why {
            deadletter::Hold::Busy => ReplayRefusal::Busy { file },
            deadletter::Hold::Refused(r) => ReplayRefusal::Untrusted {
                file,
                why: r.to_string(),
            },
            deadletter::Hold::Io(e) => ReplayRefusal::Unopened {
                file,
                append: e.kind() != io::ErrorKind::NotFound,
                why: e.to_string(),
            },
        }
    })
}

/// The pending runs of `file`, each with its options checked (for a dry run too: it says what
/// a replay would do), and the warnings of the lines cut short; or the one line that says why
/// the file cannot be replayed.
fn prepare(
    args: &[OsString],
    config: &Config,
    file: &Path,
    locked: Option<&File>,
) -> Result<(Vec<Run>, Vec<Warning>, usize), ReplayRefusal> {
    let Listing { pending, cut_short } = load(file, locked, config)?;
    let listed = pending.len();
    let pending = picked(file, pending, config)?;
    let unpicked = listed - pending.len();
    let cut_short = cut_short
        .iter()
        .map(|&line| Warning::LineCutShort {
            path: file.to_path_buf(),
            line,
        })
        .collect();
    // What picks the runs, and the mode, are the replay's own: the runs it replays get the rest.
    let now = crate::argv::option_words(args, &["replay", "dry-run", "only", "only-label", "all"]);
    // A --log-file or --history given now names a file from here, not from each run's
    // directory.
    let log_file = config.log.file.as_deref().map(absolute);
    let history = config.history.as_deref().map(place_from_here);
    let runs = pending
        .into_iter()
        .map(|p| configure(file, p, &now, log_file.as_deref(), history.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((runs, cut_short, unpicked))
}

/// What `file` holds (the replay holding it as `locked`), or the one line that says why it
/// cannot be replayed.
fn load(file: &Path, locked: Option<&File>, config: &Config) -> Result<Listing, ReplayRefusal> {
    let file = file.to_path_buf();
    let all = matches!(&config.mode, Mode::Replay { picks, .. } if picks.all);
    match deadletter::read_listing(&file, locked, record::LOCK_WAIT, all) {
        // No run has given up since the file was named: nothing is pending.
        Err(ReadError::Io(e)) if not_yet_made(&file, &e) => {
            return Ok(Listing::default());
        }
        read => read,
    }
    .map_err(|e| match e {
        ReadError::Io(e) => ReplayRefusal::Unread {
            file,
            why: e.to_string(),
        },
        ReadError::Damaged(d) => ReplayRefusal::Damaged {
            file,
            line: d.line,
            why: d.why.to_string(),
        },
    })
}

/// The runs of `listed` that `--only` and `--only-label` pick, in the order recorded: all of
/// them when neither is given. An `--only` that names no pending run, or more than one, is
/// the refusal, before anything runs.
pub(crate) fn picked(
    file: &Path,
    listed: Vec<Pending>,
    config: &Config,
) -> Result<Vec<Pending>, ReplayRefusal> {
    let Mode::Replay { picks, .. } = &config.mode else {
        return Ok(listed);
    };
    if picks.everything() {
        return Ok(listed);
    }
    // Ids are picked among the pending runs only: a run resolved or forgotten is no replay's.
    let ids = || {
        listed
            .iter()
            .filter(|p| p.state == deadletter::State::Pending)
            .map(|p| p.record.id.as_str())
    };
    let mut named = vec![false; listed.len()];
    for word in &picks.only {
        let k = crate::store::pick::one(word, ids()).map_err(|e| ReplayRefusal::Unpicked {
            file: file.to_path_buf(),
            why: e.to_string(),
        })?;
        let id = ids().nth(k).map(str::to_string);
        if let Some(at) = listed
            .iter()
            .position(|p| Some(&p.record.id) == id.as_ref())
        {
            named[at] = true;
        }
    }
    let by_label = |p: &Pending| match (&picks.only_label, &p.record.label) {
        (None, _) => true,
        (Some(glob), Some(label)) => crate::store::pick::glob(glob, label),
        (Some(_), None) => false,
    };
    Ok(listed
        .into_iter()
        .zip(named)
        .filter(|(p, named)| (picks.only.is_empty() || *named) && by_label(p))
        .map(|(p, _)| p)
        .collect())
}

/// `--replay FILE --dry-run`: lists the pending runs on stdout, and runs nothing. It exits 0
/// whatever is pending: runs pending are what a listing is asked for, not an error of it.
fn list(config: &Config, file: &Path, pending: &[Pending]) -> ExitStatus {
    let json = config.log.format == crate::config::LogFormat::Json;
    let status = ExitStatus::Success;
    let mut out = io::stdout().lock();
    match pending_list(&mut out, file, pending, json, config.charset).and_then(|()| out.flush()) {
        Ok(()) => status,
        // A reader that has seen enough (`| head`) is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => status,
        Err(e) => {
            eprintln!("retry: cannot write the list: {e}");
            ExitStatus::Usage
        }
    }
}

/// The options of the pending run `p`: those it recorded, overridden by those given now
/// (`now`). Every run is checked before any runs, so that options that do not go together
/// are a usage error, not a run that fails halfway through the replay.
pub(crate) fn configure(
    file: &Path,
    p: Pending,
    now: &[OsString],
    log_file: Option<&Path>,
    history: Option<&Path>,
) -> Result<(Pending, Config), ReplayRefusal> {
    let refused = |problem| ReplayRefusal::Options {
        file: file.to_path_buf(),
        line: p.line,
        problem,
    };
    // The recorded words as they are must read as options (a file edited by hand).
    crate::argv::merged(&p.record.options, now)
        .map_err(|e| refused(OptionsProblem::Unmerged(e.to_string())))?;
    // A replay runs its records one after another: the --stagger a run recorded spread a
    // fleet's arrivals, and is not waited again; one given to the replay is.
    let mut recorded = vec![OsString::from("retry")];
    recorded.extend(p.record.options.iter().cloned());
    let recorded = crate::argv::option_words(&recorded, &[crate::cli::id::STAGGER]);
    let mut args = vec![OsString::from("retry")];
    let merged = crate::argv::merged(&recorded, now)
        .map_err(|e| refused(OptionsProblem::Unmerged(e.to_string())))?;
    args.extend(merged);
    args.push(OsString::from("--"));
    args.extend(p.record.command.iter().cloned());
    match config::parse(args, SystemTime::now()) {
        ParseOutcome::Run(config) if config.is_dry_run() => Err(refused(OptionsProblem::DryRun)),
        ParseOutcome::Run(config) if config.mode != Mode::Run => {
            Err(refused(OptionsProblem::OtherMode))
        }
        ParseOutcome::Run(mut config) => {
            if let Some(path) = log_file {
                config.log.file = Some(path.to_path_buf());
            }
            if let Some(path) = history {
                config.history = Some(path.to_path_buf());
            }
            Ok((p, *config))
        }
        ParseOutcome::Usage(e) => Err(refused(OptionsProblem::Usage(e.to_string()))),
        ParseOutcome::Info(_) => Err(refused(OptionsProblem::Info)),
    }
}

/// A replay under way: where it writes, and what it has done so far.
struct Replay {
    file: PathBuf,
    ledger: Ledger,
    log: crate::report::log::Log,
    resolved: usize,
    pending: usize,
    /// The tries of the runs replayed so far, and whether one resolved needed more than one.
    tries: u64,
    flaky: bool,
    /// With `--junit`, where each run hands its case to the replay's report.
    junit: Option<ReplayCases>,
    /// The runs were named (`--only`, `--only-label`): one that another replay holds is told
    /// of, and counted as still pending.
    named: bool,
    /// The pending runs of the source this replay did not take: not picked by `--only` or
    /// `--only-label`, or another machine's.
    unpicked: usize,
    /// `retry`'s own standard error, which the replay and every run it runs write to.
    stderr: Stderr,
}

/// What replaying one run came to: what the replay records of it, whether it was flaky (as
/// its outcome says), and the signal that stopped it (then the replay stops too).
struct Again {
    replayed: Replayed,
    flaky: bool,
    stopped_by: Option<Signal>,
}

impl Replay {
    /// Runs the pending run `p` again in its directory, with its options `config`, writing to the
    /// replay's standard error: what became of it, and the signal handling back.
    fn run_one(
        &self,
        p: &Pending,
        config: &Config,
        signals: Signals,
        keeper: Option<Kept>,
    ) -> (Again, Signals) {
        if let Err(error) = enter(p, config.charset) {
            let not_run = Replayed::NotRun {
                reason: "cwd".into(),
                error,
            };
            let again = Again {
                replayed: not_run,
                flaky: false,
                stopped_by: None,
            };
            return (again, signals);
        }
        let junit = self.junit.as_ref();
        let end = run_again(config, &p.record.id, signals, junit, keeper, &self.stderr);
        let again = Again {
            replayed: replayed(&end),
            flaky: end.outcome.flaky() && end.received.is_none(),
            stopped_by: end.signal(),
        };
        (again, end.signals)
    }

    /// The end of the replay, in the log and the step outputs: the status it exits with.
    fn summary(&mut self, status: ExitStatus) -> ExitStatus {
        if let Err(why) = self.ledger.finish() {
            self.log.emit(Event::Error(Failure::ReplayNotRecorded {
                path: self.file.clone(),
                why,
            }));
        }
        self.log.emit(Event::ReplaySummary {
            file: self.file.clone(),
            resolved: self.resolved,
            pending: self.pending,
            tries: self.tries,
            flaky: self.flaky,
            status,
            unpicked: self.unpicked,
        });
        status
    }

    /// Runs every pending run in order; stops at an interrupt, or when the file can no longer
    /// be appended to (what would be run could not be recorded).
    fn run_all(mut self, runs: &[Run], mut signals: Signals) -> ExitStatus {
        let total = runs.len();
        for (k, (p, config)) in runs.iter().enumerate() {
            // A stopping signal between two runs: no further run starts, nor is claimed.
            if let Some(signal) = signals.pending_stop() {
                self.pending += total - k;
                return self.summary(ExitStatus::Reraise(signal));
            }
            let keeper = match self.ledger.claim(p) {
                Ok(Taken::Mine(keeper, lapsed)) => {
                    // The replay that claimed it before stopped renewing its lease: it died, or
                    // was stopped or cut off, and a try it started may still be running.
                    if let Some(owner) = lapsed {
                        self.log.warn(Warning::ClaimLapsed {
                            id: p.record.id.clone(),
                            owner,
                        });
                    }
                    keeper
                }
                // Another replay runs it, or ran it: it is not this one's to count, unless it
                // was named: then the replay says why it did not run it.
                Ok(Taken::Not(why)) => {
                    if self.named {
                        self.pending += 1;
                        self.log.warn(Warning::ReplaySkipped {
                            id: p.record.id.clone(),
                            why,
                        });
                    }
                    continue;
                }
                Err(why) => return self.not_recorded(why, total - k),
            };
            self.log.emit(Event::ReplayStart {
                k: k + 1,
                total,
                pending: Box::new(p.clone()),
            });
            let (again, kept) = self.run_one(p, config, signals, keeper);
            signals = kept;
            // The claim was lost while the run ran (the replay was stopped or cut off from
            // Redis past its lease): another replay holds the run, and this one ends.
            if let Some(why) = self.ledger.lost() {
                return self.not_recorded(why, total - k);
            }
            let Again {
                replayed,
                flaky,
                stopped_by,
            } = again;
            // A signal before its first try started: it did not run, and no attempt is counted.
            let ran = !matches!(replayed, Replayed::Failed { tries: 0, .. });
            if stopped_by.is_none() || ran {
                match self.ledger.record(p, &replayed) {
                    Ok(true) => {}
                    // Forgotten meanwhile: not this replay's to count, nor to report.
                    Ok(false) => {
                        self.log.warn(Warning::ReplayForgotten {
                            id: p.record.id.clone(),
                        });
                        if let Some(signal) = stopped_by {
                            self.pending += total - k - 1;
                            return self.summary(ExitStatus::Reraise(signal));
                        }
                        continue;
                    }
                    Err(why) => return self.not_recorded(why, total - k),
                }
            }
            self.count(&replayed, flaky);
            self.log.emit(Event::ReplayEnd {
                k: k + 1,
                total,
                pending: Box::new(p.clone()),
                replayed: replayed.clone(),
            });
            if let Some(signal) = stopped_by {
                // Interrupted: no further run starts, and retry ends as the run did.
                self.pending += total - k - 1;
                return self.summary(ExitStatus::Reraise(signal));
            }
        }
        let status = match self.pending {
            0 => ExitStatus::Success,
            _ => ExitStatus::LastExit(1),
        };
        self.summary(status)
    }

    /// The replay's end when what became of a run cannot be recorded: `left` runs are still
    /// pending, that one among them.
    fn not_recorded(&mut self, why: String, left: usize) -> ExitStatus {
        self.log.emit(Event::Error(Failure::ReplayNotRecorded {
            path: self.file.clone(),
            why,
        }));
        self.pending += left;
        self.summary(ExitStatus::Usage)
    }

    /// Counts what a replayed run came to; `flaky` as its outcome says (a late success that
    /// --flaky fail failed stays pending, and was flaky all the same).
    fn count(&mut self, replayed: &Replayed, flaky: bool) {
        self.flaky |= flaky;
        match *replayed {
            Replayed::Resolved { tries } => {
                self.resolved += 1;
                self.tries += tries;
            }
            Replayed::Failed { tries, .. } => {
                self.pending += 1;
                self.tries += tries;
            }
            Replayed::NotRun { .. } => self.pending += 1,
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A record option's value given to a replay, named from where the replay starts: a file's
/// path made absolute, a `redis://` URL as it is.
pub(crate) fn place_from_here(value: &Path) -> PathBuf {
    match crate::store::place::Place::of(value) {
        Ok(crate::store::place::Place::Redis(_)) => value.to_path_buf(),
        _ => absolute(value),
    }
}

/// Enters the run's directory; the reason it cannot, if it cannot.
fn enter(p: &Pending, charset: Charset) -> Result<(), String> {
    let Some(cwd) = &p.record.cwd else {
        return Err("its directory was unknown when it gave up".into());
    };
    std::env::set_current_dir(cwd).map_err(|e| {
        format!(
            "cannot enter its directory {}: {e}",
            crate::text::quote(cwd, charset)
        )
    })
}

/// What the replayed run that ended as `end` came to: a signal after its outcome was made stopped it.
fn replayed(end: &RunEnd) -> Replayed {
    let outcome = &end.outcome;
    let tries = outcome.tries.counted;
    let status = end.status();
    if status == ExitStatus::Success {
        return Replayed::Resolved { tries };
    }
    let reason = match end.received {
        Some(_) => GiveUp::Interrupted.word(),
        None => outcome.pending_reason(),
    };
    Replayed::Failed {
        exit_code: u64::try_from(status.code()).unwrap_or_default(),
        reason: reason.to_string(),
        tries,
    }
}
