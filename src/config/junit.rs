//! `--junit FILE` beside the other files of a run (docs/ci.md#junit-reports): the report replaces
//! FILE when the run ends, so FILE cannot be one that another option writes to or reads.

use crate::cli::Cli;
use crate::store::open::same_file;
use crate::text::printable;

/// The usage error of `--junit` naming the file of the log, of `--dead-letter`, `--history` or
/// `--replay` (the same file by another path too): the report would take its place.
pub fn same_file_as_another(cli: &Cli) -> Result<(), String> {
    let Some(junit) = &cli.junit else {
        return Ok(());
    };
    for (option, path) in [
        ("--log-file", &cli.log_file),
        ("--dead-letter", &cli.dead_letter),
        ("--history", &cli.flaky.history),
        ("--replay", &cli.replay),
    ] {
        if let Some(path) = path.as_ref().filter(|p| same_file(junit, p)) {
            return Err(format!(
                "--junit '{}' and {option} '{}' name the same file: the report would replace it",
                printable(&junit.display().to_string()),
                printable(&path.display().to_string())
            ));
        }
    }
    Ok(())
}
