//! `man/retry.1` and `completions/` are generated from the clap definition and checked in
//! (spec 13). This test fails when they are stale; to regenerate them, run
//!
//!     RETRY_UPDATE_DOCS=1 cargo test --test docs
//!
//! The other tests here check that the manual renders without a warning and that its examples
//! are valid command lines.

#[path = "docs/man.rs"]
mod man;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use clap_complete::Shell;
use retry::cli::command;
use retry::config::{ParseOutcome, parse};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn generated() -> Vec<(PathBuf, Vec<u8>)> {
    let completions = root().join("completions");
    let mut files = vec![(
        root().join("man/retry.1"),
        man::render(&command()).into_bytes(),
    )];
    for (shell, name) in [
        (Shell::Bash, "retry.bash"),
        (Shell::Zsh, "_retry"),
        (Shell::Fish, "retry.fish"),
        (Shell::Elvish, "retry.elv"),
        (Shell::PowerShell, "_retry.ps1"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut command(), "retry", &mut out);
        files.push((completions.join(name), out));
    }
    files
}

#[test]
fn man_page_and_completions_are_up_to_date() {
    let update = std::env::var_os("RETRY_UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (path, content) in generated() {
        if std::fs::read(&path).ok().as_deref() == Some(&content[..]) {
            continue;
        }
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &content).unwrap();
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated docs: {}\nregenerate them with: RETRY_UPDATE_DOCS=1 cargo test --test docs",
        stale.join(", ")
    );
}

fn man_page() -> String {
    man::render(&command())
}

#[test]
fn the_man_page_documents_every_option() {
    let man = man_page();
    for arg in command().get_arguments() {
        if let Some(long) = arg.get_long() {
            // roff escapes the dashes of options.
            assert!(
                man.contains(&format!("\\-\\-{}", long.replace('-', "\\-"))),
                "--{long} is missing from the man page"
            );
        }
    }
}

#[test]
fn the_man_page_has_the_sections_of_a_manual_in_order() {
    let man = man_page();
    let sections: Vec<&str> = man
        .lines()
        .filter_map(|l| l.strip_prefix(".SH "))
        .map(|s| s.trim_matches('"'))
        .collect();
    assert_eq!(
        sections,
        [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "WHAT IS RETRIED",
            "EXIT STATUS",
            "ENVIRONMENT",
            "FILES",
            "EXAMPLES",
            "SEE ALSO"
        ]
    );
    for status in ["124", "125", "126", "127", "128+N"] {
        assert!(
            man.contains(&format!("\\fB{status}\\fR")),
            "exit status {status}"
        );
    }
    for variable in [
        "RETRY_ATTEMPT",
        "RETRY_RUN_ID",
        "NO_COLOR",
        "GITHUB_ACTIONS",
        "TMPDIR",
    ] {
        assert!(man.contains(&format!("\\fB{variable}\\fR")), "{variable}");
    }
}

/// Renders the page with groff, every warning on, for the device of PostScript and that of a
/// UTF-8 terminal (where man shows it).
#[test]
fn the_man_page_renders_without_a_groff_warning() {
    let man = man_page();
    for device in [None, Some("-Tutf8")] {
        let mut groff = Command::new("groff");
        groff.args(device).args(["-man", "-ww", "-z"]);
        let out = run_with_input(groff, man.as_bytes()).unwrap_or_else(|e| {
            panic!("groff could not be run ({e}): it is in the groff-base package")
        });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "groff -man -ww -z {device:?}: {}\n{stderr}",
            out.status
        );
    }
}

fn run_with_input(mut cmd: Command, input: &[u8]) -> std::io::Result<std::process::Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().expect("piped").write_all(input)?;
    child.wait_with_output()
}

/// A command line as sh splits it, into the commands of its pipeline: quotes, blanks and `|`.
fn shell_words(line: &str) -> Vec<Vec<String>> {
    let mut pipeline = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut quote = None;
    // A backslash at the end of a line continues it, outside quotes.
    let line = line.replace("\\\n", " ");
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, ' ' | '|') => {
                if let Some(w) = word.take() {
                    pipeline.last_mut().unwrap().push(w);
                }
                if c == '|' {
                    pipeline.push(Vec::new());
                }
            }
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    assert!(quote.is_none(), "unbalanced quotes in {line}");
    pipeline.last_mut().unwrap().extend(word);
    pipeline
}

#[test]
fn every_example_of_the_man_page_is_a_valid_retry_command_line() {
    let examples = man::example_lines();
    for line in &examples {
        // man sets a line of 78 columns on an 80-column terminal; an example is indented by 11.
        for part in line.lines() {
            assert!(
                part.len() <= 67,
                "the example {part} is too wide for a terminal"
            );
        }
        let retry = shell_words(line)
            .into_iter()
            .find(|words| words.first().map(String::as_str) == Some("retry"))
            .unwrap_or_else(|| panic!("no retry in the example {line}"));
        match parse(&retry, SystemTime::now()) {
            ParseOutcome::Run(_) => {}
            ParseOutcome::Usage(e) => panic!("the example {line} is a usage error: {e:?}"),
            ParseOutcome::Info(_) => panic!("the example {line} prints help"),
        }
    }
    // --help's examples are among them.
    let help = command()
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    for line in help
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("retry "))
    {
        assert!(
            examples.contains(&line),
            "--help's example {line} is not in the man page"
        );
    }
}
