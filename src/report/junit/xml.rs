//! A suite as the XML of Maven Surefire's test report (the schema Jenkins, GitLab and nextest
//! read), written with quick-xml, which escapes `<`, `&`, `>` and quotes. What XML cannot hold
//! at all (most C0 controls, U+FFFE and U+FFFF) is replaced with U+FFFD first: never written raw.

use std::borrow::Cow;
use std::io;
use std::time::Duration;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use crate::report::junit::case::{Case, CaseEnd, Problem, Suite};

/// The `classname` of every case: what a CI groups the cases by.
const CLASS: &str = "retry";

/// The report of `suite`, as the bytes of its file.
pub fn document(suite: &Suite) -> Vec<u8> {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing to memory does not fail.
    let _ = write_suite(&mut writer, suite);
    let mut bytes = writer.into_inner();
    bytes.push(b'\n');
    bytes
}

/// `text` with every character that XML 1.0 cannot hold replaced by U+FFFD: the C0 controls but
/// tab, line feed and carriage return, and the non-characters U+FFFE and U+FFFF. (Text that was
/// not UTF-8 reached here through a lossy conversion, which left U+FFFD in place of its bytes.)
pub fn xml_safe(text: &str) -> Cow<'_, str> {
    let forbidden = |c: char| matches!(c, '\0'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    if !text.chars().any(forbidden) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if forbidden(c) { '\u{fffd}' } else { c })
            .collect(),
    )
}

/// Seconds with three decimals, as Surefire writes a `time`: `12.345`, rounded to the
/// millisecond as the log rounds.
pub fn seconds(d: Duration) -> String {
    let ms = (d.as_micros() + 500) / 1000;
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

fn write_suite(w: &mut Writer<Vec<u8>>, suite: &Suite) -> io::Result<()> {
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let (tests, failures, errors, skipped) = suite.counts();
    let mut start = BytesStart::new("testsuite");
    let numbers = [
        ("tests", tests),
        ("failures", failures),
        ("errors", errors),
        ("skipped", skipped),
    ];
    start.push_attribute(("name", CLASS));
    for (name, n) in numbers {
        start.push_attribute((name, n.to_string().as_str()));
    }
    start.push_attribute(("time", seconds(suite.time).as_str()));
    let timestamp = humantime::format_rfc3339_millis(suite.start).to_string();
    start.push_attribute(("timestamp", timestamp.as_str()));
    w.write_event(Event::Start(start))?;
    if suite.cases.left_out > 0 {
        let left_out = suite.cases.left_out.to_string();
        w.create_element("properties").write_inner_content(|w| {
            w.create_element("property")
                .with_attributes([("name", "retry.tries_left_out"), ("value", &left_out)])
                .write_empty()
                .map(drop)
        })?;
    }
    for case in &suite.cases.list {
        write_case(w, case)?;
    }
    w.write_event(Event::End(BytesEnd::new("testsuite")))
}

/// One `<testcase>`; its elements in the order the schema gives them: `failure`, then
/// `rerunFailure`, `flakyFailure`, `skipped`, `error`.
fn write_case(w: &mut Writer<Vec<u8>>, case: &Case) -> io::Result<()> {
    let name = xml_safe(&case.name);
    let time = seconds(case.time);
    let element = w.create_element("testcase").with_attributes([
        ("name", name.as_ref()),
        ("classname", CLASS),
        ("time", time.as_str()),
    ]);
    let (failure, reruns, flaky, skipped, error) = match &case.end {
        CaseEnd::Passed => return element.write_empty().map(drop),
        CaseEnd::Flaky(tries) => (None, &[][..], &tries[..], None, None),
        CaseEnd::Failed { failure, reruns } => (Some(failure), &reruns[..], &[][..], None, None),
        CaseEnd::Error { error, reruns } => (None, &reruns[..], &[][..], None, Some(error)),
        CaseEnd::Skipped(why) => (None, &[][..], &[][..], Some(why), None),
    };
    element
        .write_inner_content(|w| {
            if let Some(failure) = failure {
                write_problem(w, "failure", failure)?;
            }
            for rerun in reruns {
                write_try(w, "rerunFailure", rerun)?;
            }
            for rerun in flaky {
                write_try(w, "flakyFailure", rerun)?;
            }
            if let Some(why) = skipped {
                w.create_element("skipped")
                    .with_attribute(("message", xml_safe(why).as_ref()))
                    .write_empty()?;
            }
            if let Some(error) = error {
                write_problem(w, "error", error)?;
            }
            // The last failed try's output, for the case as a whole too.
            if let Some(failure) = failure.filter(|f| !f.output.is_empty()) {
                write_output(w, &failure.output)?;
            }
            Ok(())
        })
        .map(drop)
}

/// A `<failure>` or `<error>`: its message and type, its detail as its text, then the tail of
/// the try's output, which is all GitLab shows of a failure.
fn write_problem(w: &mut Writer<Vec<u8>>, tag: &str, p: &Problem) -> io::Result<()> {
    let text = match p.output.is_empty() {
        true => p.detail.clone(),
        false => format!("{}\n\n{}", p.detail, p.output),
    };
    let detail = xml_safe(&text);
    w.create_element(tag)
        .with_attributes([
            ("message", xml_safe(&p.message).as_ref()),
            ("type", xml_safe(&p.kind).as_ref()),
        ])
        .write_text_content(BytesText::new(&detail))
        .map(drop)
}

/// A `<rerunFailure>` or `<flakyFailure>`: its message and type, its detail in the
/// `<stackTrace>` the schema asks of it.
fn write_try(w: &mut Writer<Vec<u8>>, tag: &str, p: &Problem) -> io::Result<()> {
    let detail = xml_safe(&p.detail);
    w.create_element(tag)
        .with_attributes([
            ("message", xml_safe(&p.message).as_ref()),
            ("type", xml_safe(&p.kind).as_ref()),
        ])
        .write_inner_content(|w| {
            w.create_element("stackTrace")
                .write_text_content(BytesText::new(&detail))?;
            if !p.output.is_empty() {
                write_output(w, &p.output)?;
            }
            Ok(())
        })
        .map(drop)
}

/// A `<system-out>`: what a try wrote, both its streams.
fn write_output(w: &mut Writer<Vec<u8>>, output: &str) -> io::Result<()> {
    w.create_element("system-out")
        .write_text_content(BytesText::new(&xml_safe(output)))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::junit::case::Cases;
    use std::time::SystemTime;

    fn problem(text: &str) -> Problem {
        Problem {
            kind: "exit 1".into(),
            message: text.into(),
            detail: text.into(),
            output: String::new(),
        }
    }

    #[test]
    fn what_xml_cannot_hold_is_replaced_and_the_rest_kept() {
        assert_eq!(xml_safe("a\tb\nc\rd é ☃"), "a\tb\nc\rd é ☃");
        assert!(matches!(xml_safe("plain"), Cow::Borrowed(_)));
        assert_eq!(
            xml_safe("\0\u{1}\u{8}\u{b}\u{c}\u{1b}\u{1f} \u{fffe}\u{ffff}\u{7f}"),
            "\u{fffd}".repeat(7) + " \u{fffd}\u{fffd}\u{7f}"
        );
        let lossy = String::from_utf8_lossy(b"a\xff\xed\xa0\x80b");
        assert_eq!(xml_safe(&lossy), lossy);
    }

    #[test]
    fn times_have_three_decimals() {
        assert_eq!(seconds(Duration::ZERO), "0.000");
        assert_eq!(seconds(Duration::from_micros(12_345_678)), "12.346");
        assert_eq!(seconds(Duration::from_micros(12_345_499)), "12.345");
        assert_eq!(seconds(Duration::from_secs(90_061)), "90061.000");
    }

    #[test]
    fn a_suite_is_written_with_its_elements_in_the_schemas_order_and_its_text_escaped() {
        let case = |name: &str, end| Case {
            name: name.into(),
            time: Duration::from_millis(1500),
            end,
        };
        let suite = Suite {
            start: SystemTime::UNIX_EPOCH,
            time: Duration::from_millis(2_001),
            cases: Cases {
                list: vec![
                    case("ok", CaseEnd::Passed),
                    case(
                        "a <&\"> \u{1}",
                        CaseEnd::Flaky(vec![problem("try 1 ]]> <x>")]),
                    ),
                    case(
                        "gave up",
                        CaseEnd::Failed {
                            failure: problem("last"),
                            reruns: vec![problem("first")],
                        },
                    ),
                ],
                left_out: 2,
            },
        };
        let text = String::from_utf8(document(&suite)).unwrap();
        let want = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="retry" tests="3" failures="1" errors="0" skipped="0" time="2.001" timestamp="1970-01-01T00:00:00.000Z">
  <properties>
    <property name="retry.tries_left_out" value="2"/>
  </properties>
  <testcase name="ok" classname="retry" time="1.500"/>
  <testcase name="a &lt;&amp;&quot;&gt; �" classname="retry" time="1.500">
    <flakyFailure message="try 1 ]]&gt; &lt;x&gt;" type="exit 1">
      <stackTrace>try 1 ]]&gt; &lt;x&gt;</stackTrace>
    </flakyFailure>
  </testcase>
  <testcase name="gave up" classname="retry" time="1.500">
    <failure message="last" type="exit 1">last</failure>
    <rerunFailure message="first" type="exit 1">
      <stackTrace>first</stackTrace>
    </rerunFailure>
  </testcase>
</testsuite>
"#;
        assert_eq!(text, want);
    }
}
