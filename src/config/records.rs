//! The options that manage recorded runs (docs/dead-letters.md#picking-forgetting-pruning):
//! what `--replay` picks, `--forget` and `--prune`, and the rule that a record option's value is
//! a file, never a URL read as a path.

use std::path::Path;

use crate::cli::Cli;
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
}

impl Picks {
    pub fn of(cli: &Cli) -> Picks {
        Picks {
            only: cli.records.only.clone(),
            only_label: cli.records.only_label.clone(),
            all: cli.records.all,
        }
    }

    /// Whether every pending run is taken.
    pub fn everything(&self) -> bool {
        self.only.is_empty() && self.only_label.is_none()
    }
}

/// The usage error of a record option given a URL (`redis://host/name`): taken as a path, it
/// would make a directory named `redis:` where the run stands. The URL is shown without its
/// password.
pub fn no_url_as_a_path(cli: &Cli) -> Result<(), String> {
    for (option, path) in [
        ("--dead-letter", &cli.dead_letter),
        ("--replay", &cli.replay),
        ("--forget", &cli.records.forget),
        ("--prune", &cli.records.prune),
        ("--history", &cli.flaky.history),
        ("--stats", &cli.flaky.stats),
        ("--log-file", &cli.log_file),
        ("--junit", &cli.junit),
    ] {
        let Some(url) = path.as_deref().and_then(url) else {
            continue;
        };
        return Err(format!(
            "{option} '{url}': {option} takes a FILE, and this is a URL; retry keeps no records \
             on a server for {option} (for a file of that name, write ./{scheme}:...)",
            scheme = url.split_once(':').map_or("", |(s, _)| s),
        ));
    }
    Ok(())
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
    let rest = match rest.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => rest.to_string(),
    };
    Some(printable(&format!("{scheme}://{rest}")))
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
    if cli.records.prune.is_some() && !cli.command.is_empty() {
        return Err(
            "--prune rewrites its FILE and runs nothing: it takes no command (see --help)".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
