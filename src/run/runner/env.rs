//! The environment `retry` adds for a try and for a hook, built by name in one place
//! (docs/exit-status.md#the-commands-environment, docs/log.md#hooks): what every child of the
//! run is told, what a hook is told besides, and what the hooks have set for what follows them.

use std::time::{Duration, SystemTime};

use crate::config::Config;
use crate::duration::millis;
use crate::report::event::EnvFileNote;
use crate::report::traces::context::SharedTrace;
use crate::run::envfile::{EnvVar, hand_on};

/// W3C Trace Context's variables, as OpenTelemetry's environment carriers name them.
const TRACEPARENT: &str = "TRACEPARENT";
const TRACESTATE: &str = "TRACESTATE";

/// What every try and hook of a run is told, and what the hooks set for the later ones.
pub struct RunEnv {
    /// `RETRY_MAX_TRIES`: `--tries`, 0 for no limit.
    max_tries: u64,
    /// `RETRY_RUN_ID`.
    run_id: String,
    /// `RETRY_DEADLINE_MS`: the end of the budget or the deadline, in milliseconds since the
    /// epoch, when the run has one.
    deadline_ms: Option<u64>,
    /// `RETRY_FENCING_TOKEN`: the token of the grant of `--lock`, else of a replay's claim on
    /// this run, when it has one: a resource that the command changes can refuse a token lower
    /// than one it has seen (docs/dead-letters.md#claims, docs/processes.md#one-run-at-a-time).
    fencing_token: Option<u64>,
    /// What the hooks' `RETRY_ENV_FILE` set, in the order first set.
    handed: Vec<EnvVar>,
    /// The run's trace, if it has one: `TRACEPARENT` names the try's span for a try, the
    /// run's for a hook.
    trace: Option<SharedTrace>,
    /// The run's trace is its own (no valid `TRACEPARENT` was given) and `retry`'s environment
    /// has a `TRACESTATE`: that state is of a trace the children are not in, and W3C Trace
    /// Context discards it with a refused parent, so they are given it empty.
    foreign_state: bool,
}

/// What a hook is told besides what a try is.
pub struct HookVars<'a> {
    /// `RETRY_EXIT_CODE`: the status `retry` would exit with after the try before it.
    pub exit_code: i32,
    /// `RETRY_DELAY_MS`: the wait ahead.
    pub delay: Duration,
    /// `RETRY_ENV_FILE`: the path of the file whose lines set variables for what follows.
    pub env_file: Option<&'a str>,
}

impl RunEnv {
    /// The environment of the run of `config`, which started at `wall_start`.
    pub fn new(
        config: &Config,
        run_id: String,
        wall_start: SystemTime,
        fencing_token: Option<u64>,
    ) -> RunEnv {
        let deadline_ms = config.policy.limit.map(|limit| {
            wall_start
                .checked_add(limit.at)
                .and_then(|end| end.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(u64::MAX, millis)
        });
        RunEnv {
            max_tries: config.policy.max_tries.unwrap_or(0),
            run_id,
            deadline_ms,
            fencing_token,
            handed: Vec::new(),
            trace: None,
            foreign_state: false,
        }
    }

    /// The environment with `TRACEPARENT` set from `trace`, when the run has one.
    pub fn with_trace(mut self, trace: Option<SharedTrace>) -> RunEnv {
        self.foreign_state = trace.as_ref().is_some_and(|t| t.borrow().parent.is_none())
            && std::env::var_os(TRACESTATE).is_some_and(|v| !v.is_empty());
        self.trace = trace;
        self
    }

    /// The run's id, `RETRY_RUN_ID`.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// `RETRY_FENCING_TOKEN` from now on: the token of the grant of `--lock`, which takes the
    /// place of a replay's claim's.
    pub fn set_fencing_token(&mut self, token: u64) {
        self.fencing_token = Some(token);
    }

    /// The variables of try `attempt`, over `retry`'s own environment: its span's
    /// `TRACEPARENT` among them, drawn now, when the run has a trace.
    pub fn for_try(&self, attempt: u64) -> Vec<EnvVar> {
        let mut env = self.common(attempt);
        if let Some(trace) = &self.trace {
            let parent = trace.borrow_mut().for_try(attempt);
            set_traceparent(&mut env, parent, self.foreign_state);
        }
        env
    }

    /// What a try and a hook after it are both told.
    fn common(&self, attempt: u64) -> Vec<EnvVar> {
        let mut env: Vec<EnvVar> = vec![
            ("RETRY_ATTEMPT".into(), attempt.to_string()),
            ("RETRY_MAX_TRIES".into(), self.max_tries.to_string()),
            ("RETRY_RUN_ID".into(), self.run_id.clone()),
        ];
        if let Some(ms) = self.deadline_ms {
            env.push(("RETRY_DEADLINE_MS".into(), ms.to_string()));
        }
        if let Some(token) = self.fencing_token {
            env.push(("RETRY_FENCING_TOKEN".into(), token.to_string()));
        }
        env.extend(self.handed.iter().cloned());
        env
    }

    /// The variables of a hook after try `attempt`: those of the try, and what the hook is told;
    /// a hook is no part of a try, so its `TRACEPARENT` names the run's span.
    pub fn for_hook(&self, attempt: u64, vars: &HookVars<'_>) -> Vec<EnvVar> {
        let mut env = self.common(attempt);
        if let Some(trace) = &self.trace {
            set_traceparent(&mut env, trace.borrow().for_run(), self.foreign_state);
        }
        env.push(("RETRY_EXIT_CODE".into(), vars.exit_code.to_string()));
        env.push(("RETRY_DELAY_MS".into(), millis(vars.delay).to_string()));
        if let Some(path) = vars.env_file {
            env.push(("RETRY_ENV_FILE".into(), path.to_string()));
        }
        env
    }

    /// Sets for the later tries and hooks what `text`, a hook's `RETRY_ENV_FILE`, assigns.
    pub fn hand_on(&mut self, text: &[u8]) -> Vec<EnvFileNote> {
        hand_on(&mut self.handed, text)
    }
}

/// Sets `TRACEPARENT` in `env` to `value`, over what a hook's `RETRY_ENV_FILE` set: the span
/// exported is the one the try is told; and `TRACESTATE` empty when `clear_state`.
fn set_traceparent(env: &mut Vec<EnvVar>, value: String, clear_state: bool) {
    env.retain(|(name, _)| name != TRACEPARENT && (!clear_state || name != TRACESTATE));
    env.push((TRACEPARENT.into(), value));
    if clear_state {
        env.push((TRACESTATE.into(), String::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> RunEnv {
        RunEnv {
            max_tries: 3,
            run_id: "r1".into(),
            deadline_ms: Some(42),
            fencing_token: None,
            handed: Vec::new(),
            trace: None,
            foreign_state: false,
        }
    }

    fn names(env: &[EnvVar]) -> Vec<String> {
        env.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    #[test]
    fn a_hook_sees_what_the_try_sees_and_what_it_is_told() {
        let mut run = env();
        assert!(run.hand_on(b"TOKEN=abc\n").is_empty());
        let vars = HookVars {
            exit_code: 7,
            delay: Duration::from_millis(1500),
            env_file: Some("/tmp/f"),
        };
        assert_eq!(
            names(&run.for_hook(2, &vars)),
            [
                "RETRY_ATTEMPT=2",
                "RETRY_MAX_TRIES=3",
                "RETRY_RUN_ID=r1",
                "RETRY_DEADLINE_MS=42",
                "TOKEN=abc",
                "RETRY_EXIT_CODE=7",
                "RETRY_DELAY_MS=1500",
                "RETRY_ENV_FILE=/tmp/f",
            ]
        );
        assert_eq!(names(&run.for_try(3))[0], "RETRY_ATTEMPT=3");
    }

    #[test]
    fn the_runs_trace_sets_traceparent_over_what_a_hook_set() {
        use crate::report::traces::context::{Draw, RunTrace};
        let mut run = env();
        assert!(run.hand_on(b"TRACEPARENT=mine\n").is_empty());
        assert!(names(&run.for_try(1)).contains(&"TRACEPARENT=mine".to_string()));
        let draw: Draw = Box::new(|| [7; 8]);
        let trace = std::rc::Rc::new(std::cell::RefCell::new(RunTrace::new(None, draw)));
        let run = RunEnv {
            trace: Some(trace),
            ..run
        };
        let told: Vec<String> = names(&run.for_try(1))
            .into_iter()
            .filter(|v| v.starts_with("TRACEPARENT="))
            .collect();
        let own = format!("TRACEPARENT=00-{}-{}-01", "07".repeat(16), "07".repeat(8));
        assert_eq!(told, std::slice::from_ref(&own));
        let vars = HookVars {
            exit_code: 1,
            delay: Duration::ZERO,
            env_file: None,
        };
        let hook: Vec<String> = names(&run.for_hook(1, &vars))
            .into_iter()
            .filter(|v| v.starts_with("TRACEPARENT="))
            .collect();
        assert_eq!(hook, [own]);
    }
}
