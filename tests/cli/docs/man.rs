//! The manual, `man/retry.1`: its options from the clap definition that `--help` prints, so they
//! cannot drift; the sections `--help` has no room for (what is retried, exit status,
//! environment, files, examples) are written here.
//!
//! Plain man(7) macros only, every character outside ASCII as a groff escape, so that
//! `groff -man -ww -z` has nothing to warn about and mandoc reads it as well.

use clap::{Arg, Command};
use retry::exit::ExitStatus;

/// A piece of a section, in a small markup: `` `text` `` is literal (bold), `*text*` a
/// placeholder (italic), and every `--option` of `retry` is set bold as well.
pub enum Block {
    Paragraph(String),
    /// A paragraph of a help text, which has no markup: only its options are set bold.
    Help(String),
    /// A tagged paragraph: the tag (such as an exit status), then its text.
    Item(String, String),
    Subsection(&'static str),
    /// An example: what it does, then the command line.
    Example(&'static str, &'static str),
}

use Block::{Example, Help, Item, Paragraph, Subsection};

fn p(text: &str) -> Block {
    Paragraph(text.into())
}

fn item(tag: &str, text: &str) -> Block {
    Item(tag.into(), text.into())
}

/// An item whose tag is literal, such as a status or a variable.
fn literal(tag: &str, text: &str) -> Block {
    Item(format!("`{tag}`"), text.into())
}

/// The whole page.
pub fn render(command: &Command) -> String {
    let mut cmd = command.clone();
    // Adds --help and --version, so the page lists them as --help does.
    cmd.build();
    let mut page = Page::new(&cmd);
    let version = cmd.get_version().unwrap_or_default();
    page.line(&format!(
        ".TH RETRY 1 \"\" \"retry {version}\" \"User Commands\""
    ));

    page.section("NAME");
    let about = cmd.get_about().map(|s| s.to_string()).unwrap_or_default();
    page.line(&format!(
        "retry \\- {}",
        page.text(&lower_first(&about), false)
    ));

    page.section("SYNOPSIS");
    synopsis(&mut page, &mut cmd);

    page.section("DESCRIPTION");
    page.blocks(&description(&cmd));

    page.section("COMING FROM DEBIAN'S RETRY");
    page.blocks(&coming_from_debian());

    page.section("OPTIONS");
    options(&mut page, &cmd);

    for (title, blocks) in [
        ("WHAT IS RETRIED", what_is_retried()),
        ("EXIT STATUS", exit_status()),
        ("ENVIRONMENT", environment()),
        ("FILES", files()),
        ("EXAMPLES", examples()),
        ("SEE ALSO", see_also()),
    ] {
        page.section(title);
        page.blocks(&blocks);
    }
    page.out
}

/// The command lines of the EXAMPLES section, for the test that parses each of them.
pub fn example_lines() -> Vec<&'static str> {
    examples()
        .into_iter()
        .filter_map(|block| match block {
            Example(_, line) => Some(line),
            _ => None,
        })
        .collect()
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if second.is_lowercase() => first
            .to_lowercase()
            .chain(s[first.len_utf8()..].chars())
            .collect(),
        _ => s.to_string(),
    }
}

/// Every form of `retry [OPTIONS] [--] COMMAND [ARG]...` that `--help`'s usage shows: the name and
/// literal words bold, the placeholders italic.
fn synopsis(page: &mut Page, cmd: &mut Command) {
    let usage = cmd.render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:");
    for (i, form) in usage
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        if i > 0 {
            page.line(".br");
        }
        let words: Vec<String> = form.split(' ').map(synopsis_word).collect();
        page.line(&words.join(" "));
    }
}

fn synopsis_word(word: &str) -> String {
    let core_start = word.find(|c| c != '[').unwrap_or(word.len());
    let core_end = word
        .rfind(|c| c != ']' && c != '.')
        .map_or(core_start, |i| i + 1)
        .max(core_start);
    let (open, core, close) = (
        &word[..core_start],
        &word[core_start..core_end],
        &word[core_end..],
    );
    let core = if core == "retry" || core.starts_with('-') {
        format!("\\fB{}\\fR", code(core))
    } else if core.chars().all(|c| c.is_ascii_uppercase()) {
        format!("\\fI{core}\\fR")
    } else {
        code(core)
    };
    format!("{open}{core}{close}")
}

fn description(cmd: &Command) -> Vec<Block> {
    let mut blocks = vec![p(
        "`retry` runs *COMMAND* with its arguments, and runs it again when it fails for a reason \
         that may pass: a flaky network, a busy service, a lock.",
    )];
    let about = cmd.get_about().map(|s| s.to_string()).unwrap_or_default();
    let long_about = cmd
        .get_long_about()
        .map(|s| s.to_string())
        .unwrap_or_default();
    for paragraph in long_about.split("\n\n").map(str::trim) {
        // The first paragraph is the NAME line; the summary of exit statuses is EXIT STATUS.
        if paragraph.trim_end_matches('.') == about.trim_end_matches('.')
            || paragraph.starts_with("Exit status:")
        {
            continue;
        }
        blocks.push(Help(paragraph.to_string()));
    }
    blocks.extend([
        p(
            "Options come before the command: the first word that is not an option, or the word \
             after `--`, starts *COMMAND*, and every later word belongs to it, even one that looks \
             like an option. *COMMAND* is run directly, searched on `PATH`, never through a shell: \
             write `retry -- sh -c '...'` for a shell.",
        ),
        p(
            "A *DURATION* is a number with a unit, such as `250ms`, `2s`, `1m30s` or `2h`, or a bare \
             number of seconds, such as `2` or `0.25`. For --tries, --timeout and --budget, `0` \
             means no limit, as `timeout 0` does.",
        ),
    ]);
    blocks
}

/// The options, under the headings of `--help`, in its order; an option without a heading
/// (--help, --version) comes last.
fn options(page: &mut Page, cmd: &Command) {
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .collect();
    let mut headings: Vec<Option<&str>> = Vec::new();
    for arg in &args {
        if !headings.contains(&arg.get_help_heading()) {
            headings.push(arg.get_help_heading());
        }
    }
    headings.sort_by_key(Option::is_none);
    for heading in headings {
        page.subsection(heading.unwrap_or("Other options"));
        for arg in args.iter().filter(|a| a.get_help_heading() == heading) {
            option(page, arg);
        }
    }
    page.subsection("The command");
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let name = arg
            .get_value_names()
            .and_then(|names| names.first())
            .map_or_else(|| arg.get_id().to_string(), ToString::to_string);
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|s| s.to_string());
        let help = page.text(&sentence(&help.unwrap_or_default()), false);
        page.item(&format!("\\fI{name}\\fR [\\fIARG\\fR]..."), &[help]);
    }
}

fn option(page: &mut Page, arg: &Arg) {
    let mut tag = Vec::new();
    if let Some(short) = arg.get_short() {
        tag.push(format!("\\fB{}\\fR", code(&format!("-{short}"))));
    }
    if let Some(long) = arg.get_long() {
        tag.push(format!("\\fB{}\\fR", code(&format!("--{long}"))));
    }
    let mut tag = tag.join(", ");
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    if let (true, Some(name)) = (
        takes_value,
        arg.get_value_names().and_then(|names| names.first()),
    ) {
        tag.push_str(&format!(" \\fI{name}\\fR"));
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut paragraphs: Vec<String> = help
        .split("\n\n")
        .map(|p| page.text(&sentence(p), false))
        .collect();
    let mut last = Vec::new();
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    // The help names the values in its own words; list them only where it does not name all.
    let named = |value: &String| {
        help.split(|c: char| !c.is_alphanumeric() && c != '-')
            .any(|w| w == value)
    };
    if takes_value && !values.is_empty() && !values.iter().all(named) {
        let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        last.push(format!("Values: {}.", values.join(", ")));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if takes_value && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        last.push(format!("Default: {}.", defaults.join(", ")));
    }
    // After the short help, where `-h` shows the default too.
    if !last.is_empty() {
        paragraphs[0] = format!("{} {}", paragraphs[0], page.text(&last.join(" "), true));
    }
    page.item(&tag, &paragraphs);
}

/// A help text as a sentence: the help texts of `-h` end without a full stop.
fn sentence(text: &str) -> String {
    let text = text.trim();
    match text.chars().last() {
        Some(c) if c.is_alphanumeric() || c == ')' => format!("{text}."),
        _ => text.to_string(),
    }
}

fn what_is_retried() -> Vec<Block> {
    vec![
        p(
            "Each try ends in one outcome: an exit status, a signal, a timeout, or a command \
             that could not be found or run. The outcome decides what happens next:",
        ),
        item(
            "exit 0, or a code in --success-on",
            "Success: the run ends with status 0.",
        ),
        item(
            "not found, not executable, exit 126, exit 127",
            "Permanent: another try could not start either. The run gives up.",
        ),
        item(
            "killed by SIGINT, or exit 130",
            "Interrupted (Ctrl-C): the run stops at once, and is never retried, whatever the \
             lists say.",
        ),
        item(
            "killed by SIGPIPE",
            "Permanent: the reader of the command's output is gone, and another try could not \
             write either.",
        ),
        item(
            "timed out",
            "Transient, unless --stop-on names `timeout`. The try's whole process group was \
             stopped first.",
        ),
        item(
            "could not start for want of resources (EAGAIN, ENOMEM)",
            "Transient; the status is 125 if it was the last try.",
        ),
        item(
            "any other exit code or signal",
            "Transient: retried after a wait.",
        ),
        p(
            "--retry-on *LIST* makes only the outcomes it lists transient, every other failure \
             permanent; --stop-on *LIST* makes the outcomes it lists permanent, whatever \
             --retry-on says. A *LIST* is comma-separated: exit codes (`75`), inclusive ranges \
             (`1-5`), signal names with or without SIG in any case (`KILL`, `SIGTERM`, and the \
             real-time `RTMIN`, `RTMIN+3`, `RTMAX-1`), and the word `timeout`. --success-on takes \
             codes and ranges only. The lists may make exit 126, exit 127 and SIGPIPE transient; \
             nothing makes a command that cannot start, or an interrupt, retried. Lists that \
             contradict each other are usage errors: exit 0 in --retry-on or --stop-on, or a code \
             both in --success-on and in one of the others.",
        ),
        p(
            "--retry-if-output *REGEX* makes a failed try transient only if its standard output or \
             standard error matched; --stop-if-output *REGEX* makes it permanent if they matched. \
             The output still reaches its destination as it comes.",
        ),
        p(
            "A transient failure is retried after a wait: --delay times --factor to the power k-1 \
             after failure k (exponential), --delay times k (linear), --delay (constant), or the \
             k-th value of --delays; capped at --max-delay; then randomised by --jitter. No wait \
             exceeds --max-delay. The run stops when a try succeeds, when a failure is permanent, \
             when the tries run out, or when another try would not fit in the budget: a retry \
             starts only if it can start before the end of --budget or --deadline and, with \
             --timeout, its whole timeout fits. `retry --dry-run` prints the schedule that the \
             options give.",
        ),
    ]
}

fn exit_status() -> Vec<Block> {
    vec![
        literal("0", "A try succeeded."),
        literal("N", "The run gave up; the last try exited *N*."),
        literal(
            &ExitStatus::TIMEOUT.to_string(),
            "The run gave up; the last try timed out. Also a --repeat in which no try ran to \
             its end before the budget did.",
        ),
        literal(
            &ExitStatus::USAGE.to_string(),
            "An error of `retry` itself: bad usage, an invalid option value, an internal \
             failure, a last try that could not start for want of resources. Usage errors are \
             125 rather than 2, so that they cannot be taken for the command's own status 2.",
        ),
        literal(
            &ExitStatus::CANNOT_EXECUTE.to_string(),
            "The command exists but cannot be executed (permissions, format).",
        ),
        literal(
            &ExitStatus::NOT_FOUND.to_string(),
            "The command was not found.",
        ),
        literal(
            "128+N",
            "The run gave up; the last try was killed by signal *N*, which `retry` did not send.",
        ),
        literal(
            &ExitStatus::Locked.code().to_string(),
            "No try ran: --throttle held back every try, or --lock turned the run away, another \
             run having the lock (`EX_TEMPFAIL`: try again later).",
        ),
        literal(
            &ExitStatus::OutputFailed.code().to_string(),
            "The output of a try could not be written (a full disk); the cause is logged. Also \
             the status of a run that gave up after a try that exited 0 but was not ready \
             (--until-output), and of a --replay that left runs pending.",
        ),
        p(
            "When `retry` is interrupted by a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT and any \
             other that would end it), or a try dies of SIGINT, the try's process group gets the \
             signal, no further try starts, and `retry` dies of the same signal: a shell sees \
             128+N, and a shell loop stops as it would for the command itself. A try killed by \
             SIGPIPE (the reader of the output has gone, as in `retry -- yes | head -1`) ends \
             the run quietly (nothing logged without -v), and `retry` dies of SIGPIPE too.",
        ),
    ]
}

fn environment() -> Vec<Block> {
    vec![
        Subsection("Given to the command"),
        p(
            "Every try runs with the environment of `retry`, plus these. The hooks of --on-retry \
             and --on-give-up get them too.",
        ),
        literal("RETRY_ATTEMPT", "The number of this try, from 1."),
        literal(
            "RETRY_MAX_TRIES",
            "The most tries the run makes, 0 when unlimited.",
        ),
        literal(
            "RETRY_RUN_ID",
            "A random identifier, the same for every try of one run: usable as an idempotency \
             key.",
        ),
        literal(
            "RETRY_DEADLINE_MS",
            "With --budget or --deadline, the end of the run, in milliseconds since the Unix \
             epoch.",
        ),
        literal(
            "RETRY_FENCING_TOKEN",
            "In a --replay of a fleet's store: the fencing token of the replay's claim on the \
             run, higher for every later claim of it, for a resource to refuse a lower one.",
        ),
        literal(
            "RETRY_EXIT_CODE",
            "Hooks only: the status of the failed try, as `retry` would exit with it.",
        ),
        literal(
            "RETRY_DELAY_MS",
            "Hooks only: the wait ahead, in milliseconds; 0 for --on-give-up.",
        ),
        Subsection("Read by retry"),
        literal("PATH", "Where *COMMAND* is searched for."),
        literal(
            "RETRY_RUN_ID",
            "When set, `retry` runs inside a try of another `retry`, and warns once that the \
             tries multiply.",
        ),
        literal(
            "RETRY_REDIS_PASSWORD",
            "The password of a Redis URL (--quota redis://HOST/NAME) that gives none. Unlike a password \
             in the URL, which every user of the machine can read with `ps` while the run lasts \
             (`retry` warns when it is given so), the environment of a process is not shown to \
             other users. `retry` never prints it.",
        ),
        literal(
            "RETRY_REDIS_USER",
            "The ACL user of a Redis URL that names none: `retry` then sends `AUTH USER \
             PASSWORD`. The URL's own user and password win (docs/redis.md).",
        ),
        literal(
            "NO_COLOR",
            "When set and not empty, --color auto writes no colour.",
        ),
        literal(
            "GITHUB_ACTIONS",
            "When `true`, the log speaks to GitHub Actions: the tries after a failure are folded \
             in groups, and a run that needed retries or gave up ends with one annotation that \
             sums it up. A JSON log stays pure JSON lines.",
        ),
        literal(
            "GITHUB_STEP_SUMMARY",
            "When it names a file (GitHub Actions sets it; `GITHUB_ACTIONS` need not be set), a \
             run that retried or gave up appends a table of its tries to it, for the job's \
             summary page.",
        ),
        literal(
            "GITHUB_OUTPUT",
            "When it names a file, every run appends its step outputs to it: `tries`, `exit_code` \
             (the run's own exit status), `flaky` (`true` when it succeeded after a failed try), \
             `outcome` (`success` exactly when `exit_code` is 0; `flaky` when --flaky fail \
             failed a late success; `gave_up` or `interrupted`; `failed` for a --repeat in \
             which a try failed) and `reason` (why it gave up; empty after a success), as \
             `name=value` lines that a later step reads as `steps.ID.outputs.NAME`. Under \
             --flaky fail, `exit_code` of a flaky run is the status it exits with. A --replay \
             writes one set for the whole replay.",
        ),
        literal(
            "GITLAB_CI",
            "When `true`, the tries after a failure are folded in GitLab's collapsible sections.",
        ),
        literal(
            "XDG_RUNTIME_DIR",
            "Where the local store of --quota keeps its files (`$XDG_RUNTIME_DIR/retry/`), when \
             it names a directory of the user running `retry`.",
        ),
        literal(
            "TMPDIR",
            "Where held output and recorded standard input spill to a temporary file; `/tmp` \
             when unset. Without `XDG_RUNTIME_DIR`, the local store of --quota is \
             `$TMPDIR/retry-UID/`.",
        ),
        literal(
            "LC_ALL, LC_CTYPE, LANG",
            "When the character set they name is not UTF-8, the log is written in ASCII.",
        ),
    ]
}

fn files() -> Vec<Block> {
    vec![
        p("`retry` reads no configuration file."),
        literal(
            "$TMPDIR",
            &format!(
                "Standard input recorded for later tries, and output held by --buffer-stdout, \
                 past the first {} MiB (by --output-on-failure, past the first {} MiB), go to a \
                 file in $TMPDIR that has no name (O_TMPFILE), or where the file system cannot \
                 make one, to .retry-spool-* removed as soon as it is created: nothing is left \
                 behind, whatever ends `retry`.",
                retry::run::spool::MEMORY_LIMIT >> 20,
                retry::run::withheld::MEMORY_LIMIT >> 20
            ),
        ),
        item(
            "--log-file *PATH*",
            "The log, appended to, instead of standard error.",
        ),
        item(
            "--dead-letter *FILE*",
            "The runs that gave up, one JSON object per line, appended to and never rewritten; \
             --replay appends a `resolved` line for each run that then succeeds, and an \
             `attempt` line for each that does not. Created for its owner only (0600).",
        ),
        item(
            "--history *FILE*",
            "Every run, one JSON object per line, appended to and never rewritten, for --stats \
             to read. Created for its owner only (0600), and shared safely by many runs at once.",
        ),
        literal(
            "$XDG_RUNTIME_DIR/retry/NAME.quota",
            "The local store of --quota NAME, shared by the runs of one user on this machine: \
             the directory 0700, the file 0600, updated under an exclusive lock. Without \
             `XDG_RUNTIME_DIR` (or when it is not the user's own directory), \
             `$TMPDIR/retry-UID/NAME.quota`, and `/tmp/retry-UID/NAME.quota` without `TMPDIR`.",
        ),
        item(
            "/usr/share/doc/retry-wrapper/json-log.md",
            "Every event of the JSON log (--log-format json) and every field of each.",
        ),
    ]
}

fn examples() -> Vec<Block> {
    vec![
        Example(
            "A command that fails twice, then succeeds: `retry` waits up to 1 second after the \
             first try and up to 2 after the second (a random part of the exponential wait), \
             then exits 0.",
            "retry -- sh -c 'test \"$RETRY_ATTEMPT\" -ge 3'",
        ),
        Example(
            "Fetch a page, with up to 3 tries.",
            "retry -- curl -fsS https://example.com/health",
        ),
        Example(
            "A CI step: 5 tries of 2 minutes each at most, 10 minutes in all.",
            "retry -n 5 -t 2m -B 10m -- cargo test",
        ),
        Example(
            "Wait up to 2 minutes for a database to accept connections, trying every second.",
            "retry -n 0 -B 2m -d 1s --backoff constant -j none \\\n    -- pg_isready -h db",
        ),
        Example(
            "Wait up to 2 minutes until a service says it is up, asking every second.",
            "retry -n 0 -B 2m -d 1s --backoff constant -j none \\\n    \
             --until-output '\"status\":\"up\"' \\\n    \
             -- curl -fsS localhost:8080/health",
        ),
        Example(
            "Retry only when curl could not resolve the host (6), could not connect (7) or timed \
             out (28).",
            "retry --retry-on 6,7,28 -- curl -fsSO https://example.com/big.iso",
        ),
        Example(
            "Upload a stream: every try reads the same input from the pipe, from its start.",
            "pg_dump shop | retry -n 5 -- aws s3 cp - s3://backups/shop.sql",
        ),
        Example(
            "Pass on only the output of the try that succeeded, so that jq never reads half an \
             answer.",
            "retry --buffer-stdout -- curl -fsS https://example.com/api | jq .",
        ),
        Example(
            "Send the same idempotency key with every try, so that the server performs the \
             order at most once.",
            "retry -- sh -c 'curl -fsS -H \"Idempotency-Key: $RETRY_RUN_ID\" \\\n    \
             -d @order.json https://shop.example.com/orders'",
        ),
        Example(
            "Restart a service before each retry, and keep a JSON log of the run.",
            "retry --on-retry 'docker compose restart db' \\\n    \
             --log-format json --log-file migrate.jsonl -- ./migrate",
        ),
        Example(
            "A nightly job: a run that gives up is recorded in failed.jsonl, to be run again \
             later.",
            "retry -n 5 -B 30m --dead-letter failed.jsonl -- ./sync-orders",
        ),
        Example(
            "Run again, one try each, the recorded runs that have not succeeded since; exit 0 \
             when none is left pending.",
            "retry --replay failed.jsonl -n 1",
        ),
        Example(
            "A CI step that fails when the tests only passed on a retry, and hands the outcome \
             to later steps: under GitHub Actions they read `steps.ID.outputs.tries`, \
             `exit_code`, `flaky`, `outcome` and `reason`.",
            "retry -n 3 --flaky fail --label tests -- cargo test",
        ),
        Example(
            "Reproduce a flake: run a test 200 times in a row, each try bounded to a minute, \
             and see how many fail.",
            "retry --repeat 200 --keep-going -t 1m -- cargo test flaky_test",
        ),
        Example(
            "Keep every run of a CI step in a history file.",
            "retry --history ci-runs.jsonl --label deploy -- ./deploy.sh",
        ),
        Example(
            "Each week, see which steps flake most: one row per label, flakiest first.",
            "retry --stats ci-runs.jsonl --since 7d",
        ),
        Example(
            "Print the waits that a policy gives, and run nothing.",
            "retry --dry-run -n 8 -d 500ms",
        ),
        Example(
            "See what 500 clients with this policy do to a database that is down for 30 seconds \
             and then serves 100 queries a second, once per jitter kind, and run nothing.",
            "retry --simulate --compare --clients 500 \\\n    \
             --outage 30s --capacity 100/s -n 8",
        ),
    ]
}

/// Debian's `retry` is another program of the same name, which the Debian package of this one
/// replaces: its options, and what they are here.
fn coming_from_debian() -> Vec<Block> {
    vec![
        p(
            "Debian's `retry` package (Graham Leggett's `retry`) is a different program of the same \
             name, and its options mean other things here. Given Debian's spellings that do not \
             parse here, `retry` names the option meant. Debian's `-t 5` is valid here, but as a \
             timeout of 5 seconds for each try: a `-t` or --timeout without a unit warns once \
             that it is a timeout and that tries are `-n 5`; `-t 5s` never warns.",
        ),
        literal(
            "-t N, --times=N",
            "N tries. Here: `-n N` or --tries *N* (3 by default, `-n 0` for no limit); `-t` is the \
             timeout of each try.",
        ),
        literal(
            "-d 10",
            "10 seconds between tries, always. Here: --delays *10s*; `-d` is the first wait of a \
             backoff that doubles.",
        ),
        literal(
            "-d 1,2,4",
            "These waits in seconds, the last repeated. Here: --delays *1s,2s,4s*.",
        ),
        literal(
            "-m TEXT, --message=TEXT",
            "The name in its messages. Here: --label *TEXT*; `-m` is --max-delay.",
        ),
        literal(
            "-u 3, -u 0,3",
            "Until the exit status is one of these. Here: --success-on *3*.",
        ),
        literal(
            "-u fail, -w success",
            "Until a try fails, while it succeeds. Here: --repeat *0*.",
        ),
        literal(
            "-w 1-5",
            "While the exit status is one of these. Here: --retry-on *1-5*.",
        ),
        literal("-v", "The version. Here: `-V`; `-v` is --verbose."),
        p(
            "Debian's `retry` keeps standard input for each try and passes on only the \
             successful try's output. Here standard input from a pipe is kept by default \
             (--stdin auto), and --buffer-stdout holds the output. Bad options exit 125 here, \
             not 1.",
        ),
        p("In a crontab, name the program by its full path \
             (`/usr/bin/retry` from the Debian package, `~/.cargo/bin/retry` from `cargo \
             install`): cron's PATH is `/usr/bin:/bin`, where another `retry` may be found first."),
    ]
}

fn see_also() -> Vec<Block> {
    vec![p(
        "`timeout`(1), `sh`(1), `kill`(1), `signal`(7), `environ`(7)",
    )]
}

/// The roff being written, and what it needs to set text.
struct Page {
    out: String,
    /// The long options of `retry`, set bold where the text names them.
    longs: Vec<String>,
    /// A section or subsection has just started: no paragraph macro is needed.
    fresh: bool,
}

impl Page {
    fn new(cmd: &Command) -> Page {
        let mut longs: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .collect();
        // The longest first, so that --retry-on is not taken for a --retry.
        longs.sort_by_key(|l| std::cmp::Reverse(l.len()));
        Page {
            out: String::new(),
            longs,
            fresh: true,
        }
    }

    fn line(&mut self, line: &str) {
        self.out.push_str(line);
        self.out.push('\n');
    }

    fn section(&mut self, title: &str) {
        self.line(&format!(".SH {}", quoted(title)));
        self.fresh = true;
    }

    fn subsection(&mut self, title: &str) {
        self.line(&format!(".SS {}", quoted(title)));
        self.fresh = true;
    }

    /// A paragraph, roff already.
    fn paragraph(&mut self, text: &str) {
        if !self.fresh {
            self.line(".PP");
        }
        self.line(text);
        self.fresh = false;
    }

    /// A tagged paragraph and the paragraphs that follow it at its indent, all roff already.
    fn item(&mut self, tag: &str, paragraphs: &[String]) {
        self.line(".TP");
        self.line(tag);
        for (i, paragraph) in paragraphs.iter().enumerate() {
            if i > 0 {
                self.line(".IP");
            }
            self.line(paragraph);
        }
        self.fresh = false;
    }

    fn blocks(&mut self, blocks: &[Block]) {
        for block in blocks {
            match block {
                Paragraph(text) => self.paragraph(&self.text(text, true)),
                Help(text) => self.paragraph(&self.text(text, false)),
                Item(tag, text) => self.item(&self.text(tag, true), &[self.text(text, true)]),
                Subsection(title) => self.subsection(title),
                Example(what, line) => {
                    self.paragraph(&self.text(what, true));
                    self.line(".PP");
                    self.line(".RS 4");
                    self.line(".EX");
                    self.line(&code(line));
                    self.line(".EE");
                    self.line(".RE");
                }
            }
        }
    }

    /// Sets a line of prose: the options of `retry` bold, the rest escaped; with `markup`, also
    /// `` `literal` `` bold and `*placeholder*` italic.
    fn text(&self, text: &str, markup: bool) -> String {
        let mut out = String::new();
        let mut plain = String::new();
        let mut i = 0;
        while i < text.len() {
            let rest = &text[i..];
            let span = [('`', "\\fB"), ('*', "\\fI")]
                .into_iter()
                .filter(|_| markup)
                .find_map(|(mark, font)| {
                    let inner = rest.strip_prefix(mark)?;
                    let end = inner.find(mark)?;
                    Some((font, &inner[..end], end + 2))
                });
            if let Some((font, inner, len)) = span {
                out.push_str(&prose(&std::mem::take(&mut plain)));
                out.push_str(&format!("{font}{}\\fR", code(inner)));
                i += len;
                continue;
            }
            let at_word_start = i == 0 || text[..i].ends_with([' ', '(', '[']);
            let long = self.longs.iter().find(|l| {
                rest.starts_with(l.as_str())
                    && !rest[l.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '-')
            });
            if let (true, Some(long)) = (at_word_start, long) {
                out.push_str(&prose(&std::mem::take(&mut plain)));
                out.push_str(&format!("\\fB{}\\fR", code(long)));
                i += long.len();
                continue;
            }
            let c = rest.chars().next().expect("not at the end");
            plain.push(c);
            i += c.len_utf8();
        }
        out.push_str(&prose(&plain));
        if out.starts_with(['.', '\'']) {
            out.insert_str(0, "\\&");
        }
        out
    }
}

fn quoted(s: &str) -> String {
    if s.contains(' ') {
        format!("\"{s}\"")
    } else {
        s.to_string()
    }
}

/// Escapes prose: a dash between two lowercase letters is a hyphen (`wall-clock`), any other
/// (`-1`, `RTMAX-1`, a leading dash) a minus sign, as an option's dash is.
fn prose(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut word_start = 0;
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' {
            word_start = i + 1;
        }
        match c {
            '-' => {
                let hyphen = i > word_start
                    && chars[word_start] != '-'
                    && chars[i - 1].is_ascii_lowercase()
                    && chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
                out.push_str(if hyphen { "-" } else { "\\-" });
            }
            _ => push_char(&mut out, c),
        }
    }
    out
}

/// Escapes literal text: every dash a minus sign and every quote a straight one, so that what is
/// copied from the page can be typed.
fn code(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '-' => out.push_str("\\-"),
            '\'' => out.push_str("\\(aq"),
            '`' => out.push_str("\\(ga"),
            '"' => out.push_str("\\(dq"),
            '~' => out.push_str("\\(ti"),
            '^' => out.push_str("\\(ha"),
            _ => push_char(&mut out, c),
        }
    }
    out
}

fn push_char(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\e"),
        c if c.is_ascii() => out.push(c),
        c => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
    }
}
