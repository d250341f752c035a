//! What `--replay` prints (docs/dead-letters.md#dead-letters-and-replay): a line before and after
//! each run it replays and a summary at the end, in the log; with `--dry-run`, the list of pending
//! runs on stdout.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::report::json::Obj;
use crate::report::printable;
use crate::store::deadletter::Pending;
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
                .words("command", r.command.iter().map(OsString::as_os_str));
            writeln!(out, "{}", obj.finish())?;
        }
        return Ok(());
    }
    let file = shown(file, charset);
    match pending.len() {
        0 => writeln!(out, "nothing pending in {file}")?,
        1 => writeln!(out, "1 run pending in {file}:")?,
        n => writeln!(out, "{n} runs pending in {file}:")?,
    }
    for p in pending {
        let line = format!(
            "{}  {}  {}  {}",
            p.record.id,
            p.record.ts,
            gave_up(p),
            text::command_line(&p.record.command, charset)
        );
        writeln!(out, "{}", printable(&line))?;
    }
    Ok(())
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
