//! What CI systems read (docs/log.md#terminals-ci-and-nesting): GitHub Actions' annotations, groups
//! and job summary, and GitLab's collapsible sections. Three sinks of the run's events: the tally
//! of its tries (which announces the end of a run that retried or gave up, once), the job summary,
//! and the markers written to standard error.

use std::io::Write;
use std::time::SystemTime;

use crate::exit::ExitStatus;
use crate::report::event::{Ends, Envelope, Event, Level, Warning};
pub use crate::report::facts::{Ci, System};
use crate::report::facts::{RunFacts, Sink};
use crate::report::out::Out;

use crate::report::{charset, printable};

/// The name of the run in CI output: `retry`, or `retry[NAME]` with `--label`.
pub fn run_name(label: Option<&str>) -> String {
    match label {
        Some(name) => format!("retry[{name}]"),
        None => "retry".to_string(),
    }
}

/// The title of a folded try: `retry: try 2/3`, `retry[NAME]: try 2/3`.
pub fn fold_title(label: Option<&str>, try_label: &str) -> String {
    format!("{}: try {try_label}", run_name(label))
}

/// Escapes the message of a GitHub workflow command.
fn github_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property (such as `title`) of a GitHub workflow command.
fn github_property(text: &str) -> String {
    github_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// A GitHub annotation, `::warning title=retry[NAME]::NAME: MESSAGE`, or without a label
/// `::warning title=retry: COMMAND::COMMAND: MESSAGE`, so that the annotations of several steps
/// can be told apart. The log view shows the message alone, so the run is named in it as well
/// as in the title.
pub fn annotation(level: &str, label: Option<&str>, command: &str, message: &str) -> String {
    let (title, name) = match label {
        Some(name) => (run_name(label), name.to_string()),
        None => {
            let words = first_words(command);
            (format!("retry: {words}"), words)
        }
    };
    format!(
        "::{level} title={}::{}",
        github_property(&title),
        github_data(&format!("{name}: {message}"))
    )
}

/// The most characters of a command line that name a run in an annotation.
const NAME_WIDTH: usize = 40;

/// The first words of `command` (a command line quoted as in the log), whole words up to
/// [`NAME_WIDTH`] characters, then `…`; a first word longer than that is cut between its
/// escapes, never inside one (`\x01` whole or not at all).
fn first_words(command: &str) -> String {
    if command.chars().count() <= NAME_WIDTH {
        return command.to_string();
    }
    let cut = crate::text::cut(command, NAME_WIDTH, "");
    let words = match cut.rfind(' ') {
        Some(space) if space > 0 => &cut[..space],
        _ => &cut,
    };
    format!("{words} …")
}

pub fn github_group(title: &str) -> String {
    format!("::group::{}", github_data(title))
}

pub const GITHUB_END_GROUP: &str = "::endgroup::";

/// The name of the GitLab section of try `attempt` of run `run_id`: unique in a job's log, in
/// which sections with one name would be taken for one.
pub fn gitlab_section_name(run_id: &str, attempt: u64) -> String {
    let id: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    format!("retry-{id}-try-{attempt}")
}

/// The line that opens a collapsed GitLab section at `ts` (seconds since the epoch).
pub fn gitlab_section_start(ts: u64, name: &str, title: &str) -> String {
    format!("\x1b[0Ksection_start:{ts}:{name}[collapsed=true]\r\x1b[0K{title}")
}

/// The line that closes the GitLab section `name` at `ts`.
pub fn gitlab_section_end(ts: u64, name: &str) -> String {
    format!("\x1b[0Ksection_end:{ts}:{name}\r\x1b[0K")
}

/// Appends the table of a run's tries to `GITHUB_STEP_SUMMARY` when its end is announced, in
/// one write to a file opened for appending, so that runs ending together in one step never
/// interleave their tables.
#[derive(Default)]
pub struct StepSummary;

impl Sink for StepSummary {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let path = facts.ci.step_summary.as_ref()?;
        // Only the conclusion: the stage has made it from whatever ended the run.
        let Event::Concluded { summary, tally, .. } = &envelope.event else {
            return None;
        };
        let text = tally.markdown(facts.run_label.as_deref(), &facts.command, summary);
        append(path, &text)
            .err()
            .map(|e| Warning::SummaryNotWritten {
                path: path.clone(),
                why: e.to_string(),
            })
    }
}

/// Appends `text` to the file at `path` in one write, so that runs ending together never
/// interleave what they write. Only to a regular file: the file is opened without blocking, so
/// that a FIFO nobody reads (or a device) is a warning at once, not a run that never ends.
fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    file.write_all(text.as_bytes())
}

/// The step outputs of GitHub Actions (docs/ci.md#step-outputs): every run appends `tries`,
/// `exit_code` (its own exit status), `flaky`, `outcome` (`success`, `gave_up`, `interrupted`) and
/// `reason` (why it gave up; empty after a success) to `GITHUB_OUTPUT`, as `name=value` lines in
/// one write, so that a later step reads `steps.ID.outputs.tries`. A second run in the same step
/// writes its own, which GitHub keeps, as it keeps the last value of a name.
#[derive(Default)]
pub struct StepOutputs;

impl Sink for StepOutputs {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let path = facts.ci.outputs.as_ref()?;
        let outputs = step_outputs(&envelope.event)?;
        let text: String = outputs
            .iter()
            .map(|(name, value)| format!("{name}={value}\n"))
            .collect();
        append(path, &text)
            .err()
            .map(|e| Warning::OutputsNotWritten {
                path: path.clone(),
                why: e.to_string(),
            })
    }
}

/// The step outputs of the event that ends a run, in the order they are written. Every value
/// is a number or a word: none can hold a line break.
pub fn step_outputs(event: &Event) -> Option<[(&'static str, String); 5]> {
    let (tries, code, flaky, outcome, reason) = match event.ends() {
        Ends::Run(outcome) => (
            outcome.tries.counted,
            outcome.status.code(),
            outcome.flaky(),
            outcome.word(),
            outcome.reason().unwrap_or(""),
        ),
        // A replay writes one set for the whole of it: its runs leave theirs unwritten.
        Ends::Replay {
            pending,
            tries,
            flaky,
            status,
        } => {
            let (outcome, reason) = replay_outcome(status, pending);
            (tries, status.code(), flaky, outcome, reason)
        }
        Ends::Try(_) | Ends::TryInterrupted(_) | Ends::TryHeld(_) | Ends::Neither => {
            return None;
        }
    };
    Some([
        ("tries", tries.to_string()),
        ("exit_code", code.to_string()),
        ("flaky", flaky.to_string()),
        ("outcome", outcome.to_string()),
        ("reason", reason.to_string()),
    ])
}

/// The `outcome` and `reason` of a replay that exits with `status`, `pending` runs left.
fn replay_outcome(status: ExitStatus, pending: usize) -> (&'static str, &'static str) {
    match (status, pending) {
        (ExitStatus::Reraise(_), _) => ("interrupted", "interrupted"),
        (ExitStatus::Success, 0) => ("success", ""),
        (_, 0) => ("gave_up", "error"),
        _ => ("gave_up", "pending"),
    }
}

/// The markers of GitHub Actions and GitLab CI, always on standard error, where the CI reads
/// them whatever `--log-file` says: the output of every try after the first folded (a first
/// try follows no failure, so a run that succeeds at once shows its output), and under GitHub
/// the one annotation that announces the end of a run, and one for a Redis quota that refused
/// the password or the user (a misconfiguration nobody would see in a log that went on).
pub struct Markers {
    /// The group (GitHub, an empty name) or section (GitLab, its name) open around a try.
    fold: Option<String>,
    /// Whether the refusal of the quota's store has been annotated.
    refusal_annotated: bool,
    /// Where the markers go: standard error, or what holds it (`--output-on-failure`).
    out: Box<dyn Out>,
    /// Where the annotation of the run's end goes, which a run that withholds its output passes on whatever its end.
    announce: Box<dyn Out>,
}

impl Sink for Markers {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let system = facts.ci_markers()?;
        let unix_secs = envelope
            .stamp
            .at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match &envelope.event {
            Event::TryStarted { attempt } => self.open(system, *attempt, unix_secs, facts),
            Event::TryOutputDone { .. } => self.close(system, unix_secs, facts),
            // `-q` asks for no announcement of a success.
            Event::Concluded { level, summary, .. }
                if system == System::GitHub && !(facts.quiet && *level == Level::Warning) =>
            {
                let label = facts.run_label.as_deref();
                let line = annotation(level.word(), label, &facts.command, &printable(summary));
                write_marker(&mut self.announce, &line, facts);
            }
            Event::Warning(w) => self.warning(system, w, facts),
            // The markers frame a try's output, and announce the run's conclusion: whatever
            // ends a try or the run is no marker's.
            _ => {}
        }
        None
    }
}

impl Markers {
    /// Markers written to `out`, and the annotation of the run's end to `announce`.
    pub fn writing_to(out: Box<dyn Out>, announce: Box<dyn Out>) -> Markers {
        Markers {
            fold: None,
            refusal_annotated: false,
            out,
            announce,
        }
    }

    /// Under GitHub, the first refusal of the quota's store is annotated too: a password or
    /// a user that Redis refuses is a misconfiguration someone must see.
    fn warning(&mut self, system: System, warning: &Warning, facts: &RunFacts) {
        if system != System::GitHub
            || self.refusal_annotated
            || !matches!(warning, Warning::QuotaRefused { .. })
        {
            return;
        }
        self.refusal_annotated = true;
        let label = facts.run_label.as_deref();
        let text = crate::report::words::warning_text(warning);
        let line = annotation("warning", label, &facts.command, &printable(&text));
        write_marker(&mut self.out, &line, facts);
    }

    fn open(&mut self, system: System, attempt: u64, unix_secs: u64, facts: &RunFacts) {
        if attempt < 2 || facts.quiet || self.fold.is_some() {
            return;
        }
        let title = fold_title(facts.run_label.as_deref(), &facts.label(attempt));
        match system {
            System::GitHub => {
                write_marker(&mut self.out, &github_group(&title), facts);
                self.fold = Some(String::new());
            }
            System::GitLab => {
                let name = gitlab_section_name(&facts.run_id, attempt);
                let start = gitlab_section_start(unix_secs, &name, &title);
                write_marker(&mut self.out, &start, facts);
                self.fold = Some(name);
            }
        }
    }

    fn close(&mut self, system: System, unix_secs: u64, facts: &RunFacts) {
        let Some(name) = self.fold.take() else {
            return;
        };
        let end = match system {
            System::GitHub => GITHUB_END_GROUP.to_string(),
            System::GitLab => gitlab_section_end(unix_secs, &name),
        };
        write_marker(&mut self.out, &end, facts);
    }
}

/// Writes one CI marker line to `out` (standard error, or what holds it).
fn write_marker(out: &mut Box<dyn Out>, line: &str, facts: &RunFacts) {
    let mut text = if facts.ascii {
        charset::ascii_text(line)
    } else {
        line.to_string()
    };
    text.push('\n');
    out.line(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::GiveUp;
    use crate::policy::Signal;
    use crate::report::tally::{Tally, TryRow, code_span, markdown_text};
    use crate::report::words;
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::time::Duration;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_ci_is_read_from_what_its_runner_sets() {
        assert_eq!(Ci::from_env(env(&[])), Ci::default());
        let github = Ci::from_env(env(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", "/tmp/summary.md"),
        ]));
        assert_eq!(github.system, Some(System::GitHub));
        assert_eq!(github.step_summary, Some(PathBuf::from("/tmp/summary.md")));
        let gitlab = Ci::from_env(env(&[("GITLAB_CI", "true"), ("GITHUB_STEP_SUMMARY", "")]));
        assert_eq!(gitlab.system, Some(System::GitLab));
        assert_eq!(gitlab.step_summary, None);
        let both = Ci::from_env(env(&[("GITLAB_CI", "true"), ("GITHUB_ACTIONS", "true")]));
        assert_eq!(both.system, Some(System::GitHub));
        assert_eq!(Ci::from_env(env(&[("GITHUB_ACTIONS", "1")])).system, None);
    }

    #[test]
    fn an_annotation_escapes_what_would_end_or_split_it() {
        assert_eq!(
            annotation("warning", Some("x"), "make", "50% done\nnext"),
            "::warning title=retry[x]::x: 50%25 done%0Anext"
        );
        assert_eq!(
            annotation("error", Some("db: eu,us"), "make", "gave up"),
            "::error title=retry[db%3A eu%2Cus]::db: eu,us: gave up"
        );
    }

    #[test]
    fn an_annotation_without_a_label_names_the_command_by_its_first_words() {
        assert_eq!(
            annotation("error", None, "curl -fsS http://a:80/x,y", "gave up"),
            "::error title=retry%3A curl -fsS http%3A//a%3A80/x%2Cy::curl -fsS http://a:80/x,y: gave up"
        );
        let long = "sh -c 'for i in 1 2 3 4 5 6 7 8 9; do echo $i; done; exit 1'";
        assert_eq!(first_words(long), "sh -c 'for i in 1 2 3 4 5 6 7 8 9; do …");
        assert_eq!(
            first_words(&"x".repeat(50)),
            format!("{} …", "x".repeat(40))
        );
        assert_eq!(first_words("true"), "true");
        // A first word over the width, quoted with escapes: cut between them, and the escapes
        // of one character's bytes kept together.
        let escaped = format!("$'./{}\\x01\\x02' arg", "a".repeat(34));
        assert_eq!(first_words(&escaped), format!("$'./{} …", "a".repeat(34)));
        let escaped = format!("$'./{}\\xc3\\xa9b' arg", "a".repeat(30));
        assert_eq!(first_words(&escaped), format!("$'./{} …", "a".repeat(30)));
        let escaped = format!("$'./{}\\xc3\\xa9b' arg", "a".repeat(28));
        assert_eq!(
            first_words(&escaped),
            format!("$'./{}\\xc3\\xa9 …", "a".repeat(28))
        );
    }

    #[test]
    fn gitlab_sections_are_named_by_run_and_try() {
        let name = gitlab_section_name("0a1b-2c3d", 2);
        assert_eq!(name, "retry-0a1b-2c3d-try-2");
        assert_eq!(
            gitlab_section_start(1700000000, &name, "retry: try 2/3"),
            "\x1b[0Ksection_start:1700000000:retry-0a1b-2c3d-try-2[collapsed=true]\r\x1b[0Kretry: try 2/3"
        );
        assert_eq!(
            gitlab_section_end(1700000001, &name),
            "\x1b[0Ksection_end:1700000001:retry-0a1b-2c3d-try-2\r\x1b[0K"
        );
    }

    fn row(n: u64, outcome: &str, wait: Option<u64>) -> TryRow {
        TryRow {
            try_label: format!("{n}/9"),
            outcome: outcome.into(),
            took: Duration::from_millis(12),
            wait: wait.map(Duration::from_millis),
            verdict: if outcome == "exit 0" {
                "success".into()
            } else {
                "transient".into()
            },
        }
    }

    #[test]
    fn the_summary_counts_each_failed_outcome_in_the_order_seen() {
        let mut tally = Tally::default();
        tally.record(row(1, "exit 1", Some(100)), true);
        tally.record(row(2, "timed out", Some(200)), true);
        tally.record(row(3, "exit 1", Some(400)), true);
        assert_eq!(tally.failed(), 3);
        assert_eq!(tally.failures(), "exit 1 ×2, timed out");
        let text = tally.gave_up(
            3,
            Duration::from_secs(2),
            &words::give_up_reason(&GiveUp::Tries, None),
        );
        assert_eq!(
            text,
            "gave up after 3 tries in 2s, no tries left: exit 1 ×2, timed out"
        );
        let text = tally.gave_up(
            3,
            Duration::ZERO,
            &words::give_up_reason(&GiveUp::Interrupted, Some(Signal::TERM)),
        );
        assert!(text.starts_with("gave up after 3 tries in 0s, interrupted by SIGTERM: "));
        tally.record(row(4, "exit 0", None), false);
        assert_eq!(
            tally.succeeded("4/9", Duration::from_secs(3), Duration::from_millis(700)),
            "succeeded on try 4/9 after 3 failures: exit 1 ×2, timed out (3s in all, 700ms waiting)"
        );
    }

    #[test]
    fn the_markdown_table_has_a_row_per_try_and_names_the_run() {
        let mut tally = Tally::default();
        tally.record(row(1, "exit 1", Some(100)), true);
        tally.record(row(2, "exit 0", None), false);
        let md = tally.markdown(None, "sh -c 'exit 1|2'", "succeeded on try 2/9");
        assert_eq!(
            md,
            "### retry: `sh -c 'exit 1|2'`\n\n\
             succeeded on try 2/9\n\n\
             | try | outcome | duration | wait | verdict |\n\
             |---:|:---|---:|---:|:---|\n\
             | 1/9 | exit 1 | 12ms | 100ms | transient |\n\
             | 2/9 | exit 0 | 12ms | - | success |\n\n"
        );
        let md = tally.markdown(Some("db *eu*"), "make", "x");
        assert!(
            md.starts_with("### retry: db \\*eu\\*\n\n`make`: x\n\n"),
            "{md}"
        );
    }

    #[test]
    fn a_long_run_keeps_its_first_and_last_rows() {
        let mut tally = Tally::default();
        for n in 1..=1000 {
            tally.record(row(n, "exit 1", Some(1)), true);
        }
        let md = tally.markdown(None, "x", "y");
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        // The header, 25 first rows, the gap, 25 last rows.
        assert_eq!(rows.len(), 52, "{md}");
        assert_eq!(rows[1], "| 1/9 | exit 1 | 12ms | 1ms | transient |");
        assert_eq!(rows[26], "| … | 950 more tries | | | |");
        assert!(rows[27].starts_with("| 976/9 "), "{md}");
        assert!(rows[51].starts_with("| 1000/9 "), "{md}");
        assert_eq!(tally.failures(), "exit 1 ×1000");
    }

    #[test]
    fn markdown_text_and_code_spans_stay_literal() {
        assert_eq!(markdown_text("a|b *c* <d> `e`"), r"a\|b \*c\* \<d\> \`e\`");
        assert_eq!(code_span("plain"), "`plain`");
        assert_eq!(code_span("echo `x` ``y``"), "``` echo `x` ``y`` ```");
        assert_eq!(code_span("`x`"), "`` `x` ``");
    }
}
