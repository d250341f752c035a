//! What people read: the schedule log (human and JSON lines) and the dry-run table.

pub mod charset;
pub mod dryrun;
pub mod json;
pub mod log;

use std::ffi::OsString;

use crate::config::Config;
use crate::duration::{human, millis};
use crate::policy::{Backoff, LimitSource};

/// The command line as one shell-like string, for the log.
pub fn command_line(command: &[OsString]) -> String {
    command
        .iter()
        .map(|word| {
            let w = word.to_string_lossy();
            let plain = !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain {
                w.into_owned()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The policy in one line: `3 tries, exponential backoff from 1s ×2, cap 60s, jitter full`.
pub fn describe_policy(config: &Config) -> String {
    let p = &config.policy;
    let tries = match p.max_tries {
        Some(1) => "1 try".to_string(),
        Some(n) => format!("{n} tries"),
        None => "no try limit".to_string(),
    };
    let waits = &p.waits;
    let backoff = match &waits.backoff {
        Backoff::Exponential { factor } => {
            format!("exponential backoff from {} ×{factor}", human(waits.delay))
        }
        Backoff::Linear => format!("linear backoff from {}", human(waits.delay)),
        Backoff::Constant => format!("constant wait {}", human(waits.delay)),
        Backoff::List(list) => format!(
            "waits {}",
            list.iter().map(|d| human(*d)).collect::<Vec<_>>().join(",")
        ),
    };
    let mut out = format!(
        "{tries}, {backoff}, cap {}, jitter {}",
        human(waits.max_delay),
        waits.jitter.name()
    );
    if let Some(t) = p.timeout {
        out += &format!(
            ", timeout {} per try (then {}, SIGKILL after {})",
            human(t),
            config.signal,
            human(config.kill_after)
        );
    }
    if let Some(limit) = p.limit {
        match limit.source {
            LimitSource::Budget => out += &format!(", budget {}", human(limit.at)),
            LimitSource::Deadline => out += &format!(", deadline in {}", human(limit.at)),
        }
    }
    out
}

/// The policy as a JSON object, for the `start` event and the dry run's header.
pub fn policy_json(config: &Config, seed: u64) -> json::Obj {
    let p = &config.policy;
    let (backoff, factor) = match &p.waits.backoff {
        Backoff::Exponential { factor } => ("exponential", Some(*factor)),
        Backoff::Linear => ("linear", None),
        Backoff::Constant => ("constant", None),
        Backoff::List(_) => ("delays", None),
    };
    let mut obj = json::Obj::new()
        .num("tries", p.max_tries.unwrap_or(0))
        .opt_num("budget_ms", p.limit.map(|l| millis(l.at)))
        .opt_num("timeout_ms", p.timeout.map(millis))
        .str("backoff", backoff)
        .str("jitter", p.waits.jitter.name())
        // A u64 may exceed 2^53, past which many JSON readers round numbers (spec 8.2).
        .str("seed", &seed.to_string())
        .num("delay_ms", millis(p.waits.delay))
        .num("max_delay_ms", millis(p.waits.max_delay));
    if let Some(f) = factor {
        obj = obj.float("factor", f);
    }
    if let Backoff::List(list) = &p.waits.backoff {
        let list: Vec<String> = list.iter().map(|d| millis(*d).to_string()).collect();
        obj = obj.raw("delays_ms", &format!("[{}]", list.join(",")));
    }
    obj.str("signal", &config.signal.name())
        .num("kill_after_ms", millis(config.kill_after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ParseOutcome, parse};
    use std::time::SystemTime;

    fn config(args: &[&str]) -> Config {
        match parse(["retry"].iter().chain(args), SystemTime::UNIX_EPOCH) {
            ParseOutcome::Run(c) => *c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_seed_is_a_string_so_that_no_json_reader_rounds_it() {
        let policy = policy_json(&config(&["--", "true"]), 9_403_994_254_451_210_427).finish();
        assert!(
            policy.contains(r#""seed":"9403994254451210427""#),
            "{policy}"
        );
    }
}
