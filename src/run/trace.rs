//! A run's trace (docs/dashboards.md#traces), set up from `retry`'s environment: the trace and
//! its ids, drawn from the system's random source, which the runner hands to each try as its
//! `TRACEPARENT`, and the sink that exports the run's spans when an endpoint is set. A run with
//! neither `TRACEPARENT` nor an endpoint looks at the environment and nothing more: no id is
//! drawn, nothing is made.

use crate::config::Config;
use crate::report::log::Log;
use crate::report::traces::Traces;
use crate::report::traces::context::{self, RunTrace, SharedTrace};
use crate::report::traces::settings::{self, Plan};
use crate::run::random;

/// The trace of a run of `config` whose log is `log`, if it has one, and the log with the
/// traces' sink added last, when the spans are exported or a setting is to be warned about.
pub(crate) fn attach(config: &Config, log: Log) -> (Log, Option<SharedTrace>) {
    let var = |name: &str| std::env::var_os(name);
    let Plan::Trace { export, note } = settings::plan(&var) else {
        return (log, None);
    };
    let given = var("TRACEPARENT").and_then(|v| context::read_traceparent(v.as_encoded_bytes()));
    let draw: context::Draw = Box::new(|| random::random_u64().to_ne_bytes());
    let trace = std::rc::Rc::new(std::cell::RefCell::new(RunTrace::new(given, draw)));
    // A caller that does not record its trace is passed on, and not exported to.
    let export = export.filter(|_| trace.borrow().sampled());
    if export.is_none() && note.is_none() {
        return (log, Some(trace));
    }
    // TRACESTATE belongs to the caller's trace: a trace of the run's own has none.
    let state = given
        .and_then(|_| var("TRACESTATE"))
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty());
    let sink = Traces::new(trace.clone(), export, note, state, &config.command);
    (log.with_sink(Box::new(sink)), Some(trace))
}
