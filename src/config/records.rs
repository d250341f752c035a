//! The options that manage recorded runs (docs/dead-letters.md#picking-forgetting-pruning):
//! what `--replay` picks, `--forget` and `--prune`, and the rule that a record option's value is
//! a file, never a URL read as a path.

use std::path::Path;

use crate::cli::Cli;
use crate::store::place::Place;
use crate::store::redis::server::quotes;
use crate::text::printable;

/// Which pending runs a replay takes: all of them unless `--only` or `--only-label` picks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Picks {
    /// `--only`: ids or unique prefixes of them.
    pub only: Vec<String>,
    /// `--only-label`: a shell pattern the run's label matches.
    pub only_label: Option<String>,
    /// `--all` (with `--dry-run`): the runs resolved or forgotten are listed too.
    pub all: bool,
    /// `--any-host`: a replay from Redis takes the fleet's runs, not only this machine's.
    pub any_host: bool,
}

impl Picks {
    pub fn of(cli: &Cli) -> Picks {
        Picks {
            only: cli.records.only.clone(),
            only_label: cli.records.only_label.clone(),
            all: cli.records.all,
            any_host: cli.records.any_host,
        }
    }

    /// Whether every pending run is taken.
    pub fn everything(&self) -> bool {
        self.only.is_empty() && self.only_label.is_none()
    }
}

/// The usage error of a record option given a URL it does not take: taken as a path,
/// `redis://host/name` would make a directory named `redis:` where the run stands. The dead
/// letters (`--dead-letter`, `--replay`, `--forget`, `--prune`) may be kept on Redis, and their
/// `redis://` URL must then read as one. The URL is shown without its password.
pub fn no_url_as_a_path(cli: &Cli) -> Result<(), String> {
    for (option, path) in [
        ("--dead-letter", &cli.dead_letter),
        ("--replay", &cli.replay),
        ("--forget", &cli.records.forget),
        ("--prune", &cli.records.prune),
        ("--history", &cli.flaky.history),
        ("--stats", &cli.flaky.stats),
    ] {
        let Some(path) = path.as_deref() else {
            continue;
        };
        let place = match option {
            "--replay" => Place::of_replay(path).map(|(place, _)| place),
            _ => Place::of(path),
        };
        match place {
            Ok(Place::Redis(_)) => {}
            Ok(Place::File(_)) => {
                if let Some(url) = url(path) {
                    return Err(refusal(
                        option,
                        &url,
                        &format!("a URL here must be {}", crate::redis_url::FORMS),
                    ));
                }
            }
            Err(why) => {
                let shown = url(path).unwrap_or_default();
                // The parser's words may quote what was hidden: then they are not shown, but
                // what they say of the rest of the URL is (a name with a space, a bad port).
                let why = match hidden(path)
                    .is_some_and(|secret| !secret.is_empty() && quotes(&why, secret.as_bytes()))
                {
                    false => printable(&why),
                    true => format!("expected {}", crate::redis_url::FORMS),
                };
                return Err(format!("{option} '{shown}': {why}"));
            }
        }
    }
    for (option, path) in [("--log-file", &cli.log_file), ("--junit", &cli.junit)] {
        if let Some(url) = path.as_deref().and_then(url) {
            return Err(refusal(
                option,
                &url,
                &format!("{option} takes a FILE, not a URL"),
            ));
        }
    }
    let on_redis = |p: &Option<std::path::PathBuf>| {
        p.as_deref()
            .is_some_and(|p| matches!(Place::of_replay(p), Ok((Place::Redis(_), _))))
    };
    if cli.records.any_host && !on_redis(&cli.replay) {
        return Err("--any-host goes with --replay redis://HOST[:PORT]/NAME: a file holds one machine's runs (see --help)".into());
    }
    Ok(())
}

/// The line refusing the URL `url` given to `option`: why, and how to name a file so named.
fn refusal(option: &str, url: &str, why: &str) -> String {
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    format!("{option} '{url}': {why} (for a file of that name, write ./{scheme}:...)")
}

/// `path` as a URL to show (`scheme://` and what follows, any `USER:PASSWORD@` hidden), when
/// it starts as one does: letters, digits, `+`, `-` or `.` after a letter, then `://`.
fn url(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    let (scheme, rest) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let starts = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) {
        return None;
    }
    // What comes before an '@' is a user and password; without one, a ':' that no port
    // follows (`redis://:secret/x`, the '@' forgotten) may start a password too.
    let authority = rest.split('/').next().unwrap_or_default();
    let port_only = |a: &str| {
        a.rsplit_once(':')
            .is_none_or(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
    };
    let rest = match rest.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None if !port_only(authority) => format!("***{}", &rest[authority.len()..]),
        None => rest.to_string(),
    };
    Some(printable(&format!("{scheme}://{rest}")))
}

/// What [`url`] hides of a URL: its user and password (or what may be a password), if any.
fn hidden(path: &Path) -> Option<String> {
    let rest = path.to_str()?.split_once("://")?.1;
    if let Some((secret, _)) = rest.rsplit_once('@') {
        return Some(secret.to_string());
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let port_only = authority
        .rsplit_once(':')
        .is_none_or(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()));
    (!port_only).then(|| authority.to_string())
}

/// Whether a record option's value names a store on Redis, which keeps its dead letters and its
/// history under keys of their own: never one file with another option's.
pub fn on_redis(value: &Path) -> bool {
    matches!(Place::of(value), Ok(Place::Redis(_)))
}

/// The words after the options, where the mode gives them a meaning: `--forget` takes the ids
/// it forgets, `--prune` none.
pub fn check_words(cli: &Cli) -> Result<(), String> {
    if cli.records.forget.is_some() && cli.command.is_empty() {
        return Err(
            "--forget FILE needs the ids of the runs to forget, or all: retry --forget FILE ID... (see --help)"
                .into(),
        );
    }
    if cli.records.prune.is_some() {
        for (option, given) in [
            ("--history", cli.flaky.history.is_some()),
            ("--dead-letter", cli.dead_letter.is_some()),
        ] {
            if given {
                return Err(format!(
                    "--prune takes its store as its value, and uses no {option}: retry --prune FILE --older-than DURATION (see --help)"
                ));
            }
        }
    }
    if cli.records.prune.is_some() && !cli.command.is_empty() {
        return Err(
            "--prune rewrites its FILE and runs nothing: it takes no command (see --help)".into(),
        );
    }
    Ok(())
}

/// `--dead-letter` or `--replay`, and `--history`, naming one file
/// (docs/files.md#files-that-outlive-a-run): each would take the other's lines for damaged ones.
pub fn same_record_file(cli: &Cli) -> Result<(), String> {
    let (option, letters) = match &cli.replay {
        Some(file) => ("--replay", Some(file)),
        None => ("--dead-letter", cli.dead_letter.as_ref()),
    };
    let (Some(letters), Some(history)) = (letters, &cli.flaky.history) else {
        return Ok(());
    };
    if !crate::store::open::same_file(letters, history) || on_redis(letters) {
        return Ok(());
    }
    Err(format!(
        "{option} '{}' and --history '{}' name the same file: each would find the other's lines damaged",
        printable(&letters.display().to_string()),
        printable(&history.display().to_string())
    ))
}

/// `--metrics` naming the file of another option (the same file by another path too): the
/// metrics would replace its lines, or be refused as damaged by it.
pub fn metrics_beside_another(cli: &Cli) -> Result<(), String> {
    let Some(metrics) = &cli.metrics else {
        return Ok(());
    };
    let others = [
        ("--log-file", &cli.log_file),
        ("--dead-letter", &cli.dead_letter),
        ("--history", &cli.flaky.history),
        ("--replay", &cli.replay),
        ("--junit", &cli.junit),
    ];
    let then = "each would take the other's place";
    super::junit::same_file_as("--metrics", metrics, &others, then)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistake_in_a_url_with_a_password_is_told_without_the_password() {
        let cli = |value: &str| {
            Cli::try_parse_from(
                ["retry", "--dead-letter", value, "--", "true"],
                crate::cli::Reading::Again,
            )
            .unwrap()
        };
        let e = no_url_as_a_path(&cli("redis://:sekret-pass@h/a b")).unwrap_err();
        assert!(e.contains("contains ' '"), "{e}");
        assert!(!e.contains("sekret"), "{e}");
        let e = no_url_as_a_path(&cli("redis://:sekret-pass@h:99999/jobs")).unwrap_err();
        assert!(
            !e.contains("sekret") && !e.contains("expected redis://"),
            "{e}"
        );
    }

    #[test]
    fn a_url_is_shown_without_its_password_and_a_path_is_no_url() {
        let shown = |p: &str| url(Path::new(p));
        assert_eq!(
            shown("redis://:s3cret@host:6379/jobs").as_deref(),
            Some("redis://***@host:6379/jobs")
        );
        assert_eq!(
            shown("redis://host/jobs").as_deref(),
            Some("redis://host/jobs")
        );
        assert_eq!(shown("./redis://host/jobs"), None);
        assert_eq!(shown("/var/lib/retry/dead.jsonl"), None);
        assert_eq!(shown("1http://x"), None);
        assert_eq!(
            shown("redis://:pw-leak/x").as_deref(),
            Some("redis://***/x")
        );
        assert_eq!(
            shown("redis://h:6379/x").as_deref(),
            Some("redis://h:6379/x")
        );
    }
}
