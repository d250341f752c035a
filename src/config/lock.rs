//! `--lock` and `--lock-wait` (docs/processes.md#one-run-at-a-time): the lock a run takes, and
//! the rule that a wait needs a lock to wait for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::Cli;
use crate::policy::lock::{LockSpec, is_path};

/// The lock the options name, if any; `--lock-wait` without `--lock` is a usage error.
pub fn lock(cli: &Cli) -> Result<Option<LockSpec>, String> {
    if let (Some((_, written)), None) = (&cli.lock_wait, &cli.lock) {
        return Err(format!(
            "'--lock-wait {written}' needs --lock NAME: it is how long a run waits for that lock"
        ));
    }
    if let Some(lock) = cli
        .lock
        .as_ref()
        .filter(|lock| lock.lease.is_none() && is_path(&lock.name))
    {
        beside_another(cli, "--lock", Path::new(&lock.name), "the lock's")?;
    }
    Ok(cli.lock.as_ref().map(|lock| LockSpec {
        name: lock.name.clone(),
        lease: lock.lease.clone(),
        wait: cli
            .lock_wait
            .as_ref()
            .map_or(Duration::ZERO, |(wait, _)| *wait),
        once: None,
    }))
}

/// The usage error of a lock path of `option` (`--lock`, `--once`) that is the file of another
/// option (the same file by another path too), or the lock file of `--metrics`: `whose` record
/// would replace the file's text, or the run would wait on its own lock.
pub(super) fn beside_another(
    cli: &Cli,
    option: &str,
    path: &Path,
    whose: &str,
) -> Result<(), String> {
    let metrics_lock = cli.metrics.as_ref().map(|metrics| {
        let mut name = metrics.clone().into_os_string();
        name.push(".lock");
        PathBuf::from(name)
    });
    let others = [
        ("--log-file", &cli.log_file),
        ("--dead-letter", &cli.dead_letter),
        ("--history", &cli.flaky.history),
        ("--replay", &cli.replay),
        ("--junit", &cli.junit),
        ("--metrics", &cli.metrics),
        ("--metrics's lock file", &metrics_lock),
    ];
    let then = format!("{whose} record would take its place");
    super::junit::same_file_as(option, path, &others, &then)
}
