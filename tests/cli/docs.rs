//! `man/retry.1` and `completions/` are generated from the clap definition and checked in
//! (docs/packaging.md#the-manual-and-the-completions). This test fails when they are stale; to
//! regenerate them, run
//!
//!     RETRY_UPDATE_DOCS=1 cargo test --test cli docs::
//!
//! The other tests here check that the manual renders without a warning and that the
//! completions complete, in a real bash with bash-completion, fish and zsh. Where one of them
//! (or groff) is not installed, its test says so loudly and passes; RETRY_REQUIRE_PACKAGES=1, as
//! CI sets it, makes that a failure.

use crate::common;
#[path = "docs/completions.rs"]
mod completions;
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
    let cmd = command();
    let completions = root().join("completions");
    let mut files = vec![
        (root().join("man/retry.1"), man::render(&cmd).into_bytes()),
        (
            completions.join("retry.bash"),
            completions::bash(&cmd).into_bytes(),
        ),
        (
            completions.join("_retry"),
            completions::zsh(&cmd).into_bytes(),
        ),
        (
            completions.join("retry.fish"),
            completions::fish(&cmd).into_bytes(),
        ),
    ];
    for (shell, name) in [
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
        "stale generated docs: {}\nregenerate them with: RETRY_UPDATE_DOCS=1 cargo test --test cli docs::",
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
            "COMING FROM DEBIAN'S RETRY",
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
    let test = "the_man_page_renders_without_a_groff_warning";
    if !common::have_package(test, "groff", "groff-base", common::on_path("groff")) {
        return;
    }
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

/// A directory with two fake commands on PATH, `rtfake-cmd` and `rtfake-other`, so that the
/// commands a completion offers are known.
fn fake_commands() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "completion-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let bin = dir.join("bin");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["rtfake-cmd", "rtfake-other"] {
        let path = bin.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

const BASH_COMPLETION: &str = "/usr/share/bash-completion/bash_completion";

fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What bash, with bash-completion and completions/retry.bash loaded, offers for each line, the
/// cursor at its end: the words are split as bash splits them (at blanks, and around `=` and `:`),
/// and the function that `complete -p retry` names is called as bash calls it.
/// `RETRY_DEBUG_BASH=1` prints the script, to run it by hand.
/// `None` (said loudly) where bash-completion is not installed.
fn bash_complete(test: &str, lines: &[&str]) -> Option<Vec<Vec<String>>> {
    if !common::have_package(
        test,
        BASH_COMPLETION,
        "bash-completion",
        Path::new(BASH_COMPLETION).exists(),
    ) {
        return None;
    }
    let dir = fake_commands();
    // The script as generated, not as checked in: the test of staleness may be rewriting that.
    let completion = dir.join("retry.bash");
    std::fs::write(&completion, completions::bash(&command())).unwrap();
    let mut script = format!(
        "source {BASH_COMPLETION} || exit 3\n\
         source {} || exit 4\n\
         complete -W '--retry-all --other' rtfake-cmd\n\
         spec=$(complete -p retry) || exit 5\n\
         func=${{spec##*-F }} func=${{func%% *}}\n",
        single_quoted(&completion.display().to_string())
    );
    for line in lines {
        let words = bash_words(line);
        let cword = words.len() - 1;
        let cur = match words[cword].as_str() {
            "=" | ":" => "",
            word => word,
        };
        let quoted: Vec<String> = words.iter().map(|w| single_quoted(w)).collect();
        script += &format!(
            "(\n\
             COMP_WORDS=({words}) COMP_CWORD={cword} COMP_LINE={line} COMP_TYPE=9 COMP_KEY=9\n\
             COMP_POINT=${{#COMP_LINE}}\n\
             COMPREPLY=()\n\
             \"$func\" retry {cur} {prev}\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"\n\
             )\n\
             echo '<end>'\n",
            words = quoted.join(" "),
            line = single_quoted(line),
            cur = single_quoted(cur),
            prev = single_quoted(&words[cword - 1]),
        );
    }
    if std::env::var_os("RETRY_DEBUG_BASH").is_some() {
        eprintln!("{script}");
    }
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .current_dir(&dir)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", dir.join("bin").display()),
        )
        .env("HOME", &dir)
        .env("LC_ALL", "C")
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bash: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let replies: Vec<Vec<String>> = stdout
        .split_terminator("<end>\n")
        .map(|reply| {
            let mut reply: Vec<String> = reply
                .lines()
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            // As bash shows them.
            reply.sort();
            reply
        })
        .collect();
    assert_eq!(replies.len(), lines.len(), "{stdout}");
    Some(replies)
}

/// The words bash gives a completion function for `line`: split at blanks, and `=` and `:` words
/// of their own; an empty last word when the line ends with a blank.
fn bash_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    for blank_separated in line.split(' ').filter(|w| !w.is_empty()) {
        let mut word = String::new();
        for c in blank_separated.chars() {
            let is_break = c == '=' || c == ':';
            if !word.is_empty() && word.ends_with(['=', ':']) != is_break {
                words.push(std::mem::take(&mut word));
            }
            word.push(c);
        }
        words.push(word);
    }
    if line.ends_with(' ') {
        words.push(String::new());
    }
    words
}

#[test]
fn bash_completes_the_wrapped_command_where_it_starts() {
    let Some(replies) = bash_complete(
        "bash_completes_the_wrapped_command_where_it_starts",
        &[
            "retry -n 3 -- rtfak",
            "retry rtfak",
            "retry -n 3 rtfak",
            "retry -s KILL -k 1s rtfak",
            "retry -qn 3 rtfak",
            "retry --tries=3 -n3 rtfak",
            "retry --deadline 2026-01-15T08:05:00+07:00 rtfak",
        ],
    ) else {
        return;
    };
    for reply in replies {
        assert_eq!(reply, ["rtfake-cmd", "rtfake-other"]);
    }
}

#[test]
fn bash_hands_the_wrapped_command_over_to_its_own_completion() {
    let Some(replies) = bash_complete(
        "bash_hands_the_wrapped_command_over_to_its_own_completion",
        &[
            "retry -- rtfake-cmd --ret",
            "retry -n 3 rtfake-cmd --ret",
            "retry -t 2s -- rtfake-cmd -n 3 --ret",
            "retry --on-retry rtfake-other rtfake-cmd --",
            "retry -- rtfake-cmd rtfake-other --ret",
        ],
    ) else {
        return;
    };
    assert_eq!(replies[0], ["--retry-all"]);
    assert_eq!(replies[1], ["--retry-all"]);
    assert_eq!(replies[2], ["--retry-all"]);
    assert_eq!(replies[3], ["--other", "--retry-all"]);
    // rtfake-cmd's own argument rtfake-other is not taken for a command of its own.
    assert_eq!(replies[4], ["--retry-all"]);
}

#[test]
fn bash_completes_retrys_own_options_before_the_command() {
    let Some(replies) = bash_complete(
        "bash_completes_retrys_own_options_before_the_command",
        &["retry --retry-o", "retry -n 3 --sto", "retry -"],
    ) else {
        return;
    };
    assert_eq!(replies[0], ["--retry-on"]);
    assert_eq!(replies[1], ["--stop-if-output", "--stop-on"]);
    for opt in completions::options(&command()) {
        for name in opt.names() {
            assert!(replies[2].contains(&name), "{name} in {:?}", replies[2]);
        }
    }
}

#[test]
fn bash_completes_signal_names_for_signal() {
    let Some(replies) = bash_complete(
        "bash_completes_signal_names_for_signal",
        &[
            "retry -s ",
            "retry --signal ",
            "retry --signal=",
            "retry -s RTM",
        ],
    ) else {
        return;
    };
    for reply in &replies[..3] {
        for name in ["TERM", "KILL", "HUP", "INT", "USR1", "RTMIN", "RTMAX"] {
            assert!(reply.iter().any(|r| r == name), "{name} in {reply:?}");
        }
    }
    assert!(
        replies[3].iter().all(|r| r.starts_with("RTM")),
        "{:?}",
        replies[3]
    );
    assert!(
        replies[3].iter().any(|r| r == "RTMIN+1"),
        "{:?}",
        replies[3]
    );
}

#[test]
fn bash_completes_the_values_of_every_option_with_a_fixed_set() {
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for opt in completions::options(&command()) {
        let Some(completions::Value::Choices(choices)) = opt.value else {
            continue;
        };
        cases.extend(opt.short.map(|s| (format!("retry -{s} "), choices.clone())));
        if let Some(long) = opt.long {
            cases.push((format!("retry --{long} "), choices.clone()));
            cases.push((format!("retry -q --{long}="), choices));
        }
    }
    assert!(cases.iter().any(|(line, _)| line == "retry --jitter "));
    let lines: Vec<&str> = cases.iter().map(|(line, _)| line.as_str()).collect();
    let Some(replies) = bash_complete(
        "bash_completes_the_values_of_every_option_with_a_fixed_set",
        &lines,
    ) else {
        return;
    };
    for ((line, choices), reply) in cases.iter().zip(replies) {
        let mut choices = choices.clone();
        choices.sort();
        assert_eq!(reply, choices, "{line}");
    }
    let Some(replies) = bash_complete(
        "bash_completes_the_values_of_every_option_with_a_fixed_set",
        &["retry --jitter=de", "retry --backoff l", "retry --color a"],
    ) else {
        return;
    };
    assert_eq!(replies[0], ["decorrelated"]);
    assert_eq!(replies[1], ["linear"]);
    assert_eq!(replies[2], ["always", "auto"]);
}

#[test]
fn bash_offers_nothing_of_its_own_for_a_value_without_a_fixed_set() {
    let Some(replies) = bash_complete(
        "bash_offers_nothing_of_its_own_for_a_value_without_a_fixed_set",
        &["retry -n ", "retry --delay ", "retry -t 2s -m "],
    ) else {
        return;
    };
    for reply in replies {
        assert!(reply.is_empty(), "{reply:?}");
    }
}

/// zsh's and fish's scripts must at least parse, and fish's must complete (skipped loudly
/// where those shells are not installed, as on a machine with only the Rust toolchain).
#[test]
fn zsh_and_fish_completions_parse_where_those_shells_are_installed() {
    let dir = fake_commands();
    for (shell, file, script) in [
        ("zsh", "_retry", completions::zsh(&command())),
        ("fish", "retry.fish", completions::fish(&command())),
    ] {
        let test = "zsh_and_fish_completions_parse";
        if !common::have_package(test, shell, shell, common::on_path(shell)) {
            continue;
        }
        let path = dir.join(file);
        std::fs::write(&path, script).unwrap();
        let out = Command::new(shell).arg("-n").arg(&path).output().unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{shell} -n {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn fish_completes_the_wrapped_command_where_it_is_installed() {
    let dir = fake_commands();
    let completion = dir.join("retry.fish");
    std::fs::write(&completion, completions::fish(&command())).unwrap();
    let script = format!(
        "source {}\n\
         complete -c rtfake-cmd -f -a 'alpha beta'\n\
         for line in 'retry -s ' 'retry -n 3 -- rtfak' 'retry -qn 3 rtfak' 'retry -- rtfake-cmd al' \
                     'retry --ret' 'retry -- rtfake-cmd --ret' 'retry --jitter ' \
                     'retry -s KILL --tries=3 rtfake-cmd rtfake-other al'\n\
             complete -C $line | string replace -r '\\t.*' ''\n\
             echo '<end>'\n\
         end\n",
        single_quoted(&completion.display().to_string())
    );
    let test = "fish_completes_the_wrapped_command";
    if !common::have_package(test, "fish", "fish", common::on_path("fish")) {
        return;
    }
    let out = Command::new("fish")
        .args(["--no-config", "-c", &script])
        .current_dir(&dir)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", dir.join("bin").display()),
        )
        .env("HOME", &dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replies: Vec<Vec<&str>> = stdout
        .split_terminator("<end>\n")
        .map(|r| r.lines().collect())
        .collect();
    assert!(
        replies[0].contains(&"TERM") && replies[0].contains(&"KILL"),
        "{:?}",
        replies[0]
    );
    assert_eq!(replies[1], ["rtfake-cmd", "rtfake-other"]);
    assert_eq!(replies[2], ["rtfake-cmd", "rtfake-other"]);
    assert_eq!(replies[3], ["alpha"]);
    assert!(replies[4].contains(&"--retry-on"), "{:?}", replies[4]);
    assert!(!replies[5].contains(&"--retry-on"), "{:?}", replies[5]);
    assert_eq!(replies[6], ["decorrelated", "equal", "full", "none"]);
    assert_eq!(replies[7], ["alpha"]);
}

/// The pages a user reads: the README, then `docs/*.md` in the order of their names.
fn markdown_pages() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|entry| entry.expect("read docs/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    let mut pages = vec![root().join("README.md")];
    pages.extend(docs);
    pages
}

fn read_page(page: &Path) -> String {
    std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// A page's path from the root of the checkout, for messages.
fn shown(page: &Path) -> String {
    page.strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string()
}

/// The shell examples of the README and of docs/: every `retry` command line in a ```sh block
/// is one that `retry` accepts.
#[test]
fn every_example_of_the_readme_is_a_valid_retry_command_line() {
    let mut checked = 0;
    for page in markdown_pages() {
        let text = read_page(&page);
        let mut in_sh = false;
        let mut pending = String::new();
        for line in text.lines() {
            match line.trim_end() {
                "```sh" => in_sh = true,
                "```" => in_sh = false,
                _ if in_sh => {
                    // A comment after the command, and a continued line.
                    let code = line.split("  #").next().unwrap_or("").trim_end();
                    if code.trim_start().starts_with('#') {
                        continue;
                    }
                    if let Some(head) = code.strip_suffix('\\') {
                        pending += head;
                        continue;
                    }
                    let whole = std::mem::take(&mut pending) + code;
                    for words in shell_words(&whole) {
                        // A crontab names it by its path (`~/.cargo/bin/retry`).
                        let Some(at) = words
                            .iter()
                            .position(|w| w == "retry" || w.ends_with("/retry"))
                        else {
                            continue;
                        };
                        // A redirection (`>> FILE`) ends the words that retry gets.
                        let args: Vec<String> = words[at..]
                            .iter()
                            .take_while(|w| !w.starts_with('>'))
                            .cloned()
                            .collect();
                        let args = &args[..];
                        // `cargo run --release -- ARGS` runs retry too.
                        if let ParseOutcome::Usage(e) = parse(args, SystemTime::now()) {
                            panic!(
                                "{}: the example {whole} is a usage error: {e:?}",
                                shown(&page)
                            );
                        }
                        checked += 1;
                    }
                }
                _ => {}
            }
        }
    }
    assert!(checked > 20, "only {checked} examples found");
}

/// docs/options.md's overview of `--help` names every option, so that a reader finds the group
/// of each (`--consecutive` in tries and time, `--junit` in the log).
#[test]
fn the_overview_of_help_names_every_option() {
    let page = read_page(&root().join("docs/options.md"));
    let start = page
        .find("`retry --help` lists every option, grouped:")
        .expect("the overview of --help");
    let overview = &page[start..start + page[start..].find("\n\n").unwrap()];
    let mut cmd = command();
    cmd.build();
    let mut missing = Vec::new();
    for arg in cmd.get_arguments() {
        if arg.is_positional()
            || arg.is_hide_set()
            || ["help", "version"].contains(&arg.get_id().as_str())
        {
            continue;
        }
        let short = arg.get_short().map(|c| format!("`-{c}`"));
        let long = arg.get_long().map(|l| format!("`--{l}`"));
        if ![short, long]
            .iter()
            .flatten()
            .any(|name| overview.contains(name.as_str()))
        {
            missing.push(arg.get_id().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "docs/options.md's overview of --help lacks {missing:?}"
    );
}

/// The crontab lines of the README and of docs/ (five time fields, then the command) name
/// `retry` by its path: cron's PATH is `/usr/bin:/bin`, where `cargo install` does not put it
/// and Debian's own `retry`, another program, may be.
#[test]
fn every_crontab_line_of_the_docs_names_retry_by_its_path() {
    let field = |w: &str| w.chars().all(|c| c.is_ascii_digit() || "*/,-".contains(c));
    let mut lines = 0;
    for page in markdown_pages() {
        for line in read_page(&page).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 6
                || !words[..5].iter().all(|w| field(w))
                || !words[..5].iter().any(|w| w.contains('*'))
            {
                continue;
            }
            lines += 1;
            for word in &words[5..] {
                assert!(
                    *word != "retry",
                    "{}: a crontab line names retry without its path: {line}",
                    shown(&page)
                );
            }
            assert!(
                words
                    .iter()
                    .any(|w| *w == "~/.cargo/bin/retry" || *w == "/usr/bin/retry"),
                "{}: {line}",
                shown(&page)
            );
        }
    }
    assert!(lines >= 5, "only {lines} crontab lines found");
}

/// The `--consecutive` health check of docs/classification.md asks every second, as its words
/// say: every wait of its plan, after a failed answer too, is 1s.
#[test]
fn the_consecutive_health_check_asks_every_second() {
    let page = read_page(&root().join("docs/classification.md"));
    let line = page
        .lines()
        .find(|l| l.starts_with("retry --consecutive 3"))
        .expect("the health check");
    assert!(page.contains("ask every second, for a minute at most"));
    let words = shell_words(line).remove(0);
    let mut args: Vec<String> = vec![
        "retry".into(),
        "--dry-run".into(),
        "--log-format".into(),
        "json".into(),
    ];
    args.extend(words[1..].iter().cloned());
    let out = common::retry().args(&args[1..]).output().unwrap();
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{shown}");
    let waits: Vec<u64> = shown
        .lines()
        .filter(|l| l.contains("\"event\":\"plan\""))
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["delay_ms"].as_u64()
        })
        .collect();
    assert!(waits.len() >= 30, "{shown}");
    assert!(waits.iter().all(|&w| w == 1000), "{waits:?}");
}

/// The README starts with the two commands that build and try `retry` and run its tests.
#[test]
fn the_readme_starts_with_its_two_commands() {
    let readme = read_page(&root().join("README.md"));
    let start: Vec<&str> = readme.lines().take(5).collect();
    assert_eq!(start[..3], ["# retry", "", "```sh"], "{start:?}");
    assert!(start[3].starts_with("cargo run --release -- "), "{start:?}");
    assert_eq!(start[4], "cargo test --locked", "{start:?}");
}

/// A page's text outside its fenced code blocks and inline code spans, where a `[text](target)`
/// is a link and a line starting with `#` a heading.
fn prose(text: &str) -> String {
    let mut in_fence = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            lines.push(line);
        }
    }
    // A code span may run over a line break; what is between backticks is code.
    lines
        .join("\n")
        .split('`')
        .step_by(2)
        .collect::<Vec<_>>()
        .join("")
}

/// The anchor GitHub gives a heading: lower case, blanks become `-`, other punctuation is
/// dropped; a heading met again gets `-1`, `-2`...
fn anchors(text: &str) -> Vec<String> {
    let mut anchors: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let Some(heading) = heading.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        if in_fence {
            continue;
        }
        let anchor: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c),
                _ => None,
            })
            .collect();
        let seen = anchors
            .iter()
            .filter(|a| a.as_str() == anchor || a.starts_with(&format!("{anchor}-")))
            .count();
        anchors.push(match seen {
            0 => anchor,
            n => format!("{anchor}-{n}"),
        });
    }
    anchors
}

/// The targets of a page's links: what is between `](` and `)`.
fn link_targets(text: &str) -> Vec<String> {
    prose(text)
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target.to_string()))
        // Markdown takes no blank in a link's target: that is text in brackets and parentheses.
        .filter(|target| !target.contains(char::is_whitespace))
        .collect()
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# retry\n## Cron jobs and batches: dead letters, and replay\n```\n# no\n```\n\
                ## The folds, and `-q`\n## Notes\n## Notes\n";
    assert_eq!(
        anchors(text),
        [
            "retry",
            "cron-jobs-and-batches-dead-letters-and-replay",
            "the-folds-and--q",
            "notes",
            "notes-1"
        ]
    );
    assert_eq!(
        link_targets("[a](x.md#b) `[c](not-a-link)` and [d](\ny.md)\n```\n[e](f)\n```\n"),
        ["x.md#b"]
    );
}

/// Every relative link of the README and of docs/ names a file that exists and, with an
/// `#anchor`, a heading of it; and every page of docs/ is linked from the README or from the
/// index of docs/, docs/README.md, which the README links.
#[test]
fn every_relative_link_of_the_docs_leads_somewhere() {
    let pages = markdown_pages();
    let readme = root().join("README.md");
    let index = root().join("docs/README.md");
    let mut broken = Vec::new();
    let mut linked = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = read_page(page);
        let dir = page.parent().expect("a page is in a directory");
        for target in link_targets(&text) {
            checked += 1;
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|scheme| target.starts_with(scheme))
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = match path {
                "" => page.clone(),
                path => dir.join(path),
            };
            let Ok(file) = file.canonicalize() else {
                broken.push(format!("{}: {target}: no such file", shown(page)));
                continue;
            };
            if *page == readme || *page == index {
                linked.push(file.clone());
            }
            let Some(anchor) = anchor else { continue };
            let headings = match file.extension().and_then(|e| e.to_str()) {
                Some("md") => anchors(&read_page(&file)),
                _ => {
                    broken.push(format!("{}: {target}: an anchor in no page", shown(page)));
                    continue;
                }
            };
            if !headings.iter().any(|h| h == anchor) {
                broken.push(format!("{}: {target}: no such heading", shown(page)));
            }
        }
    }
    for page in &pages[1..] {
        let page = page.canonicalize().expect("a page exists");
        if !linked.contains(&page) {
            broken.push(format!(
                "{}: not linked from the README nor from docs/README.md",
                shown(&page)
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(checked > 30, "only {checked} links found");
}

/// The Rust files of a directory and of the directories below it.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("read a directory").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The pointers of a text to the pages of docs/, comments included: the path of each page
/// named under docs/, with its `#anchor` when one follows, and the line it is on.
fn doc_pointers(text: &str) -> Vec<(usize, String)> {
    let page_char = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let anchor_char = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    let mut pointers = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("docs/") {
            let before = rest[..at].chars().next_back();
            let after = &rest[at + "docs/".len()..];
            rest = after;
            // `tests/docs/x.rs` or `/usr/share/docs/` are not pointers to the pages.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '_') {
                continue;
            }
            let name: String = after.chars().take_while(|&c| page_char(c)).collect();
            // A sentence's full stop after the name is not part of it.
            let Some(name) = name.trim_end_matches('.').strip_suffix(".md") else {
                continue;
            };
            let mut pointer = format!("docs/{name}.md");
            if let Some(anchor) = after[name.len() + ".md".len()..].strip_prefix('#') {
                let anchor: String = anchor.chars().take_while(|&c| anchor_char(c)).collect();
                pointer = format!("{pointer}#{anchor}");
            }
            pointers.push((n + 1, pointer));
        }
    }
    pointers
}

#[test]
fn doc_pointers_are_found_in_code_and_comments() {
    // Spelt in two halves, so that this file holds no pointer of its own to check.
    let d = "doc";
    let text = format!(
        "/// As {d}s/log.md#human-format says.\n// ({d}s/a.md, {d}s/b.md#c-d_e)\n\
         let p = \"tests/{d}s/man.rs\"; // {d}s/c.md.\n"
    );
    assert_eq!(
        doc_pointers(&text),
        [
            (1, format!("{d}s/log.md#human-format")),
            (2, format!("{d}s/a.md")),
            (2, format!("{d}s/b.md#c-d_e")),
            (3, format!("{d}s/c.md")),
        ]
    );
}

/// Every pointer of the code, the tests and the benchmarks to a page of docs/ (`docs/log.md#human-format`,
/// in a comment or anywhere else) names a page that exists and, with an `#anchor`, a heading
/// of that page, its anchor made as GitHub makes it.
#[test]
fn every_pointer_of_the_code_to_the_docs_leads_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in rust_files(&root().join("src"))
        .into_iter()
        .chain(rust_files(&root().join("tests")))
        .chain(rust_files(&root().join("benches")))
    {
        let text = read_page(&file);
        for (line, pointer) in doc_pointers(&text) {
            checked += 1;
            let (page, anchor) = match pointer.split_once('#') {
                Some((page, anchor)) => (page, Some(anchor)),
                None => (pointer.as_str(), None),
            };
            let page = root().join(page);
            if !page.is_file() {
                broken.push(format!("{}:{line}: {pointer}: no such page", shown(&file)));
                continue;
            }
            if let Some(anchor) =
                anchor.filter(|a| !anchors(&read_page(&page)).iter().any(|h| h == a))
            {
                broken.push(format!(
                    "{}:{line}: {pointer}: {} has no heading #{anchor}",
                    shown(&file),
                    shown(&page)
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(checked > 0, "no pointer to docs/ found in src/ and tests/");
}

/// The numeric statuses of docs/exit-status.md's table (`0`, `124`, `128+N`, ...): the one list
/// that --help and the README's table are held to.
fn documented_statuses() -> Vec<String> {
    let page = std::fs::read_to_string(root().join("docs/exit-status.md")).unwrap();
    let table = page
        .split("## Exit status")
        .nth(1)
        .expect("docs/exit-status.md has its table");
    let statuses: Vec<String> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1).map(|c| c.trim().to_string()))
        .filter(|c| c.starts_with(|ch: char| ch.is_ascii_digit()))
        .collect();
    assert!(statuses.len() >= 8, "{statuses:?}");
    statuses
}

/// --help's summary of the exit statuses and the short table of docs/exit-status.md ("In
/// brief") name every status the manual lists.
#[test]
fn the_help_and_the_short_table_name_every_exit_status_of_the_manual() {
    let help = command()
        .get_long_about()
        .map(|h| h.to_string())
        .unwrap_or_default()
        .replace('\n', " ");
    let statuses = help
        .split("Exit status:")
        .nth(1)
        .expect("--help sums up the exit statuses");
    let page = std::fs::read_to_string(root().join("docs/exit-status.md")).unwrap();
    let short = page
        .split("## In brief")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/exit-status.md sums its table up");
    for code in documented_statuses() {
        assert!(
            statuses.contains(&format!(" {code} when"))
                || statuses.contains(&format!(" {code} for")),
            "--help's exit statuses leave out {code}: {statuses}"
        );
        assert!(
            short.contains(&format!("\n| {code} |")),
            "docs/exit-status.md's short table leaves out {code}"
        );
    }
    for page in markdown_pages() {
        assert!(
            !read_page(&page).contains("(spec "),
            "{} cites a spec its readers do not have",
            shown(&page)
        );
    }
}

/// docs/architecture.md names every source file, by its path under `src/`, in its list of
/// every file: a new file comes with its line there.
#[test]
fn the_architecture_names_every_source_file() {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let list = page
        .split("## Every source file")
        .nth(1)
        .expect("docs/architecture.md lists every source file");
    let mut missing = Vec::new();
    let mut stack = vec![root().join("src")];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            seen += 1;
            let name = path.strip_prefix(root().join("src")).unwrap();
            let name = name.to_string_lossy();
            if !list.contains(&format!("| `{name}` |")) {
                missing.push(name.into_owned());
            }
        }
    }
    assert!(seen > 50, "{seen} source files");
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name: {missing:?}"
    );
}
