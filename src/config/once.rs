//! `--once` and `--once-for` (docs/processes.md#once-only): the key a run looks up and claims,
//! as `--lock`'s lock is taken, bound to the digest of the command line; and the rule that a
//! period needs a key to keep done.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::cli::Cli;
use crate::policy::lock::{DEFAULT_ONCE_FOR, LockSpec, OnceSpec, is_path};

/// The lock of `--lock`, or the claim of `--once` as a lock with its key's period and command;
/// `--once-for` without `--once`, or a period of 0, is a usage error.
pub fn lock_or_once(cli: &Cli) -> Result<Option<LockSpec>, String> {
    let Some(key) = &cli.once else {
        if let Some((_, written)) = &cli.once_for {
            return Err(format!(
                "'--once-for {written}' needs --once KEY: it is how long the key stays done"
            ));
        }
        return super::lock::lock(cli);
    };
    if let Some((_, written)) = &cli.lock_wait {
        return Err(format!(
            "'--lock-wait {written}' needs --lock NAME: a run of --once's key being run is \
             turned away at once"
        ));
    }
    let within = match &cli.once_for {
        Some((period, written)) if period.is_zero() => {
            return Err(format!(
                "'--once-for {written}': a key kept done for no time would run the command every \
                 time; give a period, such as 24h"
            ));
        }
        Some((period, _)) => *period,
        None => DEFAULT_ONCE_FOR,
    };
    if key.lease.is_none() && is_path(&key.name) {
        super::lock::beside_another(cli, "--once", Path::new(&key.name), "the key's")?;
    }
    Ok(Some(LockSpec {
        name: key.name.clone(),
        wait: std::time::Duration::ZERO,
        lease: key.lease.clone(),
        once: Some(OnceSpec {
            within,
            command: digest(&cli.command),
        }),
    }))
}

/// The SHA-256 of the command line, each word followed by a NUL, in hexadecimal.
fn digest(command: &[std::ffi::OsString]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for word in command {
        context.update(word.as_bytes());
        context.update(&[0]);
    }
    context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_tells_the_words_of_a_command_apart() {
        let of = |words: &[&str]| digest(&words.iter().map(Into::into).collect::<Vec<_>>());
        assert_eq!(of(&["echo", "ab"]).len(), 64);
        assert_ne!(of(&["echo", "ab"]), of(&["echo", "a", "b"]));
        assert_eq!(of(&["true"]), of(&["true"]));
    }
}
