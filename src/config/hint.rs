//! Hints toward what was meant, for the mistakes people make on the command line: a long
//! option spelt with the letter of a short one (`--n`), a number where the command starts
//! (`retry 5 -- cmd`), and the options of Debian's `retry`, a different program of the same
//! name (README.md, "Coming from Debian's retry").

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::cli;

/// What Debian's `retry` is called in a hint about one of its options.
const DEBIAN: &str = "an option of Debian's retry, another program";

/// The hint for clap's error `e` on the command line `args` (the program name first), to
/// write in place of clap's own suggestions; `None` where clap's are as good.
pub fn for_error(e: &clap::Error, args: &[OsString]) -> Option<String> {
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.as_str(),
        _ => return None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument => unknown(arg, args),
        ErrorKind::ValueValidation => {
            let value = match e.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(value)) => value.as_str(),
                _ => return None,
            };
            bad_value(arg, value, args)
        }
        _ => None,
    }
}

/// `retry 5 -- cmd`: a whole number where the command starts, with no `--` before it, was
/// meant as the number of tries. The usage error that says so, if it is that; `command` is the
/// command as parsed, whose first word is the one to look at.
pub fn for_command(args: &[OsString], command: &[OsString]) -> Option<String> {
    let is_number = |word: &str| !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit());
    // Reading where the command starts builds the whole definition again: only a command
    // that starts with a number needs it.
    if !command
        .first()
        .and_then(|w| w.to_str())
        .is_some_and(is_number)
    {
        return None;
    }
    let word = crate::argv::unmarked_command(args)?.to_str()?;
    if !is_number(word) {
        return None;
    }
    Some(format!(
        "'{word}' is taken for the command, as the first word that is not an option (did you mean -n {word}?)"
    ))
}

/// An option `retry` does not have, as clap names it (`--n`, `-u`, `--until`).
fn unknown(arg: &str, args: &[OsString]) -> Option<String> {
    match arg {
        "--until" | "-u" => Some(until(value_of(args, "until", 'u').as_deref())),
        "--while" | "-w" => Some(while_(value_of(args, "while", 'w').as_deref())),
        "--times" => {
            let n = value_of(args, "times", 't')
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .unwrap_or_else(|| "N".into());
            Some(format!(
                "{DEBIAN}: did you mean -n {n}? -t here is the timeout of each try"
            ))
        }
        "--message" => Some(format!(
            "{DEBIAN}: did you mean --label NAME, which names the run in the log?"
        )),
        long => one_letter(long.strip_prefix("--")?),
    }
}

/// `--n`: the short option of that letter, not the long name nearest to one letter (clap
/// would offer `--on-retry`).
fn one_letter(name: &str) -> Option<String> {
    let mut letters = name.chars();
    let (Some(letter), None) = (letters.next(), letters.next()) else {
        return None;
    };
    let command = cli::command();
    let found = command
        .get_arguments()
        .find(|a| a.get_short() == Some(letter))
        .and_then(|a| a.get_long());
    Some(match found {
        Some(long) => format!("did you mean -{letter}/--{long}?"),
        None => "retry --help lists the options".to_string(),
    })
}

/// A value that its option refused: `-d 1,2,4` (Debian's list of waits) and `-m TEXT`
/// (Debian's message).
fn bad_value(arg: &str, value: &str, args: &[OsString]) -> Option<String> {
    let option = arg.split(' ').next()?;
    match option {
        "--delay" if value.contains(',') => {
            Some(format!("did you mean --delays {}?", delays(value)))
        }
        "--max-delay" if crate::argv::given_by_short(args, "max-delay") => Some(format!(
            "-m is --max-delay here; -m TEXT is {DEBIAN}: did you mean --label NAME?"
        )),
        _ => None,
    }
}

/// Debian's `-d 1,2,4`, in seconds, as `--delays` reads it: `1s,2s,4s`; escaped, as the value
/// may hold a line break.
fn delays(value: &str) -> String {
    let list = value
        .split(',')
        .map(|item| {
            let item = item.trim();
            match item.parse::<f64>() {
                Ok(_) => format!("{item}s"),
                Err(_) => item.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    crate::text::printable(&list)
}

/// What Debian's `--until` and `--while` compare the exit status with: `success` or `true`,
/// `fail` or `false`, or exit codes and ranges.
enum Criteria {
    Success,
    Fail,
    Codes(String),
    Unknown,
}

fn criteria(value: Option<&str>) -> Criteria {
    let Some(value) = value else {
        return Criteria::Unknown;
    };
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    let is = |words: &[&str]| items.iter().all(|i| words.contains(i));
    if is(&["fail", "false"]) {
        return Criteria::Fail;
    }
    // Exit 0 is a success to `retry` whatever the lists say, and cannot be listed.
    if is(&["success", "true", "0"]) {
        return Criteria::Success;
    }
    let code = |i: &&str| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    if items.iter().all(code) {
        let codes: Vec<&str> = items.into_iter().filter(|i| *i != "0").collect();
        return Criteria::Codes(codes.join(","));
    }
    Criteria::Unknown
}

/// Debian's `--until CRITERIA`: repeat until the exit status meets them.
fn until(value: Option<&str>) -> String {
    let what = match criteria(value) {
        Criteria::Success => "retry stops at the first success already: leave it out".into(),
        Criteria::Fail => "did you mean --repeat 0, which runs until a try fails?".into(),
        Criteria::Codes(codes) => format!("did you mean --success-on {codes}?"),
        Criteria::Unknown => {
            "did you mean --success-on LIST, or --until-output REGEX for what a try prints?".into()
        }
    };
    format!("{DEBIAN}: {what}")
}

/// Debian's `--while CRITERIA`: repeat while the exit status meets them.
fn while_(value: Option<&str>) -> String {
    let what = match criteria(value) {
        Criteria::Fail => "retry already tries again while the command fails: leave it out".into(),
        Criteria::Success => "did you mean --repeat 0, which runs until a try fails?".into(),
        Criteria::Codes(codes) => format!("did you mean --retry-on {codes}?"),
        Criteria::Unknown => "did you mean --retry-on LIST?".into(),
    };
    format!("{DEBIAN}: {what}")
}

/// The value given to the option `--long` or `-short` that `retry` does not have, as Debian's
/// `retry` reads it: `--long=VALUE`, `--long VALUE`, `-sVALUE` or `-s VALUE`, among the words
/// before `--`.
fn value_of(args: &[OsString], long: &str, short: char) -> Option<String> {
    let words: Vec<&str> = args
        .get(1..)?
        .iter()
        .map_while(|w| w.to_str())
        .take_while(|w| *w != "--")
        .collect();
    let (long, short) = (format!("--{long}"), format!("-{short}"));
    words.iter().enumerate().find_map(|(k, w)| {
        if *w == long || *w == short {
            return words.get(k + 1).map(|v| v.to_string());
        }
        let attached = w
            .strip_prefix(&format!("{long}="))
            .or_else(|| w.strip_prefix(&short).filter(|_| !w.starts_with("--")));
        attached.map(|v| v.strip_prefix('=').unwrap_or(v).to_string())
    })
}

/// Clap's suggestions (`did you mean --timeout?`), or a pointer to `--help` for an unknown
/// option without one. Clap's other tips ("to pass '-x' as a value, use '-- -x'") would make
/// retry run `-x` as the command: left out.
pub(super) fn suggestions(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let mut out = String::new();
    for kind in [ContextKind::SuggestedArg, ContextKind::SuggestedValue] {
        let suggestions = match e.get(kind) {
            Some(ContextValue::String(s)) => vec![s.clone()],
            Some(ContextValue::Strings(v)) => v.clone(),
            _ => Vec::new(),
        };
        if !suggestions.is_empty() {
            out += &format!(" (did you mean {}?)", suggestions.join(" or "));
        }
    }
    if e.kind() == clap::error::ErrorKind::UnknownArgument && out.is_empty() {
        out += " (retry --help lists the options)";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<OsString> {
        std::iter::once("retry")
            .chain(ws.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn the_value_of_an_unknown_option_is_read_in_every_spelling() {
        for ws in [
            &["--until", "fail", "--", "x"][..],
            &["--until=fail", "x"],
            &["-u", "fail", "x"],
            &["-ufail", "x"],
            &["-u=fail", "x"],
        ] {
            assert_eq!(
                value_of(&words(ws), "until", 'u').as_deref(),
                Some("fail"),
                "{ws:?}"
            );
        }
        assert_eq!(
            value_of(&words(&["--", "--until", "fail"]), "until", 'u'),
            None
        );
    }

    #[test]
    fn debian_criteria_become_the_options_that_mean_them() {
        assert!(until(Some("3,5-7")).ends_with("did you mean --success-on 3,5-7?"));
        assert!(until(Some("0,3")).ends_with("did you mean --success-on 3?"));
        assert!(until(Some("0")).contains("leave it out"));
        assert!(until(Some("false")).contains("--repeat 0"));
        assert!(until(Some("success")).contains("leave it out"));
        assert!(while_(Some("1-5")).ends_with("did you mean --retry-on 1-5?"));
        assert!(while_(Some("fail,false")).contains("leave it out"));
        assert!(while_(Some("true")).contains("--repeat 0"));
        assert!(while_(None).contains("--retry-on LIST"));
    }

    #[test]
    fn debian_delays_in_seconds_are_written_with_their_unit() {
        assert_eq!(delays("1,2,4"), "1s,2s,4s");
        assert_eq!(delays("0.5, 2m,x"), "0.5s,2m,x");
        assert!(!delays("1,2\nretry: forged").contains('\n'));
    }

    #[test]
    fn a_hint_never_breaks_the_one_line() {
        let now = std::time::SystemTime::now();
        for ws in [
            &["--times", "3\nretry: forged", "x"][..],
            &["-d", "1,\nretry: forged", "x"],
            &["--until", "3\n", "x"],
            &["--while=1\n", "x"],
        ] {
            match crate::config::parse(words(ws), now) {
                crate::config::ParseOutcome::Usage(e) => assert!(!e.0.contains('\n'), "{e}"),
                other => panic!("{ws:?}: {other:?}"),
            }
        }
    }
}
