//! What `--replay` prints (docs/dead-letters.md#dead-letters-and-replay): a line before and after
//! each run it replays and a summary at the end, in the log; with `--dry-run`, the list of pending
//! runs on stdout.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::report::json::Obj;
use crate::report::printable;
use crate::store::deadletter::{Pending, State};
use crate::text::{self, Charset};

/// `'/path/to/file'`, as the lines show the dead-letter file.
pub fn shown(file: &Path, charset: Charset) -> String {
    text::quote(file.as_os_str(), charset)
}

/// How the run of `p` gave up: `3 tries, exit 1 (tries)`, with the replays that failed since.
pub fn gave_up(p: &Pending) -> String {
    let r = &p.record;
    let tries = match r.tries {
        1 => "1 try".to_string(),
        n => format!("{n} tries"),
    };
    let mut text = format!("{tries}, exit {} ({})", r.exit_code, r.reason);
    match p.attempts {
        0 => {}
        1 => text += ", replayed once",
        n => text += &format!(", replayed {n} times"),
    }
    text
}

/// The pending runs of `file`, for `--replay FILE --dry-run`: a line each (id, when it gave
/// up, why, its command) after a heading, or with `json` one JSON object each.
pub fn pending_list(
    out: &mut impl Write,
    file: &Path,
    pending: &[Pending],
    json: bool,
    charset: Charset,
) -> io::Result<()> {
    if json {
        for p in pending {
            let r = &p.record;
            let obj = Obj::new()
                .str("event", "pending")
                .num("line", p.line as u64)
                .str("id", &r.id)
                .str("ts", &r.ts)
                .str("reason", &r.reason)
                .num("exit_code", r.exit_code)
                .num("tries", r.tries)
                .num("attempts", p.attempts)
                .str("state", p.state.word());
            let obj =
                labelled(obj, &r.label).words("command", r.command.iter().map(OsString::as_os_str));
            writeln!(out, "{}", obj.finish())?;
        }
        return Ok(());
    }
    let file = shown(file, charset);
    let settled = pending.iter().any(|p| p.state != State::Pending);
    let waiting = pending.iter().filter(|p| p.state == State::Pending).count();
    match waiting {
        0 => writeln!(out, "nothing pending in {file}")?,
        1 => writeln!(out, "1 run pending in {file}:")?,
        n => writeln!(out, "{n} runs pending in {file}:")?,
    }
    for p in pending {
        // With --all, the runs settled are listed too, each marked with its state.
        let state = match (settled, p.state) {
            (false, _) => String::new(),
            (true, state) => format!("{:<9}  ", state.word()),
        };
        let line = format!(
            "{state}{}  {}  {}  {}{}",
            p.record.id,
            p.record.ts,
            gave_up(p),
            label(p),
            text::command_line(&p.record.command, charset)
        );
        writeln!(out, "{}", printable(&line))?;
    }
    Ok(())
}

/// A run of a fleet's store, as its listing shows it: where it ran, and the replay that holds
/// it now (`CONSUMER EXPIRES_MS`), if one does.
pub struct FleetRun<'a> {
    pub pending: &'a Pending,
    pub host: &'a str,
    pub claim: Option<&'a str>,
}

/// The fleet's pending runs, for `--replay redis://... --dry-run`: a line each (id, host, when
/// it gave up, why, its command, and the replay running it now), or with `json` one object each.
pub fn fleet_list(
    out: &mut impl Write,
    store: &str,
    runs: &[FleetRun<'_>],
    json: bool,
    charset: Charset,
) -> io::Result<()> {
    // A claim is listed while its lease is live: the replay that holds the run.
    let claimed_by = |r: &FleetRun<'_>| r.claim.map(str::to_string);
    if json {
        for r in runs {
            let p = r.pending;
            let obj = Obj::new()
                .str("event", "pending")
                .str("id", &p.record.id)
                .str("host", r.host)
                .str("ts", &p.record.ts)
                .str("reason", &p.record.reason)
                .num("exit_code", p.record.exit_code)
                .num("tries", p.record.tries)
                .num("attempts", p.attempts)
                .str("state", p.state.word());
            let obj = match claimed_by(r) {
                Some(who) => obj.str("claimed_by", &who),
                None => obj.raw("claimed_by", "null"),
            };
            let obj = labelled(obj, &p.record.label)
                .words("command", p.record.command.iter().map(OsString::as_os_str));
            writeln!(out, "{}", obj.finish())?;
        }
        return Ok(());
    }
    let waiting = runs
        .iter()
        .filter(|r| r.pending.state == State::Pending)
        .count();
    match waiting {
        0 => writeln!(out, "nothing pending in {store}")?,
        1 => writeln!(out, "1 run pending in {store}:")?,
        n => writeln!(out, "{n} runs pending in {store}:")?,
    }
    for r in runs {
        let p = r.pending;
        let mut line = format!(
            "{}  {}  {}  {}  {}{}",
            p.record.id,
            r.host,
            p.record.ts,
            gave_up(p),
            label(p),
            text::command_line(&p.record.command, charset)
        );
        if p.state != State::Pending {
            line = format!("{:<9}  {line}", p.state.word());
        }
        if let Some(who) = claimed_by(r) {
            line += &format!("  (being replayed by {who})");
        }
        writeln!(out, "{}", printable(&line))?;
    }
    Ok(())
}

/// The run's `--label` as a listing shows it before the command, `[LABEL]  `, as the log
/// names the run; nothing for a run without one.
fn label(p: &Pending) -> String {
    match &p.record.label {
        Some(label) => format!("[{label}]  "),
        None => String::new(),
    }
}

/// `obj` with the run's `label`, or `null`.
fn labelled(obj: Obj, label: &Option<String>) -> Obj {
    match label {
        Some(label) => obj.str("label", label),
        None => obj.raw("label", "null"),
    }
}

/// What went wrong with a file, in a user's words rather than the system's
/// (`No such file or directory (os error 2)`), for the one line of `--forget` and `--prune`.
pub fn trouble(e: &std::io::Error) -> String {
    use nix::libc;
    let words = match e.raw_os_error() {
        Some(libc::ENOENT) => "there is no such file",
        Some(libc::ENOSPC) => "the disk is full",
        Some(libc::EDQUOT) => "the user's disk quota is used up",
        Some(libc::EFBIG) => "the file would pass the limit on a file's size (ulimit -f)",
        Some(libc::EROFS) => "the file system is read-only",
        Some(libc::EACCES | libc::EPERM) => "permission denied",
        Some(libc::EIO) => "the disk failed to read or write (an I/O error)",
        _ => {
            let text = e.to_string();
            return match text.rsplit_once(" (os error ") {
                Some((words, _)) => words.to_string(),
                None => text,
            };
        }
    };
    words.to_string()
}

/// What `--forget` did: `forgot 2 runs of 'FILE'; 3 still pending`, or with `json` one object.
pub fn forgot(
    file: &Path,
    forgotten: &[String],
    left: usize,
    json: bool,
    charset: Charset,
) -> String {
    if json {
        return Obj::new()
            .str("event", "forgotten")
            .str("file", &file.to_string_lossy())
            .num("forgotten", forgotten.len() as u64)
            .num("pending", left as u64)
            .words("ids", forgotten.iter().map(std::ffi::OsStr::new))
            .finish();
    }
    let runs = |n: usize| match n {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    format!(
        "forgot {} of {}; {} still pending",
        runs(forgotten.len()),
        shown(file, charset),
        left
    )
}

/// What `--prune` did: what it dropped and kept, or with `json` one object.
pub fn pruned(
    file: &Path,
    p: &crate::store::prune::Pruned,
    json: bool,
    charset: Charset,
) -> String {
    use crate::store::prune::Kind;
    let what = match p.kind {
        Kind::DeadLetters => "dead_letters",
        Kind::History => "history",
        Kind::Empty => "empty",
    };
    if json {
        return Obj::new()
            .str("event", "pruned")
            .str("file", &file.to_string_lossy())
            .str("kind", what)
            .num("resolved", p.resolved)
            .num("forgotten", p.forgotten)
            .num("old", p.old)
            .num("kept", p.kept)
            .num("kept_unread", p.kept_unread)
            .num("cut_short", p.cut_short)
            .num("appended_meanwhile", p.appended)
            .num("appended_runs", p.appended_runs)
            .finish();
    }
    let file = shown(file, charset);
    let mut text = match p.kind {
        Kind::Empty => return format!("pruned {file}: it is empty"),
        Kind::DeadLetters => format!(
            "pruned {file}: dropped {} resolved, {} forgotten and {} pending that gave up before the limit; kept {} pending",
            p.resolved, p.forgotten, p.old, p.kept
        ),
        Kind::History => format!(
            "pruned {file}: dropped {} runs that ended before the limit; kept {}",
            p.old, p.kept
        ),
    };
    match (p.kind, p.kept_unread) {
        (_, 0) => {}
        (Kind::DeadLetters, n) => {
            text += &format!(", and {n} pending whose time it could not read");
        }
        (_, n) => text += &format!(", and {n} lines it could not read, as they were"),
    }
    if p.cut_short > 0 {
        text += &format!("; dropped {} lines cut short", p.cut_short);
    }
    text
}

/// Why a dead-letter file cannot be replayed, as a value: `words::replay_refusal` words it,
/// on the one line of a usage error (status 125).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayRefusal {
    /// Another replay of `file` holds it.
    Busy { file: PathBuf },
    /// `file` is not one `retry` trusts (its owner, its mode, its type): why.
    Untrusted { file: PathBuf, why: String },
    /// `file` cannot be opened, or appended to (`append`).
    Unopened {
        file: PathBuf,
        append: bool,
        why: String,
    },
    /// `file` cannot be read.
    Unread { file: PathBuf, why: String },
    /// Line `line` of `file` is damaged: why.
    Damaged {
        file: PathBuf,
        line: usize,
        why: String,
    },
    /// `--only` names no pending run of `file`, or more than one: why.
    Unpicked { file: PathBuf, why: String },
    /// The options of the run on line `line`, merged with those given now, cannot be
    /// replayed.
    Options {
        file: PathBuf,
        line: usize,
        problem: OptionsProblem,
    },
}

/// What is wrong with the options of a run to replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionsProblem {
    /// They cannot be merged with those given now: why.
    Unmerged(String),
    /// They ask for `--dry-run`.
    DryRun,
    /// They ask for `--simulate` or `--replay`.
    OtherMode,
    /// With those given now, they are a usage error: it.
    Usage(String),
    /// They ask for `--help` or `--version`.
    Info,
}
