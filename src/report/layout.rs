//! What the dry run and the simulation show alike, rendered once: the header (a title, then
//! one `  label: text` line per fact, the policy's among them), the aligned table, and the
//! fields that open their JSON header.

use std::ffi::OsString;
use std::io::{self, Write};

use crate::config::Config;
use crate::report::json::Obj;
use crate::report::policy_text::{describe_policy, policy_json};
use crate::text::{self, Charset};

/// The opening lines: a title, then the facts, each on a line of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    title: String,
    lines: Vec<String>,
}

impl Header {
    pub fn new(title: impl Into<String>) -> Header {
        Header {
            title: title.into(),
            lines: Vec::new(),
        }
    }

    /// A labelled fact, `  policy:  …`: the texts line up after the longest label.
    pub fn field(mut self, label: &str, text: impl AsRef<str>) -> Header {
        let label = format!("{label}:");
        // At least one space after the label, however long.
        let width = label.len().max(8) + 1;
        self.lines
            .push(format!("  {label:<width$}{}", text.as_ref()));
        self
    }

    /// A labelled fact when there is one.
    pub fn field_if(self, label: &str, text: Option<String>) -> Header {
        match text {
            Some(text) => self.field(label, text),
            None => self,
        }
    }

    /// The command, quoted as a shell reads it back in `charset`, with `note` after it;
    /// nothing without one.
    pub fn command(self, command: &[OsString], charset: Charset, note: &str) -> Header {
        let text = (!command.is_empty()).then(|| text::command_line(command, charset) + note);
        self.field_if("command", text)
    }

    /// The policy in one line; with `each_jitter`, its jitter left to each row of a table.
    pub fn policy(self, config: &Config, each_jitter: bool) -> Header {
        self.field("policy", policy_line(config, each_jitter))
    }

    /// The seed, and how to get the same `what` (`waits`, `figures`) again.
    pub fn seed(self, seed: u64, what: &str) -> Header {
        self.field(
            "seed",
            format!("{seed} (pass --seed {seed} to get these {what} again)"),
        )
    }

    /// A line of its own under the facts.
    pub fn line(mut self, text: impl AsRef<str>) -> Header {
        self.lines.push(format!("  {}", text.as_ref()));
        self
    }

    /// The header as lines of text.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.title.as_str()).chain(self.lines.iter().map(String::as_str))
    }

    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        self.lines().try_for_each(|line| writeln!(out, "{line}"))
    }
}

/// The policy in one line (`describe_policy`); with `each_jitter` the jitter is left out, as
/// each row of `--compare`'s table has its own.
pub fn policy_line(config: &Config, each_jitter: bool) -> String {
    let mut policy = describe_policy(config);
    if each_jitter {
        if let Some(cut) = policy.rfind(", jitter ") {
            policy.truncate(cut);
        }
        policy += ", each jitter in turn";
    }
    policy
}

/// A table: the header, then a line per row, each column as wide as its widest cell and two
/// spaces apart; the first `left` columns (names) aligned left, the rest (numbers) right.
pub fn table<S: AsRef<str>>(header: &[&str], rows: &[Vec<S>], left: usize) -> Vec<String> {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].as_ref().chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cols: &mut dyn Iterator<Item = &str>| {
        cols.zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut lines = vec![line(&mut header.iter().copied())];
    for row in rows {
        lines.push(line(&mut row.iter().map(AsRef::as_ref)));
    }
    lines
}

/// The first fields of a JSON header: the event, the command and the policy with the seed.
pub fn json_start(event: &str, config: &Config, seed: u64) -> Obj {
    Obj::new()
        .str("event", event)
        .words("command", config.command.iter().map(|w| w.as_os_str()))
        .obj("policy", policy_json(config, seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_line_up_after_the_longest_label() {
        let header = Header::new("retry: title")
            .command(&[], Charset::Utf8, " (not run)")
            .field("policy", "3 tries")
            .field_if("stagger", None)
            .field_if("quota", Some("q".into()))
            .seed(7, "waits")
            .line("each try is assumed to take no time");
        let lines: Vec<&str> = header.lines().collect();
        assert_eq!(
            lines,
            [
                "retry: title",
                "  policy:  3 tries",
                "  quota:   q",
                "  seed:    7 (pass --seed 7 to get these waits again)",
                "  each try is assumed to take no time",
            ]
        );
        let command =
            Header::new("t").command(&["make".into(), "a b".into()], Charset::Utf8, " (not run)");
        assert_eq!(
            command.lines().nth(1),
            Some("  command: make 'a b' (not run)")
        );
    }

    #[test]
    fn names_align_left_and_numbers_right() {
        let rows = vec![vec!["none", "12"], vec!["decorrelated", "3"]];
        assert_eq!(
            table(&["jitter", "tries"], &rows, 1),
            [
                "jitter        tries",
                "none             12",
                "decorrelated      3",
            ]
        );
        assert_eq!(table(&["a", "b"], &rows[..1], 0), ["   a   b", "none  12"]);
    }
}
