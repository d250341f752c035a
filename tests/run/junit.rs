//! `--junit FILE` (docs/ci.md#junit-reports) through the real binary: the report of a first-try
//! success, a flaky success, a run that gave up, a repeat and a replay, each read back with
//! quick-xml's reader and checked against the rules of Maven Surefire's schema (element names,
//! their nesting and order, required attributes, the form of a time, the counts); names that
//! XML cannot hold as they are; a link at FILE refused; the file's mode from the umask.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use quick_xml::events::Event;
use quick_xml::reader::Reader;

use crate::common::{self, retry, stderr_of};

/// One element of the report, as read back.
#[derive(Debug)]
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
    /// The text directly inside it, its references resolved.
    text: String,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &str) -> usize {
        let value = self
            .attr(name)
            .unwrap_or_else(|| panic!("{name} of {self:?}"));
        value.parse().unwrap_or_else(|_| panic!("{name}={value}"))
    }

    fn children(&self, name: &str) -> Vec<&Element> {
        self.children.iter().filter(|c| c.name == name).collect()
    }

    fn child_names(&self) -> Vec<&str> {
        self.children.iter().map(|c| c.name.as_str()).collect()
    }
}

/// Reads the XML document `bytes` into its root element: it must be well-formed (every element
/// closed in order, every reference known), UTF-8, and hold no character that XML cannot hold.
fn parse(bytes: &[u8]) -> Element {
    let text = std::str::from_utf8(bytes).expect("the report is UTF-8");
    let forbidden = |c: char| {
        (c.is_ascii_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{7f}'))
            || matches!(c, '\u{fffe}' | '\u{ffff}')
    };
    assert!(
        !text.chars().any(forbidden),
        "a character XML cannot hold: {text:?}"
    );
    assert!(
        text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
        "{text}"
    );
    let mut reader = Reader::from_str(text);
    let mut open: Vec<Element> = Vec::new();
    let mut root = None;
    loop {
        let event = reader
            .read_event()
            .unwrap_or_else(|e| panic!("not XML: {e}\n{text}"));
        let closed = match event {
            Event::Start(e) => {
                open.push(element(&e));
                None
            }
            Event::Empty(e) => Some(element(&e)),
            Event::End(_) => Some(open.pop().expect("an open element")),
            Event::Text(t) => {
                let text = t.decode().unwrap();
                match open.last_mut() {
                    Some(e) => e.text += &text,
                    None => assert!(text.trim().is_empty(), "text outside the root: {text:?}"),
                }
                None
            }
            Event::GeneralRef(r) => {
                let name = r.decode().unwrap();
                let reference = format!("&{name};");
                let resolved = quick_xml::escape::unescape(&reference)
                    .unwrap_or_else(|e| panic!("{reference}: {e}"));
                open.last_mut().expect("text in an element").text += &resolved;
                None
            }
            Event::Decl(_) => None,
            Event::Eof => break,
            other => panic!("a report has no {other:?}"),
        };
        if let Some(element) = closed {
            match open.last_mut() {
                Some(parent) => parent.children.push(element),
                None => {
                    assert!(root.is_none(), "two root elements in {text}");
                    root = Some(element);
                }
            }
        }
    }
    assert!(open.is_empty(), "unclosed elements in {text}");
    root.expect("a root element")
}

/// An element as it opens: its name and attributes, each given once, references resolved.
fn element(e: &quick_xml::events::BytesStart<'_>) -> Element {
    let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
    let mut attributes: Vec<(String, String)> = Vec::new();
    for a in e.attributes() {
        let a = a.expect("a well-formed attribute");
        let key = String::from_utf8(a.key.as_ref().to_vec()).unwrap();
        // As any reader of XML 1.0 takes it: references resolved, white space made spaces.
        let value = a
            .normalized_value(quick_xml::XmlVersion::Explicit1_0)
            .expect("a known reference")
            .into_owned();
        assert!(attributes.iter().all(|(k, _)| *k != key), "{key} twice");
        attributes.push((key, value));
    }
    Element {
        name,
        attributes,
        children: Vec::new(),
        text: String::new(),
    }
}

/// How often an element may come in a `<testcase>`, in the order the schema gives them.
const IN_A_CASE: [(&str, bool); 9] = [
    ("failure", true),
    ("rerunFailure", true),
    ("flakyFailure", true),
    ("skipped", false),
    ("error", false),
    ("rerunError", true),
    ("flakyError", true),
    ("system-out", false),
    ("system-err", false),
];

/// Checks that `e` has the attributes `required`, and no others than those and `optional`.
fn attributes(e: &Element, required: &[&str], optional: &[&str]) {
    for name in required {
        assert!(e.attr(name).is_some(), "<{}> needs {name}: {e:?}", e.name);
    }
    for (name, _) in &e.attributes {
        assert!(
            required.contains(&name.as_str()) || optional.contains(&name.as_str()),
            "<{}> has no attribute {name} in the schema",
            e.name
        );
    }
}

/// An element of text only: no element inside it.
fn text_only(e: &Element) {
    assert!(e.children.is_empty(), "<{}> holds text only: {e:?}", e.name);
}

/// An element of elements only: no text but white space between them.
fn elements_only(e: &Element) {
    assert!(
        e.text.trim().is_empty(),
        "<{}> holds text: {:?}",
        e.name,
        e.text
    );
}

/// A time as the schema takes it (digits, a point, up to three decimals), and as `retry`
/// writes it: three decimals.
fn time(e: &Element) {
    let Some(t) = e.attr("time") else { return };
    let (whole, decimals) = t.split_once('.').unwrap_or((t, ""));
    assert!(
        !whole.is_empty() && whole.bytes().all(|b| b.is_ascii_digit()),
        "time={t}"
    );
    assert!(
        decimals.len() == 3 && decimals.bytes().all(|b| b.is_ascii_digit()),
        "time={t}"
    );
}

/// Checks `root` against the rules of Surefire's test-report schema (version 3.0), as CI
/// systems read it: the elements it allows, nested and ordered as it says, their required
/// attributes, and counts that agree with the cases. `timestamp` on the suite, which Jenkins,
/// GitLab and nextest's reports have, is the one attribute beyond it.
fn check_surefire(root: &Element) {
    assert_eq!(root.name, "testsuite");
    let counts = ["tests", "errors", "skipped", "failures"];
    attributes(
        root,
        &[&["name"][..], &counts].concat(),
        &["time", "group", "version", "timestamp"],
    );
    time(root);
    elements_only(root);
    let names = root.child_names();
    let cases_from = names
        .iter()
        .position(|n| *n == "testcase")
        .unwrap_or(names.len());
    assert!(
        names[..cases_from].iter().all(|n| *n == "properties"),
        "{names:?}"
    );
    assert!(
        names[cases_from..].iter().all(|n| *n == "testcase"),
        "{names:?}"
    );
    for properties in root.children("properties") {
        elements_only(properties);
        for p in &properties.children {
            assert_eq!(p.name, "property");
            attributes(p, &["name", "value"], &[]);
            text_only(p);
        }
    }
    let cases = root.children("testcase");
    for case in &cases {
        check_case(case);
    }
    let with = |name: &str| {
        cases
            .iter()
            .filter(|c| !c.children(name).is_empty())
            .count()
    };
    assert_eq!(root.number("tests"), cases.len());
    assert_eq!(root.number("failures"), with("failure"));
    assert_eq!(root.number("errors"), with("error"));
    assert_eq!(root.number("skipped"), with("skipped"));
}

fn check_case(case: &Element) {
    attributes(case, &["name", "time"], &["classname", "group"]);
    time(case);
    elements_only(case);
    let mut at = 0;
    for child in &case.children {
        let k = IN_A_CASE
            .iter()
            .position(|(name, _)| *name == child.name)
            .unwrap_or_else(|| panic!("<{}> in a testcase", child.name));
        assert!(
            k >= at,
            "<{}> out of order in {:?}",
            child.name,
            case.child_names()
        );
        assert!(
            k > at || IN_A_CASE[k].1 || at == 0 && k == 0,
            "<{}> twice",
            child.name
        );
        at = k;
        match child.name.as_str() {
            "failure" | "error" => {
                attributes(child, &["type"], &["message"]);
                text_only(child);
            }
            "skipped" => {
                attributes(child, &[], &["message"]);
                text_only(child);
            }
            "system-out" | "system-err" => {
                attributes(child, &[], &[]);
                text_only(child);
            }
            _ => {
                attributes(child, &["type"], &["message"]);
                elements_only(child);
                let inside = child.child_names();
                assert_eq!(inside.first(), Some(&"stackTrace"), "{inside:?}");
                let rest: Vec<&str> = inside[1..].to_vec();
                assert!(
                    [
                        &[][..],
                        &["system-out"],
                        &["system-err"],
                        &["system-out", "system-err"]
                    ]
                    .contains(&&rest[..]),
                    "{inside:?}"
                );
                child.children.iter().for_each(text_only);
            }
        }
    }
}

/// The report at `path`, read and checked against the schema.
fn report(path: &Path) -> Element {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let root = parse(&bytes);
    check_surefire(&root);
    root
}

/// The one case of a run's report.
fn only_case(root: &Element) -> &Element {
    let cases = root.children("testcase");
    assert_eq!(cases.len(), 1, "{root:?}");
    cases[0]
}

/// A script that counts its runs in the file `$0` and exits `code` on the runs listed.
fn failing_on(runs: &[u64], code: u8) -> String {
    let cases: Vec<String> = runs.iter().map(|r| r.to_string()).collect();
    format!(
        "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; \
         case $n in {}) exit {code};; esac",
        cases.join("|")
    )
}

/// `retry --junit report.xml ARGS -- sh -c SCRIPT COUNTER` in `dir`.
fn run(dir: &Path, args: &[&str], script: &str) -> std::process::Output {
    let _ = std::fs::remove_file(dir.join("count"));
    retry()
        .current_dir(dir)
        .args(["--junit", "report.xml"])
        .args(args)
        .args(["--", "sh", "-c", script])
        .arg(dir.join("count"))
        .output()
        .unwrap()
}

#[test]
fn a_first_try_success_is_one_testcase_with_nothing_in_it() {
    let dir = common::temp_dir("junit-ok");
    let before = std::time::SystemTime::now();
    let out = retry()
        .current_dir(&dir)
        .args(["--junit", "report.xml", "--", "sh", "-c", "exit 0"])
        .output()
        .unwrap();
    let after = std::time::SystemTime::now();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    assert_eq!(
        (
            root.attr("name"),
            root.number("tests"),
            root.number("failures")
        ),
        (Some("retry"), 1, 0)
    );
    let start = humantime::parse_rfc3339(root.attr("timestamp").unwrap()).unwrap();
    // The timestamp has milliseconds: the run started within them of the test's clock.
    let ms = std::time::Duration::from_millis(1);
    assert!(start + ms >= before && start <= after, "{start:?}");
    let seconds: f64 = root.attr("time").unwrap().parse().unwrap();
    assert!((0.0..10.0).contains(&seconds), "{seconds}");
    let case = only_case(&root);
    assert_eq!(case.attr("name"), Some("sh -c 'exit 0'"));
    assert_eq!(case.attr("classname"), Some("retry"));
    assert!(case.children.is_empty(), "{case:?}");
}

#[test]
fn a_flaky_success_has_one_flaky_failure_per_failed_try() {
    let dir = common::temp_dir("junit-flaky");
    let script = failing_on(&[1, 2], 3);
    let out = run(&dir, &["-n", "5", "-d", "1ms", "--label", "sync"], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    assert_eq!(root.number("failures"), 0);
    let case = only_case(&root);
    assert_eq!(case.attr("name"), Some("sync"));
    assert_eq!(case.child_names(), ["flakyFailure", "flakyFailure"]);
    for (k, flaky) in case.children.iter().enumerate() {
        assert_eq!(flaky.attr("type"), Some("exit 3"));
        let message = flaky.attr("message").unwrap();
        let want = format!("try {}/5 exited 3 after ", k + 1);
        assert!(
            message.starts_with(&want) && message.ends_with("(transient)"),
            "{message}"
        );
        assert_eq!(flaky.children[0].text, message);
    }

    // Failed by --flaky fail, the same run is a failure, its failed tries reruns.
    let out = run(&dir, &["-n", "5", "-d", "1ms", "--flaky", "fail"], &script);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    assert_eq!(root.number("failures"), 1);
    let case = only_case(&root);
    assert_eq!(
        case.child_names(),
        ["failure", "rerunFailure", "rerunFailure"]
    );
    let failure = case.children[0].attr("message").unwrap();
    assert!(failure.ends_with(", but --flaky fail: exit 3"), "{failure}");
    assert_eq!(case.children[0].attr("type"), Some("flaky"));
}

#[test]
fn a_run_that_gave_up_has_one_failure_and_a_rerun_failure_per_earlier_failed_try() {
    let dir = common::temp_dir("junit-gave-up");
    let out = run(&dir, &["-n", "3", "-d", "1ms"], "exit 4");
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    assert_eq!((root.number("tests"), root.number("failures")), (1, 1));
    let case = only_case(&root);
    assert_eq!(
        case.child_names(),
        ["failure", "rerunFailure", "rerunFailure"]
    );
    let failure = &case.children[0];
    assert_eq!(failure.attr("type"), Some("tries"));
    let message = failure.attr("message").unwrap();
    assert!(
        message.starts_with("try 3/3 exited 4 after ")
            && message.contains("(transient); gave up after 3 tries in ")
            && message.ends_with(": exit 4"),
        "{message}"
    );
    assert!(
        failure.text.starts_with("try 3/3 exited 4"),
        "{}",
        failure.text
    );
    assert!(
        failure.text.contains("\ngave up after 3 tries in "),
        "{}",
        failure.text
    );
    for (k, rerun) in case.children[1..].iter().enumerate() {
        assert_eq!(rerun.attr("type"), Some("exit 4"));
        let message = rerun.attr("message").unwrap();
        assert!(
            message.starts_with(&format!("try {}/3 exited 4", k + 1)),
            "{message}"
        );
    }
}

#[test]
fn a_repeat_of_five_writes_a_testcase_for_each_try() {
    let dir = common::temp_dir("junit-repeat");
    let script = failing_on(&[2], 7);
    let out = run(
        &dir,
        &["--repeat", "5", "--keep-going", "--label", "rep"],
        &script,
    );
    assert_eq!(out.status.code(), Some(7), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    assert_eq!((root.number("tests"), root.number("failures")), (5, 1));
    let cases = root.children("testcase");
    let names: Vec<&str> = cases.iter().map(|c| c.attr("name").unwrap()).collect();
    assert_eq!(
        names,
        [
            "rep (try 1)",
            "rep (try 2)",
            "rep (try 3)",
            "rep (try 4)",
            "rep (try 5)"
        ]
    );
    let failed: Vec<usize> = (0..5).filter(|&k| !cases[k].children.is_empty()).collect();
    assert_eq!(failed, [1]);
    assert_eq!(cases[1].child_names(), ["failure"]);
    let message = cases[1].children[0].attr("message").unwrap();
    assert!(message.starts_with("try 2/5 exited 7 after "), "{message}");
}

/// Appends to the dead-letter file `file` the run of `sh -c SCRIPT`, which gives up (and
/// writes its own report, which the record does not keep).
fn give_up_into(dir: &Path, file: &Path, label: &str, script: &str) {
    let out = retry()
        .current_dir(dir)
        .arg("--dead-letter")
        .arg(file)
        .args(["--junit", "gave-up.xml", "--label", label, "-n", "1"])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn a_replay_of_two_records_writes_a_testcase_for_each() {
    let dir = common::temp_dir("junit-replay");
    let letters = dir.join("dead.jsonl");
    give_up_into(&dir, &letters, "fixed", "test -e fixed");
    give_up_into(&dir, &letters, "broken", "exit 6");
    std::fs::write(dir.join("fixed"), "").unwrap();
    for record in common::json_file(&letters) {
        assert_eq!(
            record["options"],
            serde_json::json!(["--label", record["label"], "-n", "1"])
        );
    }
    std::fs::remove_file(dir.join("gave-up.xml")).unwrap();
    let out = retry()
        .current_dir(&dir)
        .arg("--replay")
        .arg(&letters)
        .args(["--junit", "replay.xml", "-n", "2", "-d", "1ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let root = report(&dir.join("replay.xml"));
    assert_eq!((root.number("tests"), root.number("failures")), (2, 1));
    let cases = root.children("testcase");
    assert_eq!(cases[0].attr("name"), Some("fixed"));
    assert!(cases[0].children.is_empty(), "{:?}", cases[0]);
    assert_eq!(cases[1].attr("name"), Some("broken"));
    assert_eq!(cases[1].child_names(), ["failure", "rerunFailure"]);
    assert_eq!(cases[1].children[0].attr("type"), Some("tries"));
    // The runs replayed wrote no report of their own, in the directory each ran in or here.
    let reports: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".xml") || n.contains("junit"))
        .collect();
    assert_eq!(reports, ["replay.xml"]);
}

#[test]
fn names_with_markup_control_characters_or_bytes_not_utf8_still_make_valid_xml() {
    let dir = common::temp_dir("junit-names");
    let label = r#"a<&">b 'c'"#;
    let out = run(&dir, &["--label", label, "-n", "1"], "exit 2");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert_eq!(
        only_case(&report(&dir.join("report.xml"))).attr("name"),
        Some(label)
    );

    // The command line is named as the log quotes it: control characters and bytes that are
    // not UTF-8 as escapes.
    let odd = OsStr::from_bytes(b"x\x01y\xff\xfez\x1b");
    let out = retry()
        .current_dir(&dir)
        .args(["--junit", "report.xml", "--", "printf", "%s"])
        .arg(odd)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    assert_eq!(
        only_case(&root).attr("name"),
        Some(r"printf %s $'x\x01y\xff\xfez\e'")
    );

    // A record's label read from a dead-letter file may hold anything: what XML cannot hold
    // is replaced.
    let letters = dir.join("crafted.jsonl");
    let record = r#"{"event":"dead_letter","id":"0000-1","ts":"2026-01-01T00:00:00.000Z","label":"x\u0001<y>\ufffe","cwd":"/nonexistent/junit-names","command":["true"],"options":[],"exit_code":1,"reason":"tries","tries":1,"duration_ms":1}"#;
    std::fs::write(&letters, format!("{record}\n")).unwrap();
    std::fs::set_permissions(&letters, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = retry()
        .current_dir(&dir)
        .arg("--replay")
        .arg(&letters)
        .args(["--junit", "replay.xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let root = report(&dir.join("replay.xml"));
    let case = only_case(&root);
    assert_eq!(case.attr("name"), Some("x\u{fffd}<y>\u{fffd}"));
    assert_eq!(case.children[0].attr("type"), Some("cwd"));
}

#[test]
fn a_link_a_directory_or_a_fifo_at_file_is_refused_before_the_command_runs() {
    let dir = common::temp_dir("junit-refused");
    let target = dir.join("target.xml");
    std::fs::write(&target, "kept").unwrap();
    let link = dir.join("link.xml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let refused = |file: &Path, needles: &[&str]| {
        common::assert_refused(retry().arg("--junit").arg(file), &dir, needles);
    };
    refused(&link, &["--junit", "link.xml", "symbolic link"]);
    std::fs::create_dir(dir.join("sub")).unwrap();
    refused(&dir.join("sub"), &["--junit", "sub", "directory"]);
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    refused(&fifo, &["--junit", "fifo", "FIFO"]);
    assert_eq!(std::fs::read(&target).unwrap(), b"kept");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());

    // A link put there while the run went on is found before the rename: a warning, and the
    // run's status is the command's.
    let out = retry()
        .current_dir(&dir)
        .args([
            "--junit",
            "late.xml",
            "--",
            "ln",
            "-s",
            "target.xml",
            "late.xml",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        log.contains("warning: cannot write the --junit report") && log.contains("symbolic link"),
        "{log}"
    );
    assert!(
        std::fs::symlink_metadata(dir.join("late.xml"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"kept");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_report_in_place_of_another_file_of_the_run_or_of_a_run_that_runs_nothing_is_a_usage_error() {
    let dir = common::temp_dir("junit-usage");
    for (args, needle) in [
        (
            &["--junit", "a.xml", "--log-file", "a.xml"][..],
            "--log-file",
        ),
        (
            &["--junit", "d.jsonl", "--dead-letter", "./d.jsonl"],
            "--dead-letter",
        ),
        (&["--junit", "h.jsonl", "--history", "h.jsonl"], "--history"),
        (&["--junit", "a.xml", "--dry-run"], "--dry-run"),
    ] {
        common::assert_refused(retry().args(args), &dir, &["--junit", needle]);
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn the_reports_mode_follows_the_umask() {
    let dir = common::temp_dir("junit-umask");
    let binary = assert_cmd::cargo::cargo_bin("retry");
    for (umask, mode) in [("027", 0o640), ("002", 0o664), ("077", 0o600)] {
        let out = common::output_bounded(
            std::process::Command::new("sh")
                .current_dir(&dir)
                .args([
                    "-c",
                    &format!("umask {umask} && exec \"$0\" --junit r.xml -- true"),
                ])
                .arg(&binary),
            common::TEST_LIMIT,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let meta = std::fs::metadata(dir.join("r.xml")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, mode, "umask {umask}");
        report(&dir.join("r.xml"));
    }
}

#[test]
fn the_schema_check_refuses_what_the_schema_does() {
    let head = r#"<?xml version="1.0" encoding="UTF-8"?>"#;
    let suite = |failures: usize, body: &str| {
        format!(
            r#"{head}<testsuite name="retry" tests="1" failures="{failures}" errors="0" skipped="0" time="0.001"><testcase name="t" time="0.001">{body}</testcase></testsuite>"#
        )
    };
    let rerun = r#"<rerunFailure type="exit 1"><stackTrace>x</stackTrace></rerunFailure>"#;
    let good = suite(1, &format!(r#"<failure type="tries">x</failure>{rerun}"#));
    check_surefire(&parse(good.as_bytes()));
    let bad = [
        suite(1, &format!(r#"{rerun}<failure type="tries">x</failure>"#)),
        suite(1, r#"<failure>no type</failure>"#),
        suite(0, r#"<rerunFailure type="exit 1"/>"#),
        suite(
            0,
            r#"<flakyFailure type="exit 1"><system-out/></flakyFailure>"#,
        ),
        suite(0, r#"<failure type="tries">x</failure>"#),
        suite(0, r#"<skipped/><skipped/>"#),
        suite(0, r#"<output>x</output>"#),
        suite(0, "").replace(r#" time="0.001">"#, ">"),
        suite(0, "").replace("0.001", "1,5"),
        suite(0, "\u{1}"),
        suite(0, "<unclosed>"),
    ];
    for doc in bad {
        let refused = common::expect_panic(|| check_surefire(&parse(doc.as_bytes())));
        assert!(refused.is_some(), "taken: {doc}");
    }
}

#[test]
fn a_report_whose_directory_cannot_be_searched_is_a_warning_at_the_end_and_the_command_runs() {
    let dir = common::temp_dir("junit-unsearchable");
    // A file where a directory should be: no process, root's included, can search it.
    std::fs::write(dir.join("plain"), "").unwrap();
    let mut paths = vec![dir.join("plain").join("report.xml")];
    // A directory without x: not searched but by root, which bypasses it.
    if common::euid() != 0 {
        let closed = dir.join("closed");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o600)).unwrap();
        paths.push(closed.join("report.xml"));
    }
    for path in paths {
        let out = retry()
            .current_dir(&dir)
            .arg("--junit")
            .arg(&path)
            .args(["-n", "2", "-d", "0", "--", "sh", "-c", "echo ran; exit 3"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(3), "{path:?}: {log}");
        assert_eq!(
            out.stdout, b"ran\nran\n",
            "{path:?}: the command ran, both tries"
        );
        let last = log.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("retry: warning: cannot write the --junit report"),
            "{path:?}: the warning comes at the end: {log}"
        );
        assert_eq!(log.matches("--junit").count(), 1, "{log}");
    }
}

#[test]
fn each_failed_try_shows_the_tail_of_what_it_wrote_and_the_failure_the_last_ones() {
    let dir = common::temp_dir("junit-tails");
    // Each try writes its number on both streams, then, on the last, 100 KiB and a character
    // of two bytes at the end of its first 4 KiB cut.
    let script = "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; \
         echo \"out $n\"; echo \"err $n\" >&2; \
         if [ $n = 3 ]; then head -c 102400 /dev/zero | tr '\\0' x; printf 'é-end\\n'; fi; \
         if [ $n = 2 ]; then head -c 9000 /dev/zero | tr '\\0' y; printf '\\nlast of 2\\n'; fi; \
         exit 4";
    let out = run(&dir, &["-n", "3", "-d", "1ms"], script);
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    let root = report(&dir.join("report.xml"));
    let case = only_case(&root);
    assert_eq!(
        case.child_names(),
        ["failure", "rerunFailure", "rerunFailure", "system-out"]
    );
    let failure = &case.children[0];
    let message = failure.attr("message").unwrap();
    assert!(message.ends_with(": exit 4"), "{message}");
    // The failure's text: the log's two lines, then the last try's tail, 64 KiB at most.
    assert!(
        failure.text.starts_with("try 3/3 exited 4"),
        "{}",
        &failure.text[..200]
    );
    assert!(failure.text.ends_with("xxxxé-end\n"), "the tail's end");
    assert!(
        !failure.text.contains("out 3"),
        "the start of the last try is cut"
    );
    let kept = failure.text.split("\n\n").nth(1).unwrap();
    assert!(
        kept.starts_with('…') && kept.len() <= 64 * 1024 + 3,
        "{}",
        kept.len()
    );
    let system_out = &case.children[3];
    assert_eq!(system_out.text, kept);
    // An earlier try's tail, in its element: 4 KiB at most, from a character's start.
    let first = &case.children[1].children;
    assert_eq!(first[1].name, "system-out");
    // Its two lines come from two pipes, read in either order.
    assert!(
        ["out 1\nerr 1\n", "err 1\nout 1\n"].contains(&first[1].text.as_str()),
        "{}",
        first[1].text
    );
    let second = &case.children[2].children[1];
    // Its standard error's one line comes from the other pipe, read before, between or after
    // the writes of its standard output.
    let end = second.text.replacen("err 2\n", "", 1);
    assert!(end.ends_with("yyy\nlast of 2\n"), "{}", second.text);
    assert!(second.text.starts_with('…') && second.text.len() <= 4 * 1024 + 3);
}

#[test]
fn a_repeat_of_a_long_command_line_keeps_its_report_and_memory_bounded() {
    let dir = common::temp_dir("junit-long-command");
    // A command line of 100 KB, run 60 times, each try failing with a little output.
    let long = "x".repeat(100_000);
    let out = retry()
        .current_dir(&dir)
        .args([
            "--junit",
            "report.xml",
            "--repeat",
            "60",
            "--keep-going",
            "--",
        ])
        .args(["sh", "-c", "echo failed; exit 1", &long])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let size = std::fs::metadata(dir.join("report.xml")).unwrap().len();
    // 60 names cut to 1 KiB, each with its output: far under one copy of the line per case.
    assert!(size < 200_000, "the report is {size} bytes");
    let root = report(&dir.join("report.xml"));
    let cases = root.children("testcase");
    assert_eq!(cases.len(), 60);
    for case in cases {
        let name = case.attr("name").unwrap();
        assert!(name.chars().count() <= 1024 + 10, "{}", name.len());
        assert!(
            name.ends_with("… (try 1)") || name.contains("… (try "),
            "{}",
            &name[name.len() - 20..]
        );
        let failure = &case.children("failure")[0];
        assert!(failure.text.ends_with("failed\n"), "{}", failure.text);
    }
}

#[test]
fn a_try_of_a_repeat_whose_output_cannot_be_written_is_one_case_however_late_the_error_comes() {
    let dir = common::temp_dir("junit-full");
    // The error may come before the try's end or after it: either way one case, an error.
    for _ in 0..40 {
        let out = common::retry_std()
            .current_dir(&dir)
            .args(["--junit", "report.xml", "--repeat", "1", "--", "sh", "-c"])
            .arg("echo out; echo err >&2")
            .stdout(
                std::fs::File::options()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        let root = report(&dir.join("report.xml"));
        let case = only_case(&root);
        assert_eq!(case.child_names(), ["error"], "{root:?}");
    }
}
