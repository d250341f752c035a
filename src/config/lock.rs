//! `--lock` and `--lock-wait` (docs/processes.md#one-run-at-a-time): the lock a run takes, and
//! the rule that a wait needs a lock to wait for.

use std::time::Duration;

use crate::cli::Cli;
use crate::policy::lock::LockSpec;

/// The lock the options name, if any; `--lock-wait` without `--lock` is a usage error.
pub fn lock(cli: &Cli) -> Result<Option<LockSpec>, String> {
    if let (Some((_, written)), None) = (&cli.lock_wait, &cli.lock) {
        return Err(format!(
            "'--lock-wait {written}' needs --lock NAME: it is how long a run waits for that lock"
        ));
    }
    Ok(cli.lock.as_ref().map(|lock| LockSpec {
        name: lock.name.clone(),
        lease: lock.lease.clone(),
        wait: cli
            .lock_wait
            .as_ref()
            .map_or(Duration::ZERO, |(wait, _)| *wait),
    }))
}
