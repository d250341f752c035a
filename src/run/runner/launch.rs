//! Starting the command as a try, with fresh plumbing: as execvp does, a file without `#!`
//! that the kernel cannot run is taken for a script, and run with `/bin/sh`.

use std::ffi::OsString;

use crate::config::Config;
use crate::run::child::resolve;
use crate::run::envfile::EnvVar;
use crate::run::process::{Child, SpawnError, SpawnOptions};
use crate::run::runner::watch::Watch;
use crate::run::stdio::TryIo;

/// Starts the command of `config` as the try, with fresh plumbing in `io` and the try's
/// environment `env`.
pub fn spawn_command(
    watch: &mut Watch,
    config: &Config,
    env: &[EnvVar],
    io: &mut TryIo,
) -> anyhow::Result<Result<Child, SpawnError>> {
    let command = &config.command;
    match spawn_try(watch, config, command, env, io)? {
        Err(e) if e.wants_shell() => match resolve(&command[0]) {
            Ok(path) => {
                let mut script = vec![OsString::from("/bin/sh"), path.into_os_string()];
                script.extend(command[1..].iter().cloned());
                spawn_try(watch, config, &script, env, io)
            }
            Err(_) => Ok(Err(e)),
        },
        spawned => Ok(spawned),
    }
}

/// Starts `command` as the try, with fresh plumbing in `io`.
fn spawn_try(
    watch: &mut Watch,
    config: &Config,
    command: &[OsString],
    env: &[EnvVar],
    io: &mut TryIo,
) -> anyhow::Result<Result<Child, SpawnError>> {
    let (stdio, try_io) = watch.stdio.start_try()?;
    *io = try_io;
    Ok(Child::spawn(SpawnOptions {
        stdio,
        command,
        env,
        foreground: config.foreground,
        terminal: watch.job.for_try(),
        dispositions: watch.signals.dispositions(),
    }))
}
