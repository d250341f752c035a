//! The imperative shell: parse, then either print the dry run or run the command for real.

pub mod process;
pub mod runner;
pub mod signals;
pub mod spool;
pub mod stdio;

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, IsTerminal, Write};
use std::time::{Instant, SystemTime};

use crate::config::{self, Config, ParseOutcome};
use crate::exit::ExitStatus;
use crate::report::dryrun;
use crate::report::log::{Log, use_color};

/// Runs `retry` with these arguments (the program name first) and returns how it should end.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> ExitStatus {
    let start = Instant::now();
    let wall_start = SystemTime::now();
    crate::report::charset::init_from_env();
    let config = match config::parse(args, wall_start) {
        ParseOutcome::Run(config) => config,
        ParseOutcome::Info(info) => {
            let _ = info.print();
            return ExitStatus::Success;
        }
        ParseOutcome::Usage(e) => {
            eprintln!("retry: {e}");
            return ExitStatus::Usage;
        }
    };
    let seed = config.seed.unwrap_or_else(rand::random);
    if config.dry_run {
        return dry_run(&config, seed);
    }
    match real_run(&config, seed, start, wall_start) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("retry: {e:#}");
            ExitStatus::Usage
        }
    }
}

fn dry_run(config: &Config, seed: u64) -> ExitStatus {
    let json = config.log.format == crate::cli::LogFormat::Json;
    let mut out = crate::report::charset::Output::new(io::stdout().lock(), json);
    match dryrun::print(config, seed, json, &mut out).and_then(|()| out.flush()) {
        Ok(()) => ExitStatus::Success,
        // A reader that has seen enough (`| head`) is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitStatus::Success,
        Err(e) => {
            eprintln!("retry: cannot write the schedule: {e}");
            ExitStatus::Usage
        }
    }
}

fn run_id() -> String {
    let id: u128 = rand::random();
    let hex = format!("{id:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn real_run(
    config: &Config,
    seed: u64,
    start: Instant,
    wall_start: SystemTime,
) -> anyhow::Result<ExitStatus> {
    use anyhow::Context as _;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let stderr_tty = io::stderr().is_terminal();
    let countdown = stderr_tty
        && config.log.file.is_none()
        && !config.log.quiet
        && config.log.format == crate::cli::LogFormat::Human;
    let github = std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true");
    let (out, color): (Box<dyn Write>, bool) = match &config.log.file {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open --log-file '{}'", path.display()))?;
            (Box::new(file), use_color(config.log.color, false, no_color))
        }
        None => {
            let tty = io::stderr().is_terminal();
            (
                Box::new(io::stderr()),
                use_color(config.log.color, tty, no_color),
            )
        }
    };
    let stdio = stdio::RunIo::new(config)?;
    let signals = signals::Signals::install().context("cannot install signal handlers")?;
    process::become_subreaper();
    let run_id = run_id();
    let log = Log::new(out, config, color, run_id.clone()).with_github(github);
    let runner = runner::Runner::new(config, log, signals, stdio, run_id, start, wall_start)
        .with_countdown(countdown);
    Ok(runner.run(seed))
}
