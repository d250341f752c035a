//! `--simulate` (spec 16) for people and for programs: the figures of a simulation, a chart of
//! tries per second sized to the terminal, the `--compare` table, or all of it as JSON lines.
//! The chart is plain text (full blocks, or `#` where the output is ASCII only) with no colour,
//! so that it reads the same in a terminal, a CI log and under `NO_COLOR`.

use std::io::{self, Write};
use std::time::Duration;

use crate::config::{Config, Simulation};
use crate::duration::{hms, millis};
use crate::policy::Jitter;
use crate::report::json::Obj;
use crate::report::{command_line, describe_policy, policy_json};
use crate::sim::{Figures, Model, PEAK_WINDOW, Series, Variant};

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
    One(Figures),
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
    let scenario = &sim.scenario;
    let clients = match scenario.clients {
        1 => "1 client follows".to_string(),
        n => format!("{n} clients follow"),
    };
    writeln!(
        out,
        "retry: simulation, nothing is run: {clients} this policy at once"
    )?;
    if !config.command.is_empty() {
        writeln!(
            out,
            "  command: {} (not run)",
            command_line(&config.command)
        )?;
    }
    let mut policy = describe_policy(config);
    if matches!(results, Results::Compare(_)) {
        // Each row of the table has its own jitter.
        if let Some(cut) = policy.rfind(", jitter ") {
            policy.truncate(cut);
        }
        policy += ", each jitter in turn";
    }
    writeln!(out, "  policy:  {policy}")?;
    writeln!(out, "  model:   {}", describe_model(&scenario.model))?;
    if let Some(most) = scenario.stagger {
        writeln!(
            out,
            "  stagger: each client's first try waits a random time up to {}",
            hms(most)
        )?;
    }
    if let Some(params) = scenario.quota {
        writeln!(
            out,
            "  quota:   one bucket shared by every client, starting full ({params})"
        )?;
    }
    writeln!(
        out,
        "  seed:    {seed} (pass --seed {seed} to get these figures again)"
    )?;
    writeln!(out)?;
    match results {
        Results::One(figures) => {
            print_figures(figures, out)?;
            writeln!(out)?;
            let outage_end = match &scenario.model {
                Model::Outage(o) if !o.until.is_zero() => Some(o.until),
                _ => None,
            };
            for line in chart(&figures.series, outage_end, width) {
                writeln!(out, "{line}")?;
            }
        }
        Results::Compare(rows) => {
            print_table(rows, scenario.quota.is_some(), out)?;
            if !rows.iter().any(|(v, _)| v.jitter == Jitter::Decorrelated) {
                writeln!(
                    out,
                    "(no row for decorrelated jitter: it cannot be combined with --delays)"
                )?;
            }
        }
    }
    Ok(())
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

fn print_figures(f: &Figures, out: &mut impl Write) -> io::Result<()> {
    let failed = failures(f);
    let failed = if failed.is_empty() {
        String::new()
    } else {
        format!("; failed: {failed}")
    };
    writeln!(
        out,
        "tries:     {} in all, {:.2} per client{failed}",
        f.tries,
        f.per_client()
    )?;
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
    writeln!(
        out,
        "peak:      {} tries/s ({} in the {window} from {}); {retries}",
        rate(f.peak.per_second()),
        f.peak.tries,
        hms(f.peak.at)
    )?;
    if f.succeeded == 0 && f.gave_up_in_all() == 0 {
        writeln!(out, "finished:  no client")?;
    } else {
        writeln!(out, "finished:  the last client at {}", hms(f.last_finish))?;
    }
    writeln!(out, "succeeded: {} of {}", f.succeeded, f.clients)?;
    writeln!(out, "gave up:   {}", gave_up(f))?;
    if f.unfinished > 0 {
        writeln!(
            out,
            "unfinished: {} of {}, still retrying when the simulation stopped after {} tries, the most it makes",
            f.unfinished, f.clients, f.tries
        )?;
    }
    if f.past_clock > 0 {
        writeln!(
            out,
            "past the clock: {} of {}, whose next try or answer would come after the simulated clock ends, at about 584 years ({})",
            f.past_clock,
            f.clients,
            hms(crate::sim::CLOCK_END)
        )?;
    }
    Ok(())
}

fn print_table(rows: &[(Variant, Figures)], quota: bool, out: &mut impl Write) -> io::Result<()> {
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
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(v, f)| {
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
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // The names on the left, the numbers on the right.
    let left = if quota { 2 } else { 1 };
    let line = |cols: Vec<&str>| {
        cols.iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(out, "{}", line(header.clone()))?;
    for row in &cells {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
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

/// The chart of tries per second over time, at most `width` columns wide: one column per
/// interval (merged so that they fit), the height of each its rate. A line under the axis
/// marks the end of the outage.
pub fn chart(series: &Series, outage_end: Option<Duration>, width: usize) -> Vec<String> {
    if series.tries.is_empty() || series.width.is_zero() {
        return Vec::new();
    }
    // The columns depend on the width of the labels, which depend on the columns: a first
    // guess at the labels' width, then again if the top label is wider.
    let mut label_width = 6;
    let (merged, values, top) = loop {
        let columns = width.saturating_sub(label_width + 2).max(CHART_MIN_COLUMNS);
        let merged = series.merged(round_factor(series.tries.len(), columns, CHART_STEPS));
        let seconds = merged.width.as_secs_f64();
        let values: Vec<f64> = merged.tries.iter().map(|&n| n as f64 / seconds).collect();
        let top = values.iter().copied().fold(0.0, f64::max);
        let needed = rate(top).len();
        if needed <= label_width {
            break (merged, values, top);
        }
        label_width = needed;
    };
    if top <= 0.0 {
        return Vec::new();
    }
    // Each row is eight steps high: a column's top cell is a partial block.
    const STEPS: usize = 8;
    let levels: Vec<usize> = values
        .iter()
        .map(|v| {
            let level = (v / top * (CHART_ROWS * STEPS) as f64).round() as usize;
            // Any try at all shows.
            level.clamp(usize::from(*v > 0.0), CHART_ROWS * STEPS)
        })
        .collect();
    let mut lines = vec![format!(
        "tries per second, each column {}",
        hms(merged.width)
    )];
    for row in 0..CHART_ROWS {
        // The steps below this row's cells.
        let floor = (CHART_ROWS - 1 - row) * STEPS;
        let label = if row == 0 { rate(top) } else { String::new() };
        let bars: String = levels
            .iter()
            .map(|&level| match level.saturating_sub(floor) {
                0 => ' ',
                n if n >= STEPS => '█',
                n => PARTIAL[n - 1],
            })
            .collect();
        lines.push(format!("{label:>label_width$} |{}", bars.trim_end()));
    }
    let columns = levels.len();
    lines.push(format!("{:>label_width$} +{}", "0", "-".repeat(columns)));
    // Time labels under the first and the last column.
    let end = hms(merged.width.saturating_mul(columns as u32));
    let pad = label_width + 2;
    let gap = columns.saturating_sub(2 + end.len()).max(1);
    lines.push(format!("{:pad$}0s{:gap$}{end}", "", ""));
    if let Some(at) = outage_end {
        let column =
            usize::try_from(at.as_nanos() / merged.width.as_nanos().max(1)).unwrap_or(usize::MAX);
        if column < columns {
            let text = format!("the outage ends at {}", hms(at));
            // The words to the right of the mark when they fit, else to its left.
            let line = if column + 2 + text.len() <= columns {
                format!("{:pad$}{:column$}^ {text}", "", "")
            } else {
                let before = column.saturating_sub(text.len() + 1);
                format!("{:pad$}{:before$}{text} ^", "", "")
            };
            lines.push(line);
        }
    }
    lines
}

fn print_json(
    config: &Config,
    sim: &Simulation,
    seed: u64,
    results: &Results,
    out: &mut impl Write,
) -> io::Result<()> {
    let scenario = &sim.scenario;
    let mut start = Obj::new()
        .str("event", "simulation_start")
        .words("command", config.command.iter().map(|w| w.as_os_str()))
        .obj("policy", policy_json(config, seed))
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
    writeln!(out, "{}", start.bool("compare", sim.compare).finish())?;
    match results {
        Results::One(f) => print_json_run(None, f, out),
        Results::Compare(rows) => {
            for (variant, f) in rows {
                print_json_run(Some(variant), f, out)?;
            }
            Ok(())
        }
    }
}

/// The fields that say which row of `--compare` a line belongs to.
fn variant_fields(obj: Obj, variant: Option<&Variant>) -> Obj {
    match variant {
        Some(v) => obj.str("jitter", v.jitter.name()).bool("quota", v.quota),
        None => obj,
    }
}

/// Rounded to a thousandth, for JSON.
fn thousandths(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn print_json_run(variant: Option<&Variant>, f: &Figures, out: &mut impl Write) -> io::Result<()> {
    let series = f.series.merged(round_factor(
        f.series.tries.len(),
        JSON_INTERVALS,
        JSON_STEPS,
    ));
    let width = series.width;
    for (i, &tries) in series.tries.iter().enumerate() {
        let from = width.saturating_mul(i as u32);
        let obj = variant_fields(Obj::new().str("event", "interval"), variant)
            .num("start_ms", millis(from))
            .num("end_ms", millis(from.saturating_add(width)))
            .num("tries", tries)
            .float(
                "per_second",
                thousandths(tries as f64 / width.as_secs_f64()),
            );
        writeln!(out, "{}", obj.finish())?;
    }
    let failed = Obj::new()
        .num("outage", f.failures.outage)
        .num("overload", f.failures.overload)
        .num("conflict", f.failures.conflict)
        .num("timeout", f.failures.timeout);
    let mut gave_up = Obj::new();
    for (why, n) in &f.gave_up {
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
        .num("unfinished", f.unfinished);
    let obj = match f.past_clock {
        0 => obj,
        n => obj.num("past_clock", n),
    };
    writeln!(out, "{}", obj.finish())
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
}
