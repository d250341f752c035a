//! The policy in words (the `-v` log's policy line, the headers of the dry run and the
//! simulation) and as a JSON object (the `start` event, the JSON headers).

use crate::config::Config;
use crate::duration::{hms, millis};
use crate::policy::{Backoff, Flaky, Jitter, LimitSource, RepeatPolicy, WaitPolicy};
use crate::report::json;

/// The policy in one line: `3 tries, exponential backoff from 1s ×2, cap 60s, jitter full`.
/// Decorrelated jitter has no backoff: its waits are named by what they are drawn from.
pub fn describe_policy(config: &Config) -> String {
    let time = hms;
    let p = &config.policy;
    if let Some(repeat) = config.repeat {
        return describe_repeat(config, repeat);
    }
    let tries = match p.max_tries {
        Some(1) => "1 try".to_string(),
        Some(n) => format!("{n} tries"),
        None => "no try limit".to_string(),
    };
    let waits = &p.waits;
    let backoff = backoff_words(waits);
    let mut out = format!(
        "{tries}, {backoff}, cap {}, jitter {}",
        time(waits.max_delay),
        waits.jitter.name()
    );
    if let Some(t) = p.timeout {
        out += &format!(
            ", timeout {} per try (then {}, SIGKILL after {})",
            time(t),
            config.signal,
            time(config.kill_after)
        );
    }
    if let Some(limit) = p.limit {
        match limit.source {
            LimitSource::Budget => out += &format!(", budget {}", time(limit.at)),
            LimitSource::Deadline => out += &format!(", deadline in {}", time(limit.at)),
        }
    }
    if let Some(pattern) = &config.delay_from_output {
        out += &format!(", longer waits when the output asks (--delay-from-output {pattern})");
    }
    if let Some(pattern) = &p.classifier.until_output {
        out += &format!(", until the output says it is ready (--until-output {pattern})");
    }
    out + flaky_words(config.flaky)
}

/// How the waits grow, in words: `exponential backoff from 1s ×2`.
fn backoff_words(waits: &WaitPolicy) -> String {
    let time = hms;
    match &waits.backoff {
        _ if waits.jitter == Jitter::Decorrelated => {
            format!("waits from {} to 3 × the previous", time(waits.delay))
        }
        Backoff::Exponential { factor } => {
            format!("exponential backoff from {} ×{factor}", time(waits.delay))
        }
        Backoff::Linear => format!("linear backoff from {}", time(waits.delay)),
        Backoff::Constant => format!("constant wait {}", time(waits.delay)),
        Backoff::List(list) => format!(
            "waits {}",
            list.iter().map(|d| time(*d)).collect::<Vec<_>>().join(",")
        ),
    }
}

/// `--flaky` in words, when it is not `pass`.
fn flaky_words(flaky: Flaky) -> &'static str {
    match flaky {
        Flaky::Pass => "",
        Flaky::Warn => ", a success after failed tries warns (--flaky warn)",
        Flaky::Fail => ", a success after failed tries fails (--flaky fail)",
    }
}

/// `--repeat` in words: `50 tries in a row, stopping at the first failure, no wait between
/// tries, timeout 5s per try (...)`.
fn describe_repeat(config: &Config, repeat: RepeatPolicy) -> String {
    let p = &config.policy;
    let mut out = match repeat.runs {
        Some(1) => "1 try".to_string(),
        Some(n) => format!("{n} tries in a row"),
        None => "tries in a row".to_string(),
    };
    out += match repeat.keep_going {
        true => ", whatever fails (--keep-going)",
        false => ", stopping at the first failure",
    };
    match repeat.delay {
        d if d.is_zero() => out += ", no wait between tries",
        d => out += &format!(", {} between tries", hms(d)),
    }
    if let Some(t) = p.timeout {
        out += &format!(
            ", timeout {} per try (then {}, SIGKILL after {})",
            hms(t),
            config.signal,
            hms(config.kill_after)
        );
    }
    if let Some(limit) = p.limit {
        match limit.source {
            LimitSource::Budget => out += &format!(", budget {}", hms(limit.at)),
            LimitSource::Deadline => out += &format!(", deadline in {}", hms(limit.at)),
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
        // A u64 may exceed 2^53, past which many JSON readers round numbers
        // (docs/json-log.md#the-json-log).
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
    if let Some(pattern) = &config.delay_from_output {
        obj = obj.str("delay_from_output", pattern.text());
    }
    if let Some(pattern) = &p.classifier.until_output {
        obj = obj.str("until_output", pattern.text());
    }
    if config.flaky != Flaky::Pass {
        obj = obj.str("flaky", config.flaky.word());
    }
    if let Some(repeat) = config.repeat {
        obj = obj.obj(
            "repeat",
            json::Obj::new()
                .num("tries", repeat.runs.unwrap_or(0))
                .bool("keep_going", repeat.keep_going)
                .num("delay_ms", millis(repeat.delay)),
        );
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
    fn decorrelated_jitter_claims_no_backoff() {
        let line = describe_policy(&config(&["-j", "decorrelated", "--", "true"]));
        assert_eq!(
            line,
            "3 tries, waits from 1s to 3 × the previous, cap 1m, jitter decorrelated"
        );
        let line = describe_policy(&config(&["-j", "full", "--", "true"]));
        assert!(line.contains("exponential backoff from 1s ×2"), "{line}");
    }

    #[test]
    fn the_seed_is_a_string_so_that_no_json_reader_rounds_it() {
        let policy = policy_json(&config(&["--", "true"]), 9_403_994_254_451_210_427).finish();
        assert!(
            policy.contains(r#""seed":"9403994254451210427""#),
            "{policy}"
        );
    }

    #[test]
    fn the_policy_says_the_output_may_ask_for_longer_waits() {
        let c = config(&["--delay-from-output", r"Retry-After: (\d+)", "--", "true"]);
        let line = describe_policy(&c);
        assert!(
            line.ends_with(
                r", longer waits when the output asks (--delay-from-output 'Retry-After: (\d+)')"
            ),
            "{line}"
        );
        let policy = policy_json(&c, 1).finish();
        assert!(
            policy.contains(r#""delay_from_output":"Retry-After: (\\d+)""#),
            "{policy}"
        );
        let plain = config(&["--", "true"]);
        assert!(!describe_policy(&plain).contains("--delay-from-output"));
        assert!(
            !policy_json(&plain, 1)
                .finish()
                .contains("delay_from_output")
        );
    }
}
