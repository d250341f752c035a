//! The speed of the JSON reader on lines of every shape a history or dead-letter file can hold
//! (docs/architecture.md, `json/`): reading must stay linear in the line's size whatever the
//! line holds. One object of about 90,000 keys just under the 1 MiB line limit, the same with
//! its last key given twice, nesting 10,000 deep, a string of a megabyte, a number of 400
//! digits, and a record line as `retry` writes it, read 100,000 times.
//!
//!     cargo bench --bench json

use std::time::{Duration, Instant};

use retry::json::{self, Obj, Unparsed};

const ROUNDS: usize = 5;
/// A shape whose rounds have taken this long in all is timed no further: before the reader
/// was linear, one round of the widest object took half a minute.
const PATIENCE: Duration = Duration::from_secs(10);
const LINE_LIMIT: usize = 1 << 20;
const RECORDS: usize = 100_000;

/// One object of `keys` members `"k00000":0`, and its length.
fn wide_object(keys: usize) -> String {
    let members: Vec<String> = (0..keys)
        .map(|i| format!("\"k{i:05}\":{}", i % 10))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// The widest object of such members that fits under the line limit.
fn widest_object() -> (usize, String) {
    let member = wide_object(2).len() / 2;
    let keys = (LINE_LIMIT - 2) / member;
    let line = wide_object(keys);
    assert!(line.len() < LINE_LIMIT, "{}", line.len());
    (keys, line)
}

/// The same object with its last key given again.
fn with_duplicate(line: &str) -> String {
    format!("{},\"k00000\":1}}", &line[..line.len() - 1])
}

/// A record line as the dead-letter file holds one.
fn record() -> String {
    Obj::new()
        .str("event", "dead_letter")
        .str("id", "01JD5R7Q2W8E4T6Y9U3I1O0P5A")
        .str("ts", "2026-12-01T10:00:00.123Z")
        .raw("label", "null")
        .words(
            "command",
            ["sh", "-c", "curl -fsS https://example.com/hook || exit 3"].map(std::ffi::OsStr::new),
        )
        .num("tries", 5u64)
        .num("exit", 3u64)
        .str("reason", "gave_up")
        .finish()
}

/// Median seconds of `read` over the rounds `PATIENCE` allows, and how many rounds ran.
fn time(mut read: impl FnMut()) -> (f64, usize) {
    let mut walls = Vec::new();
    let started = Instant::now();
    while walls.len() < ROUNDS && started.elapsed() < PATIENCE {
        let round = Instant::now();
        read();
        walls.push(round.elapsed().as_secs_f64());
    }
    walls.sort_by(|a, b| a.total_cmp(b));
    (walls[walls.len() / 2], walls.len())
}

/// What the reader made of a line, in a few words.
fn verdict(line: &str) -> String {
    match json::parse_line(line) {
        Ok(_) => "read".into(),
        Err(Unparsed::EndsTooSoon) => "ends too soon".into(),
        Err(Unparsed::Wrong(why)) => format!("refused: {}", cut(&why, 60)),
    }
}

fn cut(text: &str, width: usize) -> String {
    match text.char_indices().nth(width) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.into(),
    }
}

fn report(what: &str, line: &str) {
    let (seconds, rounds) = time(|| {
        let _ = std::hint::black_box(json::parse_line(std::hint::black_box(line)));
    });
    println!(
        "  {what} ({:.2} MB), median of {rounds}: {:.3} ms, {}",
        line.len() as f64 / 1e6,
        seconds * 1e3,
        verdict(line)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (keys, widest) = widest_object();
    println!("one line each, read by json::parse_line:");
    report("an object of 40000 keys", &wide_object(40_000));
    report(&format!("an object of {keys} keys"), &widest);
    report(
        &format!("an object of {keys} keys, the first given again last"),
        &with_duplicate(&widest),
    );
    report("arrays nested 10000 deep", &"[".repeat(10_000));
    report(
        "objects nested 10000 deep",
        &format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000)),
    );
    report(
        "a string of a megabyte",
        &format!("{{\"s\":\"{}\"}}", "é\\n".repeat(LINE_LIMIT / 5)),
    );
    report("a number of 400 digits", &format!("[{}]", "7".repeat(400)));
    let line = record();
    let (seconds, rounds) = time(|| {
        for _ in 0..RECORDS {
            let _ = std::hint::black_box(json::parse_line(std::hint::black_box(&line)));
        }
    });
    println!(
        "  a record line of {} bytes, {RECORDS} times, median of {rounds}: {:.1} ms \
         ({:.0} ns a line), {}",
        line.len(),
        seconds * 1e3,
        seconds * 1e9 / RECORDS as f64,
        verdict(&line)
    );
}
