//! What `--replay` prints (spec 17): a line before and after each run it replays and a
//! summary at the end, in the log; with `--dry-run`, the list of pending runs on stdout.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

use crate::report::json::Obj;
use crate::report::log::Log;
use crate::report::{command_line, printable};
use crate::store::deadletter::{Pending, Replayed};

/// `'/path/to/file'`, as the lines show the dead-letter file.
fn shown(file: &Path) -> String {
    crate::report::quote(file.as_os_str())
}

/// How the run of `p` gave up: `tries, exit 3`, with the replays that failed since.
fn gave_up(p: &Pending) -> String {
    let mut text = format!("{}, exit {}", p.record.reason, p.record.exit_code);
    match p.attempts {
        0 => {}
        1 => text += ", replayed once",
        n => text += &format!(", replayed {n} times"),
    }
    text
}

impl Log {
    /// Replaying run `k` of `total`, `p`.
    pub fn replay_start(&mut self, k: usize, total: usize, p: &Pending) {
        if self.json {
            let obj = self
                .event("replay")
                .num("run", k as u64)
                .num("of", total as u64)
                .num("line", p.line as u64)
                .str("id", &p.record.id)
                .words("command", p.record.command.iter().map(OsString::as_os_str));
            self.emit(obj);
        } else if !self.quiet {
            self.human(format!(
                "replaying run {k}/{total} (line {}, run {}, gave up {}: {}): {}",
                p.line,
                p.record.id,
                p.record.ts,
                gave_up(p),
                command_line(&p.record.command)
            ));
        }
    }

    /// What replaying run `k` of `total` came to.
    pub fn replay_end(&mut self, k: usize, total: usize, p: &Pending, replayed: &Replayed) {
        if self.json {
            let mut obj = self
                .event("replayed")
                .num("run", k as u64)
                .str("id", &p.record.id)
                .str(
                    "result",
                    match replayed {
                        Replayed::Resolved { .. } => "resolved",
                        _ => "pending",
                    },
                );
            if let Replayed::NotRun { error, .. } = replayed {
                obj = obj.str("error", error);
            }
            self.emit(obj);
            return;
        }
        if self.quiet {
            return;
        }
        let line = match replayed {
            Replayed::Resolved { .. } => format!("run {k}/{total} resolved"),
            Replayed::Failed { .. } => format!("run {k}/{total} still pending"),
            Replayed::NotRun { error, .. } => format!("run {k}/{total} still pending: {error}"),
        };
        self.human(line);
    }

    /// The end of a replay of `file`: how many runs it resolved, how many are still pending.
    /// Under `-q`, only when some are.
    pub fn replay_summary(&mut self, file: &Path, resolved: usize, pending: usize) {
        if self.json {
            let obj = self
                .event("replay_end")
                .str("file", &file.to_string_lossy())
                .num("resolved", resolved as u64)
                .num("pending", pending as u64);
            self.emit(obj);
            return;
        }
        if self.quiet && pending == 0 {
            return;
        }
        let file = shown(file);
        self.human(match (resolved, pending) {
            (0, 0) => format!("replay of {file}: nothing was pending"),
            (r, p) => format!("replay of {file}: {r} resolved, {p} still pending"),
        });
    }
}

/// The pending runs of `file`, for `--replay FILE --dry-run`: a line each (id, when it gave
/// up, why, its command) after a heading, or with `json` one JSON object each.
pub fn pending_list(
    out: &mut impl Write,
    file: &Path,
    pending: &[Pending],
    json: bool,
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
                .num("attempts", p.attempts)
                .words("command", r.command.iter().map(OsString::as_os_str));
            writeln!(out, "{}", obj.finish())?;
        }
        return Ok(());
    }
    let file = shown(file);
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
            command_line(&p.record.command)
        );
        writeln!(out, "{}", printable(&line))?;
    }
    Ok(())
}
