//! The tries of one run, counted for the end of its log: the annotation's summary and the
//! job summary's table.

use std::collections::VecDeque;
use std::time::Duration;

use crate::duration::hms;
use crate::policy::{Form, Outcome, RepeatCount, RepeatEnd};

/// The last line of `--repeat`: `200 tries, 3 failed (1.5%): exit 1 ×2, timed out ×1; first
/// failure on try 17`, and how it ended when not by running every try asked for.
pub fn repeat_summary(count: &RepeatCount, why: &RepeatEnd) -> String {
    if count.tries == 0 {
        if let RepeatEnd::Budget(None) = why {
            return "no try ran to its end: the end of the budget stopped try 1".to_string();
        }
    }
    let mut text = format!(
        "{}, {} failed ({})",
        match count.tries {
            1 => "1 try".to_string(),
            n => format!("{n} tries"),
        },
        count.failed,
        count.failed_share().percent()
    );
    if !count.outcomes.is_empty() {
        let each: Vec<String> = count
            .outcomes
            .iter()
            .map(|(outcome, n)| match outcome {
                // A try that exited 0 failed only by not being ready (--until-output).
                Outcome::Exit(0) => format!("not ready ×{n}"),
                outcome => format!("{} ×{n}", outcome.words(Form::Count(None))),
            })
            .collect();
        text += &format!(": {}", each.join(", "));
    }
    if let Some((attempt, _)) = count.first_failure {
        text += &format!("; first failure on try {attempt}");
    }
    match why {
        RepeatEnd::Done | RepeatEnd::Failed => {}
        RepeatEnd::Budget(Some(exceeded)) => text += &format!("; stopped: {exceeded}"),
        RepeatEnd::Budget(None) => text += "; the end of the budget stopped the last try",
        RepeatEnd::Interrupted(signal) => text += &format!("; interrupted by {signal}"),
    }
    text
}

/// One try, as the summary table shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TryRow {
    /// `3/5`, or `3` without a try limit.
    pub try_label: String,
    /// The outcome in the words of a count (`Form::Count`).
    pub outcome: String,
    pub took: Duration,
    /// The wait after it, if another try was planned.
    pub wait: Option<Duration>,
    /// `transient`, `permanent: --stop-on 2`.
    pub verdict: String,
}

/// How many rows of the start and of the end of a long run the summary keeps: a run without a
/// try limit may try for days, and the summary (GitHub takes 1 MiB per step) stays readable.
const KEEP: usize = 25;

/// The tries of one run, for the annotation and the summary: the failed outcomes counted,
/// and the first and last `KEEP` rows, so that memory stays bounded however long the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    head: Vec<TryRow>,
    tail: VecDeque<TryRow>,
    rows: u64,
    /// Each failed outcome, in the order first seen, with how many tries ended so.
    failures: Vec<(String, u64)>,
    /// The end of the run has been announced: it is, once, when the run has ended.
    concluded: bool,
}

/// `after 3 tries`, `after 1 try`, or `before the first try` for a run stopped during its
/// stagger.
pub fn after_tries(tries: u64) -> String {
    match tries {
        0 => "before the first try".into(),
        1 => "after 1 try".into(),
        n => format!("after {n} tries"),
    }
}

impl Tally {
    /// True the first time only: the end of a run is announced once.
    pub fn conclude_once(&mut self) -> bool {
        !std::mem::replace(&mut self.concluded, true)
    }

    /// Adds a try that ended; `failed` counts it among the failures.
    pub fn record(&mut self, row: TryRow, failed: bool) {
        if failed {
            match self.failures.iter_mut().find(|(o, _)| *o == row.outcome) {
                Some((_, n)) => *n = n.saturating_add(1),
                None => self.failures.push((row.outcome.clone(), 1)),
            }
        }
        self.rows = self.rows.saturating_add(1);
        if self.head.len() < KEEP {
            self.head.push(row);
            return;
        }
        if self.tail.len() == KEEP {
            self.tail.pop_front();
        }
        self.tail.push_back(row);
    }

    /// How many tries failed.
    pub fn failed(&self) -> u64 {
        self.failures.iter().map(|(_, n)| n).sum()
    }

    /// The failed outcomes, in the order first seen, counted when repeated:
    /// `exit 1 ×4, timed out`.
    pub fn failures(&self) -> String {
        self.failures
            .iter()
            .map(|(outcome, n)| match n {
                1 => outcome.clone(),
                n => format!("{outcome} ×{n}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The summary of a run that succeeded on try `try_label` after failures:
    /// `succeeded on try 3/5 after 2 failures: exit 1, timed out (35s in all, 4.39s waiting)`.
    pub fn succeeded(&self, try_label: &str, elapsed: Duration, waited: Duration) -> String {
        let failed = self.failed();
        format!(
            "succeeded on try {try_label} after {failed} {}: {} ({} in all, {} waiting)",
            if failed == 1 { "failure" } else { "failures" },
            self.failures(),
            hms(elapsed),
            hms(waited)
        )
    }

    /// The summary of a run that gave up after `tries` tries:
    /// `gave up after 3 tries in 2.1s, no tries left: exit 4 ×3`.
    /// `why` is the reason in the words of every record (`words::give_up_reason`).
    pub fn gave_up(&self, tries: u64, elapsed: Duration, why: &str) -> String {
        let mut text = format!("gave up {} in {}, {why}", after_tries(tries), hms(elapsed));
        if !self.failures.is_empty() {
            text += ": ";
            text += &self.failures();
        }
        text
    }

    /// The Markdown that a run appends to the job summary: a heading that names it (its label,
    /// or its command), `summary`, and the table of its tries.
    pub fn markdown(&self, label: Option<&str>, command: &str, summary: &str) -> String {
        let mut out = match label {
            Some(name) => format!(
                "### retry: {}\n\n{}: {}\n\n",
                markdown_text(name),
                code_span(command),
                markdown_text(summary)
            ),
            None => format!(
                "### retry: {}\n\n{}\n\n",
                code_span(command),
                markdown_text(summary)
            ),
        };
        if self.rows == 0 {
            return out;
        }
        out += "| try | outcome | duration | wait | verdict |\n";
        out += "|---:|:---|---:|---:|:---|\n";
        for row in &self.head {
            push_row(&mut out, row);
        }
        let shown = (self.head.len() + self.tail.len()) as u64;
        if self.rows > shown {
            let more = self.rows - shown;
            out += &format!("| … | {more} more tries | | | |\n");
        }
        for row in &self.tail {
            push_row(&mut out, row);
        }
        out.push('\n');
        out
    }
}

fn push_row(out: &mut String, row: &TryRow) {
    let wait = row.wait.map_or_else(|| "-".to_string(), hms);
    out.push_str(&format!(
        "| {} | {} | {} | {} | {} |\n",
        markdown_text(&row.try_label),
        markdown_text(&row.outcome),
        hms(row.took),
        wait,
        markdown_text(&row.verdict)
    ));
}

/// Text made literal in Markdown, in a table cell too: the characters that start emphasis,
/// code, links, HTML, entities or a new cell are escaped with a backslash. The text is one
/// printable line already (the log's own escaping).
pub fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` as a Markdown code span, whatever backticks it holds: the fence is one backtick
/// longer than its longest run of them.
pub fn code_span(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_summary_counts_each_way_of_failing_and_never_rounds_a_failure_away() {
        let count = RepeatCount {
            tries: 12_000,
            failed: 1,
            outcomes: vec![(Outcome::Exit(0), 1)],
            first_failure: Some((7, Outcome::Exit(0))),
        };
        assert_eq!(
            repeat_summary(&count, &RepeatEnd::Done),
            "12000 tries, 1 failed (<0.1%): not ready ×1; first failure on try 7"
        );
        let line = |failed, tries| {
            let count = RepeatCount {
                tries,
                failed,
                outcomes: vec![(Outcome::Exit(1), failed)],
                first_failure: Some((1, Outcome::Exit(1))),
            };
            repeat_summary(&count, &RepeatEnd::Done)
        };
        let share = |failed, tries: u64| {
            let line = line(failed, tries);
            let from = line.find('(').unwrap() + 1;
            line[from..line.find(')').unwrap()].to_string()
        };
        assert_eq!(
            line(1999, 2000),
            "2000 tries, 1999 failed (>99.9%): exit 1 ×1999; first failure on try 1"
        );
        assert_eq!(share(1, 2000), "<0.1%");
        assert_eq!(share(1, 10_000), "<0.1%");
        assert_eq!(share(9_999, 10_000), ">99.9%");
        assert_eq!(share(2000, 2000), "100%");
        assert_eq!(share(3, 200), "1.5%");
        let none = RepeatCount {
            tries: 1,
            ..RepeatCount::default()
        };
        let why = RepeatEnd::Interrupted(crate::policy::Signal::INT);
        assert_eq!(
            repeat_summary(&none, &why),
            "1 try, 0 failed (0%); interrupted by SIGINT"
        );
    }
}
