//! The options of `--simulate` (docs/simulation.md#simulation), checked and with their
//! defaults.

use std::time::Duration;

use crate::cli::{ModelKind, SimulateArgs};
use crate::policy::quota::QuotaSpec;
use crate::policy::throttle::ThrottleSpec;

/// What `--simulate` simulates (docs/simulation.md#simulation).
#[derive(Clone, Debug, PartialEq)]
pub struct Simulation {
    pub scenario: crate::sim::Scenario,
    /// `--compare`: once per jitter kind, and with and without the quota; with `--throttle`,
    /// without the quota, with it alone, and with the throttle.
    pub compare: bool,
    /// The model's clients try until they succeed, whatever the default `--tries` (model `occ`
    /// without `--tries`).
    pub until_success: bool,
}

/// The simulation's options, checked and with their defaults; `None` without `--simulate`,
/// when giving any of them is a usage error rather than an option silently ignored.
pub fn simulation(
    args: &SimulateArgs,
    stagger: Option<Duration>,
    quota: Option<&QuotaSpec>,
    throttle: Option<ThrottleSpec>,
) -> Result<Option<Simulation>, String> {
    use crate::sim::{Model, Outage, Scenario, StoreClock};
    if !args.simulate {
        return match given_without_simulate(args) {
            Some(shown) => Err(format!(
                "'{shown}' is an option of --simulate, and is given without it"
            )),
            None => Ok(None),
        };
    }
    let kind = args.model.unwrap_or(ModelKind::Outage);
    let model = match kind {
        ModelKind::Outage => Model::Outage(Outage {
            until: args.outage.unwrap_or(Duration::from_secs(10)),
            capacity: args.capacity,
            latency: args.latency.unwrap_or(Duration::from_millis(100)),
        }),
        ModelKind::Occ => {
            if let Some((option, value)) = first_given(outage_options(args)) {
                return Err(format!(
                    "'{option} {value}' is for --model outage: --model occ times its own network (about 10ms a hop)"
                ));
            }
            Model::Occ
        }
    };
    Ok(Some(Simulation {
        scenario: Scenario {
            clients: args.clients.unwrap_or(100),
            model,
            stagger,
            quota: quota.map(|q| q.params),
            throttle,
            every: args.every.filter(|e| !e.is_zero()),
            store_clock: StoreClock::default(),
        },
        compare: args.compare,
        until_success: kind == ModelKind::Occ && !args.tries_given,
    }))
}

/// The options of the outage model, each with its value as given, or `None`.
fn outage_options(args: &SimulateArgs) -> [(&'static str, Option<String>); 4] {
    use crate::duration::hms;
    [
        ("--outage", args.outage.map(hms)),
        ("--capacity", args.capacity.map(|c| format!("{c}/s"))),
        ("--latency", args.latency.map(hms)),
        ("--every", args.every.map(hms)),
    ]
}

/// The first of `options` given, with its value.
fn first_given<'a>(
    options: impl IntoIterator<Item = (&'a str, Option<String>)>,
) -> Option<(&'a str, String)> {
    options
        .into_iter()
        .find_map(|(option, value)| Some((option, value?)))
}

/// The first option of `--simulate` given, as written back (`--clients 7`, `--compare`).
fn given_without_simulate(args: &SimulateArgs) -> Option<String> {
    use clap::ValueEnum;
    let given = [
        ("--clients", args.clients.map(|n| n.to_string())),
        (
            "--model",
            args.model
                .and_then(|m| m.to_possible_value())
                .map(|v| v.get_name().to_string()),
        ),
        ("--compare", args.compare.then(String::new)),
    ];
    let (option, value) = first_given(given.into_iter().chain(outage_options(args)))?;
    Some(format!("{option} {value}").trim_end().to_string())
}
