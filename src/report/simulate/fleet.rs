//! What `--simulate` shows of a fleet (docs/simulation.md#admission-control): with `--every`
//! the waves of runs, with `--throttle` the tries held back and how soon after the outage `p`
//! falls below 0.1, and with either the tries sent during the outage and after it; and
//! `--compare`'s table of the herd controls side by side when `--throttle` is given.
//! Without either option nothing here is shown, so that the output stays as it was.

use crate::duration::{hms, millis};
use crate::report::json::Obj;
use crate::report::layout;
use crate::sim::{Figures, P_RECOVERED, Scenario, Variant, arrivals};

/// Whether the scenario is one of a fleet, whose figures are shown.
pub fn shown(scenario: &Scenario) -> bool {
    scenario.throttle.is_some() || scenario.every.is_some()
}

/// The header's facts: when the clients arrive (`every`) and how tries are held back (`held`).
pub fn header_fields(scenario: &Scenario) -> Vec<(&'static str, String)> {
    let mut fields = Vec::new();
    if let (Some(every), Some(horizon)) = (scenario.every, scenario.horizon()) {
        let after = if horizon.saturating_sub(scenario.outage_end())
            > every.saturating_mul(arrivals::WAVES_AFTER_OUTAGE)
        {
            format!("{} windows of the throttle", arrivals::WINDOWS_AFTER_OUTAGE)
        } else {
            format!("{} waves", arrivals::WAVES_AFTER_OUTAGE)
        };
        let who = match scenario.clients {
            1 => "the client arrives".to_string(),
            n => format!("the {n} clients arrive"),
        };
        fields.push((
            "every",
            format!(
                "{who} again every {}, until {} (the end of the outage plus {after})",
                hms(every),
                hms(horizon)
            ),
        ));
    }
    if let Some(t) = scenario.throttle {
        fields.push((
            "held",
            format!(
                "--throttle {t}: a try is held back with p = (tries − {k} × accepted) / (tries + 1) \
                 over the last {window}, at most {max}",
                k = t.k,
                window = hms(t.window),
                max = t.max
            ),
        ));
    }
    fields
}

/// The figures' lines of a fleet, shown after the tries.
pub fn lines(f: &Figures, scenario: &Scenario) -> Vec<String> {
    let fleet = &f.fleet;
    let mut lines = Vec::new();
    if !scenario.outage_end().is_zero() {
        lines.push(format!(
            "outage:    {} tries sent during it, {} after it",
            fleet.in_outage, fleet.after_outage
        ));
    }
    if scenario.throttle.is_some() {
        let recovered = match fleet.recovered {
            Some(after) => format!(
                "p fell below {P_RECOVERED} {} after the end of the outage",
                hms(after)
            ),
            None if outage_over(f, scenario) => format!(
                "p was not below {P_RECOVERED} by the end of the simulation, {} after the end of the outage",
                hms(fleet.end.saturating_sub(scenario.outage_end()))
            ),
            None => format!(
                "p was not watched: the outage had not ended by the end of the simulation, at {}",
                hms(fleet.end)
            ),
        };
        lines.push(format!(
            "held:      {} tries held back; {recovered}",
            fleet.held
        ));
        if scenario.every.is_some() && fleet.recovered.is_some() {
            lines.push(format!(
                "recovery:  {} arrived once p was below {P_RECOVERED}, {} of them succeeded",
                count(u64::from(fleet.after_recovery), "run"),
                share(fleet.succeeded_after_recovery, fleet.after_recovery)
            ));
        }
    }
    if let Some(every) = scenario.every {
        let last = every.saturating_mul(fleet.waves.saturating_sub(1));
        let mut line = format!(
            "arrivals:  {} of {}, the last at {}",
            count(u64::from(fleet.waves), "wave"),
            count(u64::from(scenario.clients), "client"),
            hms(last)
        );
        if fleet.turned_away > 0 {
            line += &format!(
                "; {} runs turned away, as {} were under way, the most it holds",
                fleet.turned_away,
                crate::sim::MAX_CLIENTS
            );
        }
        lines.push(line);
    }
    lines
}

/// `--compare --throttle`'s table: the quota and the throttle named on the left.
pub fn table(rows: &[(Variant, Figures)], scenario: &Scenario) -> Vec<String> {
    let header = [
        "quota",
        "throttle",
        "tries",
        "in the outage",
        "after it",
        "held",
        "p < 0.1 after",
        "succeeded",
        "gave up",
    ];
    let k = scenario.throttle.map_or(String::new(), |t| t.to_string());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(v, f)| {
            let recovered = match (v.throttle, f.fleet.recovered) {
                (false, _) => "-".to_string(),
                (true, Some(after)) => hms(after),
                (true, None) if outage_over(f, scenario) => "not by the end".to_string(),
                (true, None) => "outage not over".to_string(),
            };
            vec![
                yes_no(v.quota).to_string(),
                if v.throttle { k.clone() } else { "no".into() },
                f.tries.to_string(),
                f.fleet.in_outage.to_string(),
                f.fleet.after_outage.to_string(),
                f.fleet.held.to_string(),
                recovered,
                f.succeeded.to_string(),
                gave_up(f),
            ]
        })
        .collect();
    layout::table(&header, &cells, 2)
}

/// Whether the simulation went on past the end of the outage, so that `p` could be watched
/// after it.
fn outage_over(f: &Figures, scenario: &Scenario) -> bool {
    f.fleet.end >= scenario.outage_end()
}

/// `1 wave`, `30 waves`.
fn count(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// `17,000 (99.7%)`: `n` of `of`, with its share to a tenth of a percent, cut down rather than
/// rounded up, so that 99.96% is not shown as every run.
fn share(n: u32, of: u32) -> String {
    if of == 0 {
        return n.to_string();
    }
    let tenths = u64::from(n) * 1000 / u64::from(of);
    format!("{n} ({}.{}%)", tenths / 10, tenths % 10)
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The runs that gave up, those of them held back, and those that did not finish.
fn gave_up(f: &Figures) -> String {
    let mut text = f.gave_up_in_all().to_string();
    let held = f.gave_up_for("held");
    if held > 0 {
        text += &format!(" (held {held})");
    }
    if f.unfinished > 0 {
        text += &format!(" (+{} unfinished)", f.unfinished);
    }
    if f.past_clock > 0 {
        text += &format!(" (+{} past the clock)", f.past_clock);
    }
    text
}

/// The fields of `simulation_start` for a fleet.
pub fn json_start(obj: Obj, scenario: &Scenario) -> Obj {
    let mut obj = obj;
    if let (Some(every), Some(horizon)) = (scenario.every, scenario.horizon()) {
        obj = obj
            .num("every_ms", millis(every))
            .num("horizon_ms", millis(horizon));
    }
    if let Some(t) = scenario.throttle {
        obj = obj
            .float("throttle_k", t.k)
            .num("throttle_window_ms", millis(t.window))
            .raw("throttle_max", &crate::policy::throttle::six_digits(t.max));
    }
    obj
}

/// The fields of a `figures` line for a fleet: in every line, 0 or null without `--every` and
/// `--throttle`.
pub fn json_figures(obj: Obj, f: &Figures) -> Obj {
    let fleet = &f.fleet;
    obj.num("waves", fleet.waves)
        .num("in_outage", fleet.in_outage)
        .num("after_outage", fleet.after_outage)
        .num("held", fleet.held)
        .opt_num("p_recovered_ms", fleet.recovered.map(millis))
        .num("after_recovery", fleet.after_recovery)
        .num("succeeded_after_recovery", fleet.succeeded_after_recovery)
        .num("turned_away", fleet.turned_away)
}
