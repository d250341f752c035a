//! What `--replay` prints (spec 17): a line before and after each run it replays and a
//! summary at the end, in the log; with `--dry-run`, the list of pending runs on stdout.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

use crate::report::event::Event;
use crate::report::json::Obj;
use crate::report::jsonlog::head;
use crate::report::log::RunFacts;
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

/// The human line of a replay's event, if any: `-q` keeps only a summary with runs still
/// pending.
pub fn line(event: &Event, quiet: bool) -> Option<String> {
    match event {
        Event::ReplayStart { k, total, pending } if !quiet => {
            let p = pending.as_ref();
            Some(format!(
                "replaying run {k}/{total} (line {}, run {}, gave up {}: {}): {}",
                p.line,
                p.record.id,
                p.record.ts,
                gave_up(p),
                command_line(&p.record.command)
            ))
        }
        Event::ReplayEnd {
            k, total, replayed, ..
        } if !quiet => Some(match replayed {
            Replayed::Resolved { .. } => format!("run {k}/{total} resolved"),
            Replayed::Failed { .. } => format!("run {k}/{total} still pending"),
            Replayed::NotRun { error, .. } => format!("run {k}/{total} still pending: {error}"),
        }),
        Event::ReplaySummary {
            file,
            resolved,
            pending,
        } if !quiet || *pending > 0 => {
            let file = shown(file);
            Some(match (resolved, pending) {
                (0, 0) => format!("replay of {file}: nothing was pending"),
                (r, p) => format!("replay of {file}: {r} resolved, {p} still pending"),
            })
        }
        _ => None,
    }
}

/// The JSON object of a replay's event.
pub fn object(event: &Event, facts: &RunFacts) -> Option<Obj> {
    let obj = match event {
        Event::ReplayStart { k, total, pending } => {
            let p = pending.as_ref();
            head("replay", facts)
                .num("run", *k as u64)
                .num("of", *total as u64)
                .num("line", p.line as u64)
                .str("id", &p.record.id)
                .words("command", p.record.command.iter().map(OsString::as_os_str))
        }
        Event::ReplayEnd {
            k,
            pending,
            replayed,
            ..
        } => {
            let obj = head("replayed", facts)
                .num("run", *k as u64)
                .str("id", &pending.record.id)
                .str(
                    "result",
                    match replayed {
                        Replayed::Resolved { .. } => "resolved",
                        _ => "pending",
                    },
                );
            match replayed {
                Replayed::NotRun { error, .. } => obj.str("error", error),
                _ => obj,
            }
        }
        Event::ReplaySummary {
            file,
            resolved,
            pending,
        } => head("replay_end", facts)
            .str("file", &file.to_string_lossy())
            .num("resolved", *resolved as u64)
            .num("pending", *pending as u64),
        _ => return None,
    };
    Some(obj)
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
