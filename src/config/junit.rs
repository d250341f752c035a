//! `--junit FILE` beside the other files of a run (docs/ci.md#junit-reports): the report replaces
//! FILE when the run ends, so FILE cannot be one that another option writes to or reads.

use std::path::{Path, PathBuf};

use crate::cli::Cli;
use crate::store::open::same_file;
use crate::text::printable;

/// The usage error of `--junit` naming the file of the log, of `--dead-letter`, `--history` or
/// `--replay` (the same file by another path too): the report would take its place.
pub fn same_file_as_another(cli: &Cli) -> Result<(), String> {
    let Some(junit) = &cli.junit else {
        return Ok(());
    };
    let others = [
        ("--log-file", &cli.log_file),
        ("--dead-letter", &cli.dead_letter),
        ("--history", &cli.flaky.history),
        ("--replay", &cli.replay),
    ];
    same_file_as("--junit", junit, &others, "the report would replace it")
}

/// The usage error of `option`, whose `file` is replaced when the run ends, naming the file of
/// one of `others` (the same file by another path too): `then` says what would follow.
pub fn same_file_as(
    option: &str,
    file: &Path,
    others: &[(&str, &Option<PathBuf>)],
    then: &str,
) -> Result<(), String> {
    for (other, path) in others {
        if let Some(path) = path.as_ref().filter(|p| same_file(file, p)) {
            return Err(format!(
                "{option} '{}' and {other} '{}' name the same file: {then}",
                printable(&file.display().to_string()),
                printable(&path.display().to_string())
            ));
        }
    }
    Ok(())
}
