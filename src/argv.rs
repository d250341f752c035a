//! The options of a command line as words: which words before the command give which option,
//! so that a dead letter can keep the options of its run as they were given
//! (docs/dead-letters.md#dead-letters-and-replay), and a replay can let the options given now
//! override them.
//!
//! The words are read as clap reads them, from the same definition (`cli::command`): a long
//! option takes its value after `=` or as the next word, a cluster of short options (`-qn3`)
//! ends at the first one that takes a value, and `--` or the first word that is not an option
//! starts the command. Only a command line that clap accepted is read here.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use clap::{Arg, Command};

use crate::cli;

/// One option given: its id (its long name) and its value, if it takes one.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Given {
    id: String,
    value: Option<OsString>,
    /// A short option that the definition does not list (clap's own `-V` and `-h`), as
    /// written: it has no long name to be written with.
    unlisted_short: Option<char>,
}

impl Given {
    /// The option in one word, `--NAME` or `--NAME=VALUE`, which clap reads the same
    /// whatever the value holds (a leading `-`, an `=`, nothing at all); a short option the
    /// definition does not list, `-C`, as it was written.
    fn word(&self) -> OsString {
        if let Some(c) = self.unlisted_short {
            return OsString::from(format!("-{c}"));
        }
        let mut word = format!("--{}", self.id).into_bytes();
        if let Some(value) = &self.value {
            word.push(b'=');
            word.extend_from_slice(value.as_bytes());
        }
        OsString::from_vec(word)
    }
}

/// The words of one option, or of one cluster of short options, and what they give.
#[derive(Debug)]
struct Group {
    words: Vec<OsString>,
    given: Vec<Given>,
}

/// Reads `words` (the program name left out) into groups, up to the start of the command.
fn groups(cmd: &Command, words: &[OsString]) -> Vec<Group> {
    let mut groups = Vec::new();
    let mut i = 0;
    while let Some(word) = words.get(i) {
        let bytes = word.as_bytes();
        if bytes == b"--" || !bytes.starts_with(b"-") || bytes == b"-" {
            break;
        }
        let (given, used) = if let Some(long) = bytes.strip_prefix(b"--") {
            read_long(cmd, long, words.get(i + 1))
        } else {
            read_shorts(cmd, &bytes[1..], words.get(i + 1))
        };
        let end = (i + used).min(words.len());
        groups.push(Group {
            words: words[i..end].to_vec(),
            given,
        });
        i = end;
    }
    groups
}

/// `--NAME`, `--NAME=VALUE` or `--NAME VALUE`: what it gives, and how many words it used.
fn read_long(cmd: &Command, long: &[u8], next: Option<&OsString>) -> (Vec<Given>, usize) {
    let (name, attached) = match long.iter().position(|&b| b == b'=') {
        Some(eq) => (&long[..eq], Some(&long[eq + 1..])),
        None => (long, None),
    };
    let name = String::from_utf8_lossy(name).into_owned();
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some(name.as_str()));
    let takes_value = arg.is_some_and(takes_value);
    let id = arg.map_or(name, |a| a.get_id().to_string());
    match (takes_value, attached) {
        (true, Some(value)) => (vec![given(id, Some(value))], 1),
        (true, None) => (vec![given(id, next.map(|v| v.as_bytes()))], 2),
        (false, _) => (vec![given(id, None)], 1),
    }
}

/// A cluster of short options (`-q`, `-n3`, `-n=3`, `-qn 3`): what it gives, and how many
/// words it used.
fn read_shorts(cmd: &Command, cluster: &[u8], next: Option<&OsString>) -> (Vec<Given>, usize) {
    let mut out = Vec::new();
    for (k, &c) in cluster.iter().enumerate() {
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_short() == Some(char::from(c)));
        let Some(arg) = arg else {
            out.push(Given {
                unlisted_short: Some(char::from(c)),
                ..given(char::from(c).to_string(), None)
            });
            continue;
        };
        let id = arg.get_id().to_string();
        if !takes_value(arg) {
            out.push(given(id, None));
            continue;
        }
        let rest = &cluster[k + 1..];
        if rest.is_empty() {
            out.push(given(id, next.map(|v| v.as_bytes())));
            return (out, 2);
        }
        out.push(given(id, Some(rest.strip_prefix(b"=").unwrap_or(rest))));
        return (out, 1);
    }
    (out, 1)
}

fn given(id: String, value: Option<&[u8]>) -> Given {
    Given {
        id,
        value: value.map(|v| OsStr::from_bytes(v).to_os_string()),
        unlisted_short: None,
    }
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

/// The option words of the command line `args` (the program name first), as given, without
/// the options whose ids are in `drop`, and without the `--` before the command.
pub fn option_words(args: &[OsString], drop: &[&str]) -> Vec<OsString> {
    kept_groups(args, drop)
        .into_iter()
        .flat_map(|g| g.words)
        .collect()
}

/// The first word of the command in `args` (the program name first) when no `--` marks where
/// it starts: the first word that is not an option.
pub fn unmarked_command(args: &[OsString]) -> Option<&OsString> {
    let words = args.get(1..)?;
    let options: usize = groups(&cli::command(), words)
        .iter()
        .map(|g| g.words.len())
        .sum();
    words.get(options).filter(|w| w.as_bytes() != b"--")
}

/// Whether the option `id` was given in `args` (the program name first) by its short name, in
/// a word of its own or in a cluster (`-m`, `-qm`).
pub fn given_by_short(args: &[OsString], id: &str) -> bool {
    let words = args.get(1..).unwrap_or_default();
    groups(&cli::command(), words).iter().any(|g| {
        let short = g.words[0].as_bytes().get(..2).is_some_and(|w| w != b"--");
        short && g.given.iter().any(|o| o.id == id)
    })
}

/// The groups of options in `args` (the program name first), but for those of `drop`.
fn kept_groups(args: &[OsString], drop: &[&str]) -> Vec<Group> {
    let cmd = cli::command();
    groups(&cmd, args.get(1..).unwrap_or_default())
        .into_iter()
        .filter(|g| !g.given.iter().all(|o| drop.contains(&o.id.as_str())))
        .collect()
}

/// The options of a run as a dead letter records them: as given, but for `drop`, and with no
/// Redis password in `--quota` (a dead-letter file keeps no secret: a replay that needs the
/// password is given `--quota` again).
pub fn recorded_options(args: &[OsString], drop: &[&str]) -> Vec<OsString> {
    kept_groups(args, drop)
        .into_iter()
        .flat_map(|g| match &g.given[..] {
            // Every option that may name a Redis server: its password is never recorded.
            [o] if o.id == "quota" || o.id == "history" => {
                match o.value.as_deref().and_then(without_password) {
                    Some(value) => vec![
                        Given {
                            id: o.id.clone(),
                            value: Some(value),
                            unlisted_short: None,
                        }
                        .word(),
                    ],
                    None => g.words,
                }
            }
            _ => g.words,
        })
        .collect()
}

/// A `redis://` address without the user and password before its `@`; `None` when it has
/// none to take away.
fn without_password(value: &std::ffi::OsStr) -> Option<OsString> {
    let text = value
        .to_str()
        .filter(|v| crate::redis_url::is_redis_url(v))?;
    let (scheme, rest) = text.split_once("://")?;
    let (_, after) = rest.rsplit_once('@')?;
    Some(OsString::from(format!("{scheme}://{after}")))
}

/// The options of a replayed run: those it recorded, except those that the options given now
/// override (the same option, or one that cannot be used with one of them), then those given
/// now. Each is written as one word, `--NAME=VALUE`, so that a cluster of short options can
/// lose one of its options and keep the others. A recorded word that is neither an option nor
/// its value (a file edited by hand) is an error: it would be dropped, or taken for the command.
pub fn merged(recorded: &[OsString], now: &[OsString]) -> Result<Vec<OsString>, String> {
    let cmd = cli::command();
    let old = groups(&cmd, recorded);
    if old.iter().map(|g| g.words.len()).sum::<usize>() != recorded.len() {
        return Err("its options hold a word that is not an option".into());
    }
    let old: Vec<Given> = old.into_iter().flat_map(|g| g.given).collect();
    let new: Vec<Given> = groups(&cmd, now)
        .into_iter()
        .flat_map(|g| g.given)
        .collect();
    let overridden = |o: &Given| {
        new.iter()
            .any(|n| n.id == o.id || conflict(&cmd, &o.id, &n.id))
    };
    Ok(old
        .iter()
        .filter(|o| !overridden(o))
        .chain(&new)
        .map(Given::word)
        .collect())
}

/// Whether clap refuses the two options together, as declared on either of them.
fn conflict(cmd: &Command, a: &str, b: &str) -> bool {
    let find = |id: &str| cmd.get_arguments().find(|arg| arg.get_id() == id);
    let (Some(x), Some(y)) = (find(a), find(b)) else {
        return false;
    };
    cmd.get_arg_conflicts_with(x)
        .iter()
        .any(|c| c.get_id() == y.get_id())
        || cmd
            .get_arg_conflicts_with(y)
            .iter()
            .any(|c| c.get_id() == x.get_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<OsString> {
        ws.iter().map(OsString::from).collect()
    }

    fn shown(ws: &[OsString]) -> Vec<String> {
        ws.iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_options_stop_where_the_command_starts() {
        let args = words(&["retry", "-n", "2", "-q", "--", "sh", "-c", "exit 3"]);
        assert_eq!(shown(&option_words(&args, &[])), ["-n", "2", "-q"]);
        let args = words(&["retry", "--label=x", "make", "-n", "1"]);
        assert_eq!(shown(&option_words(&args, &[])), ["--label=x"]);
    }

    #[test]
    fn a_value_that_looks_like_an_option_stays_a_value() {
        // `--label --deadline` names the run "--deadline": nothing to drop.
        let args = words(&["retry", "--label", "--deadline", "-d", "--", "x"]);
        assert_eq!(
            shown(&option_words(&args, &["deadline"])),
            ["--label", "--deadline", "-d", "--"]
        );
    }

    #[test]
    fn dropped_options_go_with_their_values_in_either_form() {
        let args = words(&[
            "retry",
            "--deadline",
            "2030-01-01T00:00:00Z",
            "-n3",
            "--dead-letter=f.jsonl",
            "-qd",
            "1s",
            "--",
            "x",
        ]);
        assert_eq!(
            shown(&option_words(&args, &["deadline", "dead-letter"])),
            ["-n3", "-qd", "1s"]
        );
    }

    #[test]
    fn options_given_now_override_the_same_and_conflicting_recorded_ones() {
        let recorded = words(&["-qn", "5", "--delays", "1s,2s", "--label", "a"]);
        let now = words(&["-n", "1", "-v", "-d", "10ms"]);
        assert_eq!(
            shown(&merged(&recorded, &now).unwrap()),
            ["--label=a", "--tries=1", "--verbose", "--delay=10ms"]
        );
        // Values keep every byte, and an empty one stays a value.
        let recorded = vec![
            OsString::from("--log-file"),
            OsString::from_vec(b"l\xff".to_vec()),
        ];
        let merged = merged(&recorded, &words(&["--label="])).unwrap();
        assert_eq!(merged[0].as_bytes(), b"--log-file=l\xff");
        assert_eq!(merged[1], "--label=");
    }

    #[test]
    fn a_short_option_the_definition_does_not_list_is_merged_as_written() {
        // clap's own -V and -h: a replay says they ask for --version or --help, never
        // `unexpected argument '--V'`.
        let merged = merged(&words(&["-V", "-qh"]), &words(&["-n", "1"])).unwrap();
        assert_eq!(shown(&merged), ["-V", "--quiet", "-h", "--tries=1"]);
    }

    #[test]
    fn merged_options_parse_as_clap_reads_them() {
        let recorded = words(&["-n", "5", "-d=-1s", "--stop-on", "2", "-j", "none"]);
        let now = words(&["-n", "1", "--delay", "20ms"]);
        let mut args = words(&["retry"]);
        args.extend(merged(&recorded, &now).unwrap());
        args.extend(words(&["--", "true"]));
        let now_time = std::time::SystemTime::now();
        match crate::config::parse(args, now_time) {
            crate::config::ParseOutcome::Run(c) => {
                assert_eq!(c.policy.max_tries, Some(1));
                assert_eq!(c.policy.waits.delay, std::time::Duration::from_millis(20));
                assert_eq!(c.policy.waits.jitter, crate::policy::Jitter::None);
            }
            other => panic!("{other:?}"),
        }
    }
    #[test]
    fn a_redis_password_is_never_recorded() {
        let args = words(&[
            "retry",
            "-n",
            "2",
            "--quota",
            "redis://:s3cret@127.0.0.1:6379/q",
            "--quota=redis://u:pw@h/q",
            "--",
            "x",
        ]);
        let recorded = shown(&recorded_options(&args, &[]));
        assert!(!recorded.concat().contains("s3cret"), "{recorded:?}");
        assert!(!recorded.concat().contains("pw@"), "{recorded:?}");
        assert!(recorded.contains(&"--quota=redis://127.0.0.1:6379/q".to_string()));
        assert!(recorded.contains(&"--quota=redis://h/q".to_string()));
        let local = words(&["retry", "--quota", "db:ratio=0.2", "--", "x"]);
        assert_eq!(
            shown(&recorded_options(&local, &[])),
            ["--quota", "db:ratio=0.2"]
        );
    }
}
