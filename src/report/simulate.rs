//! `--simulate` (docs/simulation.md#simulation) for people and for programs: the figures of a
//! simulation, a chart of tries per second sized to the terminal, the `--compare` table, or all of
//! it as JSON lines. The chart is plain text (full blocks, or `#` where the output is ASCII only)
//! with no colour, so that it reads the same in a terminal, a CI log and under `NO_COLOR`.

use std::io::{self, Write};
use std::time::Duration;

use crate::config::{Config, Simulation};
use crate::duration::{hms, millis};
use crate::policy::Jitter;
use crate::report::json::Obj;
use crate::report::layout::{self, Header};
use crate::sim::{
    Bound, Figures, MAX_TRIES, MAX_WAVES, Model, PEAK_WINDOW, Scenario, Series, Stopped, Variant,
};

mod fleet;

/// Rows of the chart.
const CHART_ROWS: usize = 8;
/// A cell filled one eighth to seven eighths, from the bottom; their ASCII stand-ins are `.`
/// for the lower half and `#` above.
const PARTIAL: [char; 7] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇'];
/// The fewest columns a chart is drawn with, however narrow the terminal.
const CHART_MIN_COLUMNS: usize = 20;
/// The most intervals the JSON series has: merged in round steps past it.
const JSON_INTERVALS: usize = 200;

/// What was simulated: one run of the policy, or `--compare`'s rows.
#[derive(Clone, Debug, PartialEq)]
pub enum Results {
    One(Box<Figures>),
    Compare(Vec<(Variant, Figures)>),
}

/// Prints the results: text sized to `width` columns, or JSON lines.
pub fn print(
    config: &Config,
    sim: &Simulation,
    seed: u64,
    results: &Results,
    json: bool,
    width: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    if json {
        print_json(config, sim, seed, results, out)
    } else {
        print_human(config, sim, seed, results, width, out)
    }
}

/// A rate per second: whole above 10, one decimal below.
fn rate(per_second: f64) -> String {
    if per_second >= 10.0 || per_second == per_second.round() {
        format!("{per_second:.0}")
    } else {
        format!("{per_second:.1}")
    }
}

/// The model in words.
fn describe_model(model: &Model) -> String {
    match model {
        Model::Outage(o) => {
            let after = match o.capacity {
                Some(c) => format!(
                    "at most {}/s succeed and the rest fail as overload",
                    rate(c)
                ),
                None => "every try succeeds".into(),
            };
            let start = if o.until.is_zero() {
                "no outage:".to_string()
            } else {
                format!("every try fails for the first {}, then", hms(o.until))
            };
            format!("outage: {start} {after}; each try takes {}", hms(o.latency))
        }
        Model::Occ => "occ: each try reads one shared record and writes it back, each network hop \
                       taking 10ms ± 2ms; a write succeeds only if no other write landed since \
                       its read"
            .into(),
    }
}

fn print_human(
    config: &Config,
    sim: &Simulation,
    seed: u64,
    results: &Results,
    width: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    header(config, sim, seed, results).write(out)?;
    writeln!(out)?;
    let lines = match results {
        Results::One(figures) => {
            let outage_end = match &sim.scenario.model {
                Model::Outage(o) if !o.until.is_zero() => Some(o.until),
                _ => None,
            };
            let mut lines = figure_lines(figures);
            lines.extend(
                figures
                    .stopped
                    .map(|s| stopped_line(&s, sim.scenario.every.is_some())),
            );
            if fleet::shown(&sim.scenario) {
                // After the tries line.
                lines.splice(1..1, fleet::lines(figures, &sim.scenario));
            }
            lines.push(String::new());
            lines.extend(chart(&figures.series, outage_end, width));
            lines
        }
        Results::Compare(rows) if sim.scenario.throttle.is_some() => {
            let mut lines = fleet::table(rows, &sim.scenario);
            lines.extend(stopped_rows(rows, &sim.scenario));
            lines
        }
        Results::Compare(rows) => {
            let mut lines = table(rows, sim.scenario.quota.is_some());
            if !rows.iter().any(|(v, _)| v.jitter == Jitter::Decorrelated) {
                lines.push(
                    "(no row for decorrelated jitter: it cannot be combined with --delays)".into(),
                );
            }
            lines.extend(stopped_rows(rows, &sim.scenario));
            lines
        }
    };
    lines.iter().try_for_each(|line| writeln!(out, "{line}"))
}

/// The simulation's header: the command, the policy, the model, stagger, quota, arrivals,
/// throttle and seed.
fn header(config: &Config, sim: &Simulation, seed: u64, results: &Results) -> Header {
    let scenario = &sim.scenario;
    let clients = match scenario.clients {
        1 => "1 client follows".to_string(),
        n => format!("{n} clients follow"),
    };
    let stagger = scenario.stagger.map(|most| {
        format!(
            "each client's first try waits a random time up to {}",
            hms(most)
        )
    });
    let quota = scenario
        .quota
        .map(|params| format!("one bucket shared by every client, starting full ({params})"));
    // Each row of `--compare`'s table has its own jitter, but with the throttle's rows.
    let each_jitter = matches!(results, Results::Compare(_)) && scenario.throttle.is_none();
    let header = Header::new(format!(
        "retry: simulation, nothing is run: {clients} this policy at once"
    ))
    .command(&config.command, config.charset, " (not run)")
    .policy(config, each_jitter)
    .field("model", describe_model(&scenario.model))
    .field_if("stagger", stagger)
    .field_if("quota", quota);
    fleet::header_fields(scenario)
        .into_iter()
        .fold(header, |h, (label, text)| h.field(label, text))
        .seed(seed, "figures")
}

/// Failed tries by cause, the causes that happened only: `900 in the outage, 20 overloaded`.
fn failures(f: &Figures) -> String {
    let causes = [
        (f.failures.outage, "in the outage"),
        (f.failures.overload, "overloaded"),
        (f.failures.conflict, "in conflict with another write"),
        (f.failures.timeout, "timed out"),
    ];
    causes
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn gave_up(f: &Figures) -> String {
    let all = f.gave_up_in_all();
    if all == 0 {
        return "0".into();
    }
    let reasons: Vec<String> = f
        .gave_up
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(why, n)| format!("{why} {n}"))
        .collect();
    format!("{all} of {} ({})", f.clients, reasons.join(", "))
}

/// The figures of one simulation, a line each.
fn figure_lines(f: &Figures) -> Vec<String> {
    let mut lines = vec![
        tries_line(f),
        peak_line(f),
        finished_line(f),
        format!("succeeded: {} of {}", f.succeeded, f.clients),
        format!("gave up:   {}", gave_up(f)),
    ];
    if f.unfinished > 0 {
        lines.push(format!(
            "unfinished: {} of {}, still retrying when the simulation stopped after {} tries, the most it makes",
            f.unfinished, f.clients, f.tries
        ));
    }
    if f.past_clock > 0 {
        lines.push(format!(
            "past the clock: {} of {}, whose next try or answer would come after the simulated clock ends, at about 584 years ({})",
            f.past_clock,
            f.clients,
            hms(crate::sim::clock::CLOCK_END)
        ));
    }
    lines
}

/// The limit of the simulator that stopped it early, and the wave it stopped at:
/// `stopped:   by the bound of 20000000 tries, the most a simulation makes, at wave 20 (arrived at
/// 19s); the waves due after it did not come`.
fn stopped_line(s: &Stopped, every: bool) -> String {
    format!("stopped:   {}", stopped_text(s, every))
}

fn stopped_text(s: &Stopped, every: bool) -> String {
    let by = match s.by {
        Bound::Tries => format!("the bound of {MAX_TRIES} tries, the most a simulation makes"),
        Bound::Waves => format!("the bound of {MAX_WAVES} waves, the most a simulation has"),
        Bound::Clock => format!(
            "the end of the simulated clock, at about 584 years ({})",
            hms(crate::sim::clock::CLOCK_END)
        ),
    };
    let at = if every {
        format!("at wave {} (arrived at {})", s.wave, hms(s.at))
    } else {
        "in its one wave".to_string()
    };
    let cut = if s.cut {
        "; the waves due after it did not come"
    } else {
        ""
    };
    format!("by {by}, {at}{cut}")
}

/// Under `--compare`'s table, a line for each row that a limit stopped early.
fn stopped_rows(rows: &[(Variant, Figures)], scenario: &Scenario) -> Vec<String> {
    rows.iter()
        .filter_map(|(v, f)| {
            let s = f.stopped?;
            let mut row = format!("jitter {}, quota {}", v.jitter.name(), yes_no(v.quota));
            if scenario.throttle.is_some() {
                row += &format!(", throttle {}", yes_no(v.throttle));
            }
            Some(format!(
                "stopped ({row}): {}",
                stopped_text(&s, scenario.every.is_some())
            ))
        })
        .collect()
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// `tries:     1200 in all, 12.00 per client; failed: 900 in the outage`.
fn tries_line(f: &Figures) -> String {
    let failed = failures(f);
    let failed = if failed.is_empty() {
        String::new()
    } else {
        format!("; failed: {failed}")
    };
    format!(
        "tries:     {} in all, {:.2} per client{failed}",
        f.tries,
        f.per_client()
    )
}

/// The busiest window, of all tries and of the retries alone.
fn peak_line(f: &Figures) -> String {
    let window = hms(PEAK_WINDOW);
    let retries = if f.peak_retries.tries == 0 {
        "no retries".to_string()
    } else {
        format!(
            "retries alone {}/s ({} from {})",
            rate(f.peak_retries.per_second()),
            f.peak_retries.tries,
            hms(f.peak_retries.at)
        )
    };
    format!(
        "peak:      {} tries/s ({} in the {window} from {}); {retries}",
        rate(f.peak.per_second()),
        f.peak.tries,
        hms(f.peak.at)
    )
}

fn finished_line(f: &Figures) -> String {
    if f.succeeded == 0 && f.gave_up_in_all() == 0 {
        "finished:  no client".into()
    } else {
        format!("finished:  the last client at {}", hms(f.last_finish))
    }
}

/// `--compare`'s table: a row per variant, the jitter (and the quota) named on the left.
fn table(rows: &[(Variant, Figures)], quota: bool) -> Vec<String> {
    let mut header = vec!["jitter"];
    if quota {
        header.push("quota");
    }
    header.extend([
        "tries",
        "per client",
        "peak tries/s",
        "peak retries/s",
        "last finished",
        "succeeded",
        "gave up",
    ]);
    let cells: Vec<Vec<String>> = rows.iter().map(|(v, f)| table_row(v, f, quota)).collect();
    // The names on the left, the numbers on the right.
    layout::table(&header, &cells, if quota { 2 } else { 1 })
}

fn table_row(v: &Variant, f: &Figures, quota: bool) -> Vec<String> {
    let mut row = vec![v.jitter.name().to_string()];
    if quota {
        row.push(if v.quota { "yes" } else { "no" }.to_string());
    }
    let mut gave_up = f.gave_up_in_all().to_string();
    if f.unfinished > 0 {
        gave_up += &format!(" (+{} unfinished)", f.unfinished);
    }
    if f.past_clock > 0 {
        gave_up += &format!(" (+{} past the clock)", f.past_clock);
    }
    row.extend([
        f.tries.to_string(),
        format!("{:.2}", f.per_client()),
        rate(f.peak.per_second()),
        rate(f.peak_retries.per_second()),
        hms(f.last_finish),
        f.succeeded.to_string(),
        gave_up,
    ]);
    row
}

/// The factors of the JSON series' widths: 1, 2, 5, 10, 20, 50, ...
const JSON_STEPS: &[usize] = &[1, 2, 5];
/// The chart's, finer so that it fills more of the width: 1, 2, 3, 4, 5, 6, 8, 10, 20, ...
const CHART_STEPS: &[usize] = &[1, 2, 3, 4, 5, 6, 8];

/// The smallest factor of `steps` times a power of ten that merges `n` intervals into at most
/// `most`, so that the merged width stays round (the bins' is).
fn round_factor(n: usize, most: usize, steps: &[usize]) -> usize {
    let most = most.max(1);
    let mut decade: usize = 1;
    loop {
        for &f in steps {
            let factor = decade.saturating_mul(f);
            if n.div_ceil(factor) <= most {
                return factor;
            }
        }
        decade = decade.saturating_mul(10);
    }
}

/// Each row of the chart is eight steps high: a column's top cell is a partial block.
const STEPS: usize = 8;

/// The chart of tries per second over time, at most `width` columns wide: one column per
/// interval (merged so that they fit), the height of each its rate. A line under the axis
/// marks the end of the outage.
pub fn chart(series: &Series, outage_end: Option<Duration>, width: usize) -> Vec<String> {
    if series.tries.is_empty() || series.width.is_zero() {
        return Vec::new();
    }
    let fit = fit(series, width);
    if fit.top <= 0.0 {
        return Vec::new();
    }
    let levels = levels(&fit.values, fit.top);
    let columns = levels.len();
    let label_width = fit.label_width;
    let mut lines = vec![format!(
        "tries per second, each column {}",
        hms(fit.merged.width)
    )];
    lines.extend(bar_rows(&levels, &rate(fit.top), label_width));
    lines.push(format!("{:>label_width$} +{}", "0", "-".repeat(columns)));
    // Time labels under the first and the last column.
    let end = hms(fit.merged.width.saturating_mul(columns as u32));
    let pad = label_width + 2;
    let gap = columns.saturating_sub(2 + end.len()).max(1);
    lines.push(format!("{:pad$}0s{:gap$}{end}", "", ""));
    if let Some(at) = outage_end {
        lines.extend(outage_mark(at, fit.merged.width, columns, pad));
    }
    lines
}

/// The series merged to fit the chart, the rate of each column, the tallest, and the width of
/// the labels left of the axis.
struct Fit {
    merged: Series,
    values: Vec<f64>,
    top: f64,
    label_width: usize,
}

/// Merges the series into as many columns as `width` leaves beside the labels.
fn fit(series: &Series, width: usize) -> Fit {
    // The columns depend on the width of the labels, which depend on the columns: a first
    // guess at the labels' width, then again if the top label is wider.
    let mut label_width = 6;
    loop {
        let columns = width.saturating_sub(label_width + 2).max(CHART_MIN_COLUMNS);
        let merged = series.merged(round_factor(series.tries.len(), columns, CHART_STEPS));
        let seconds = merged.width.as_secs_f64();
        let values: Vec<f64> = merged.tries.iter().map(|&n| n as f64 / seconds).collect();
        let top = values.iter().copied().fold(0.0, f64::max);
        let needed = rate(top).len();
        if needed <= label_width {
            return Fit {
                merged,
                values,
                top,
                label_width,
            };
        }
        label_width = needed;
    }
}

/// The height of each column in steps, the tallest `CHART_ROWS × STEPS`.
fn levels(values: &[f64], top: f64) -> Vec<usize> {
    values
        .iter()
        .map(|v| {
            let level = (v / top * (CHART_ROWS * STEPS) as f64).round() as usize;
            // Any try at all shows.
            level.clamp(usize::from(*v > 0.0), CHART_ROWS * STEPS)
        })
        .collect()
}

/// The rows of bars from the top down, the top one labelled with the highest rate.
fn bar_rows(levels: &[usize], top: &str, label_width: usize) -> Vec<String> {
    (0..CHART_ROWS)
        .map(|row| {
            // The steps below this row's cells.
            let floor = (CHART_ROWS - 1 - row) * STEPS;
            let label = if row == 0 { top } else { "" };
            let bars: String = levels
                .iter()
                .map(|&level| match level.saturating_sub(floor) {
                    0 => ' ',
                    n if n >= STEPS => '█',
                    n => PARTIAL[n - 1],
                })
                .collect();
            format!("{label:>label_width$} |{}", bars.trim_end())
        })
        .collect()
}

/// The mark under the column where the outage ends at `at`, when the chart reaches it; `pad`
/// is the width left of the axis.
fn outage_mark(at: Duration, column_width: Duration, columns: usize, pad: usize) -> Option<String> {
    let column =
        usize::try_from(at.as_nanos() / column_width.as_nanos().max(1)).unwrap_or(usize::MAX);
    if column >= columns {
        return None;
    }
    let text = format!("the outage ends at {}", hms(at));
    // The words to the right of the mark when they fit, else to its left.
    Some(if column + 2 + text.len() <= columns {
        format!("{:pad$}{:column$}^ {text}", "", "")
    } else {
        let before = column.saturating_sub(text.len() + 1);
        format!("{:pad$}{:before$}{text} ^", "", "")
    })
}

fn print_json(
    config: &Config,
    sim: &Simulation,
    seed: u64,
    results: &Results,
    out: &mut impl Write,
) -> io::Result<()> {
    let scenario = &sim.scenario;
    // A simulation without --compare is the row of the policy's own jitter and options.
    let own = Variant {
        jitter: config.policy.waits.jitter,
        quota: scenario.quota.is_some(),
        throttle: scenario.throttle.is_some(),
    };
    let runs: Vec<(&Variant, &Figures)> = match results {
        Results::One(f) => vec![(&own, f)],
        Results::Compare(rows) => rows.iter().map(|(v, f)| (v, f)).collect(),
    };
    let objects = std::iter::once(json_header(config, sim, seed)).chain(
        runs.into_iter()
            .flat_map(|(variant, f)| json_intervals(variant, f).chain([json_figures(variant, f)])),
    );
    for obj in objects {
        writeln!(out, "{}", obj.finish())?;
    }
    Ok(())
}

/// The `simulation_start` event: the policy and the scenario.
fn json_header(config: &Config, sim: &Simulation, seed: u64) -> Obj {
    let scenario = &sim.scenario;
    let mut start = layout::json_start("simulation_start", config, seed)
        .str("model", scenario.model.name())
        .num("clients", scenario.clients);
    if let Model::Outage(o) = &scenario.model {
        start = start.num("outage_ms", millis(o.until));
        start = match o.capacity {
            Some(c) => start.float("capacity_per_second", c),
            None => start.raw("capacity_per_second", "null"),
        };
        start = start.num("latency_ms", millis(o.latency));
    }
    if let Some(most) = scenario.stagger {
        start = start.num("stagger_ms", millis(most));
    }
    if let Some(params) = scenario.quota {
        start = start.str("quota", &params.to_string());
    }
    fleet::json_start(start, scenario).bool("compare", sim.compare)
}

/// The fields that say which simulation a line belongs to (which row of `--compare`): its
/// jitter, and whether it used the quota and the throttle.
fn variant_fields(obj: Obj, v: &Variant) -> Obj {
    obj.str("jitter", v.jitter.name())
        .bool("quota", v.quota)
        .bool("throttle", v.throttle)
}

/// Rounded to a thousandth, for JSON.
fn thousandths(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The `interval` events of one run: its tries per interval, merged in round steps.
fn json_intervals<'a>(variant: &'a Variant, f: &Figures) -> impl Iterator<Item = Obj> + 'a {
    let series = f.series.merged(round_factor(
        f.series.tries.len(),
        JSON_INTERVALS,
        JSON_STEPS,
    ));
    let width = series.width;
    series.tries.into_iter().enumerate().map(move |(i, tries)| {
        let from = width.saturating_mul(i as u32);
        variant_fields(Obj::new().str("event", "interval"), variant)
            .num("start_ms", millis(from))
            .num("end_ms", millis(from.saturating_add(width)))
            .num("tries", tries)
            .float(
                "per_second",
                thousandths(tries as f64 / width.as_secs_f64()),
            )
    })
}

/// The reasons of `gave_up` in every `figures` line, 0 when no run gave up so.
const GAVE_UP_ALWAYS: [&str; 5] = ["tries", "budget", "quota", "held", "permanent"];

/// The `figures` event of one run: every field in every line, 0 (or null, or false) where
/// nothing happened, so that a program reads the lines alike.
fn json_figures(variant: &Variant, f: &Figures) -> Obj {
    let failed = Obj::new()
        .num("outage", f.failures.outage)
        .num("overload", f.failures.overload)
        .num("conflict", f.failures.conflict)
        .num("timeout", f.failures.timeout);
    let mut gave_up = Obj::new();
    for why in GAVE_UP_ALWAYS {
        gave_up = gave_up.num(why, f.gave_up_for(why));
    }
    // Any other reason a run gave up for (`consecutive`), when one did.
    for (why, n) in f
        .gave_up
        .iter()
        .filter(|(w, _)| !GAVE_UP_ALWAYS.contains(w))
    {
        gave_up = gave_up.num(why, *n);
    }
    let obj = variant_fields(Obj::new().str("event", "figures"), variant)
        .num("clients", f.clients)
        .num("tries", f.tries)
        .float("per_client", thousandths(f.per_client()))
        .obj("failed", failed)
        .float("peak_per_second", f.peak.per_second())
        .num("peak_at_ms", millis(f.peak.at))
        .float("peak_retries_per_second", f.peak_retries.per_second())
        .num("peak_retries_at_ms", millis(f.peak_retries.at))
        .num("peak_window_ms", millis(PEAK_WINDOW))
        .num("last_finish_ms", millis(f.last_finish))
        .num("succeeded", f.succeeded)
        .obj("gave_up", gave_up)
        .num("unfinished", f.unfinished)
        .num("past_clock", f.past_clock);
    let obj = fleet::json_figures(obj, f);
    match f.stopped {
        Some(s) => obj
            .str("stopped_by", s.by.word())
            .num("stopped_at_wave", s.wave),
        None => obj
            .raw("stopped_by", "null")
            .opt_num("stopped_at_wave", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(width_ms: u64, tries: &[u64]) -> Series {
        Series {
            width: Duration::from_millis(width_ms),
            tries: tries.to_vec(),
        }
    }

    #[test]
    fn round_factors_go_one_two_five_ten() {
        let f = |n| round_factor(n, 200, JSON_STEPS);
        assert_eq!(f(100), 1);
        assert_eq!(f(201), 2);
        assert_eq!(f(401), 5);
        assert_eq!(f(1001), 10);
        assert_eq!(f(4000), 20);
        assert_eq!(f(4001), 50);
        let f = |n| round_factor(n, 70, CHART_STEPS);
        assert_eq!(f(70), 1);
        assert_eq!(f(141), 3);
        assert_eq!(f(500), 8);
        assert_eq!(f(561), 10);
    }

    #[test]
    fn the_chart_fits_the_width_and_its_tallest_column_is_its_peak() {
        let tries: Vec<u64> = (0..1000)
            .map(|i| if i % 100 == 0 { 50 } else { 1 })
            .collect();
        for width in [40, 80, 132] {
            let lines = chart(&series(10, &tries), None, width);
            assert!(
                lines.iter().all(|l| l.chars().count() <= width),
                "{width}: {lines:#?}"
            );
            // The spikes reach the top row.
            assert!(lines[1].contains('█'), "{lines:#?}");
            assert_eq!(lines.len(), 1 + CHART_ROWS + 2);
        }
    }

    #[test]
    fn the_chart_of_a_short_series_has_a_column_per_interval() {
        let lines = chart(&series(1, &[10, 0, 5]), None, 80);
        // 10 tries in 1ms is 10000/s.
        assert!(lines[1].starts_with(" 10000 |█"), "{lines:#?}");
        assert_eq!(lines[CHART_ROWS + 1], "     0 +---");
    }

    #[test]
    fn the_chart_marks_the_end_of_the_outage() {
        let lines = chart(&series(1000, &[5; 60]), Some(Duration::from_secs(10)), 80);
        let last = lines.last().unwrap();
        assert_eq!(last.find('^'), Some(8 + 10), "{lines:#?}");
        assert!(last.ends_with("the outage ends at 10s"), "{last}");
    }

    #[test]
    fn rates_are_whole_from_ten_on() {
        assert_eq!(rate(10000.0), "10000");
        assert_eq!(rate(12.6), "13");
        assert_eq!(rate(2.5), "2.5");
        assert_eq!(rate(3.0), "3");
    }

    fn figures() -> Figures {
        Figures {
            clients: 10,
            tries: 25,
            failures: crate::sim::Failures {
                outage: 12,
                timeout: 3,
                ..Default::default()
            },
            peak: crate::sim::Peak {
                tries: 10,
                at: Duration::ZERO,
            },
            peak_retries: crate::sim::Peak::default(),
            last_finish: Duration::from_millis(2500),
            succeeded: 8,
            gave_up: vec![("tries", 1), ("budget", 0), ("quota", 0)],
            unfinished: 1,
            past_clock: 0,
            stopped: None,
            series: series(1, &[10]),
            fleet: crate::sim::Fleet::default(),
        }
    }

    #[test]
    fn the_figures_read_from_hand_built_figures() {
        assert_eq!(
            figure_lines(&figures()),
            [
                "tries:     25 in all, 2.50 per client; failed: 12 in the outage, 3 timed out",
                "peak:      100 tries/s (10 in the 100ms from 0s); no retries",
                "finished:  the last client at 2.5s",
                "succeeded: 8 of 10",
                "gave up:   1 of 10 (tries 1)",
                "unfinished: 1 of 10, still retrying when the simulation stopped after 25 tries, \
                 the most it makes",
            ]
        );
    }

    #[test]
    fn the_compare_table_names_each_variant_and_what_did_not_finish() {
        let variant = |jitter, quota| Variant {
            jitter,
            quota,
            throttle: false,
        };
        let rows = [
            (variant(Jitter::None, false), figures()),
            (variant(Jitter::Decorrelated, true), figures()),
        ];
        let lines = table(&rows, true);
        assert_eq!(
            lines[0],
            "jitter        quota  tries  per client  peak tries/s  peak retries/s  \
             last finished  succeeded            gave up"
        );
        assert_eq!(
            lines[2],
            "decorrelated  yes       25        2.50           100               0           \
             2.5s          8  1 (+1 unfinished)"
        );
    }
}
