//! One meaning per word ([the glossary](../../docs/architecture.md#glossary)): the words that
//! meant several things in the code keep to one, and this fails when a use in another meaning
//! comes back. Read from the source, code and comments, less the text of string literals: what
//! `retry` prints keeps its words (the reason `held`, a run "held by another replay").

use std::path::Path;

/// A word that must not appear in the files named (a folder ends with `/`), and what is said
/// there instead.
struct Rule {
    word: &'static str,
    not_in: &'static [&'static str],
    instead: &'static str,
}

const RULES: &[Rule] = &[
    Rule {
        word: "held",
        not_in: &[
            "run/stdio/",
            "run/stderr.rs",
            "run/column.rs",
            "run/withheld.rs",
            "run/playback.rs",
            "run/spool.rs",
            "run/descriptor.rs",
            "run/setup.rs",
            "run/process.rs",
            "run/runner/job_control.rs",
            "run/claims.rs",
            "run/keep.rs",
            "run/records.rs",
            "run/replay.rs",
            "store/deadletter.rs",
            "store/fleet.rs",
            "store/lease.rs",
            "store/lock.rs",
            "store/lines.rs",
            "store/prune.rs",
            "store/record.rs",
            "store/unsent.rs",
        ],
        instead: "\"held\" is a try the throttle held back: a try's output is buffered, a run's \
                  withheld, a lease claimed, a file locked",
    },
    Rule {
        word: "sink",
        not_in: &["run/stdio/", "run/descriptor.rs", "run/playback.rs"],
        instead: "a sink reads a run's events (`report::facts::Sink`): a descriptor a try's \
                  output goes to is an outlet",
    },
];

/// Phrases that mean something other than the glossary's meaning of their word, anywhere in
/// `src/`, matched word by word ("withheld output" is not "held output").
const PHRASES: &[&str] = &[
    "held output",
    "output held",
    "held standard",
    "held in memory",
    "held lines",
    "is held by",
    "was held by",
    "held the lock",
    "held its lock",
    "what is held",
    "what it held",
];

/// File names that said no more than "end": `runner/try_end.rs`, `runner/run_end.rs` and
/// `sim/try_end.rs` say whose.
const RETIRED_FILES: &[&str] = &["ended.rs", "ending.rs", "run/sink.rs"];

/// Uses that stay for now, by file and the text of their line: none.
const ALLOWED: &[(&str, &str)] = &[];

/// Every file of `src/`, by its path under `src/`, with its text.
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `code` with the text of its string literals taken out (`""` left, lines kept), comments and
/// the rest as they are.
fn without_strings(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let prev_word = at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
        if c == '/' && chars.get(at + 1) == Some(&'/') {
            while at < chars.len() && chars[at] != '\n' {
                out.push(chars[at]);
                at += 1;
            }
            continue;
        }
        let raw_at = match (c, chars.get(at + 1)) {
            ('r', Some('"' | '#')) if !prev_word => Some(at + 1),
            ('b', Some('r')) if !prev_word && matches!(chars.get(at + 2), Some('"' | '#')) => {
                Some(at + 2)
            }
            _ => None,
        };
        if let Some(start) = raw_at {
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            if chars.get(start + hashes) == Some(&'"') {
                at = start + hashes + 1;
                while at < chars.len()
                    && !(chars[at] == '"'
                        && chars[at + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&h| h == '#')
                            .count()
                            == hashes)
                {
                    if chars[at] == '\n' {
                        out.push('\n');
                    }
                    at += 1;
                }
                out.push_str("\"\"");
                at += 1 + hashes;
                continue;
            }
        }
        match c {
            '"' => {
                at += 1;
                while at < chars.len() && chars[at] != '"' {
                    if chars[at] == '\n' {
                        out.push('\n');
                    }
                    at += if chars[at] == '\\' { 2 } else { 1 };
                }
                out.push_str("\"\"");
                at += 1;
            }
            // A character literal ('"', '\n'), not a lifetime ('a).
            '\'' if chars.get(at + 2) == Some(&'\'') => at += 3,
            '\'' if chars.get(at + 1) == Some(&'\\') => {
                at += 2;
                while at < chars.len() && chars[at] != '\'' {
                    at += 1;
                }
                at += 1;
            }
            _ => {
                out.push(c);
                at += 1;
            }
        }
    }
    out
}

/// The words of `text` in lower case, identifiers split at `_` and where a capital starts a
/// part: `HELD_PIPE` and `TryHeld` both hold `held`; `withheld` is a word of its own.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()) {
        let mut word = String::new();
        let mut prev_lower = false;
        for c in token.chars() {
            if c.is_uppercase() && prev_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            word.extend(c.to_lowercase());
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

/// Every use the glossary forbids in `files` (path under `src/`, text), as `path:line: why`.
fn forbidden_uses(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        for retired in RETIRED_FILES {
            if path == retired || path.ends_with(&format!("/{retired}")) {
                found.push(format!("{path}: a file named for no more than its end"));
            }
        }
        let code = without_strings(text);
        for (n, line) in code.lines().enumerate() {
            if ALLOWED
                .iter()
                .any(|(file, part)| file == path && line.contains(part))
            {
                continue;
            }
            let line_words = words(line);
            for rule in RULES {
                let here = rule.not_in.iter().any(|place| match place.ends_with('/') {
                    true => path.starts_with(place),
                    false => path == place,
                });
                if here && line_words.iter().any(|w| w == rule.word) {
                    found.push(format!(
                        "{path}:{}: `{}`: {}",
                        n + 1,
                        rule.word,
                        rule.instead
                    ));
                }
            }
            let spaced = format!(" {} ", line_words.join(" "));
            for phrase in PHRASES {
                if spaced.contains(&format!(" {phrase} ")) {
                    found.push(format!(
                        "{path}:{}: \"{}\": {}",
                        n + 1,
                        phrase.trim(),
                        RULES[0].instead
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn each_word_of_the_glossary_keeps_its_one_meaning() {
    let files = sources();
    assert!(files.len() > 100, "only {} files read", files.len());
    let found = forbidden_uses(&files);
    assert!(
        found.is_empty(),
        "words used in another meaning (docs/architecture.md#glossary):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_glossary_check_finds_what_it_should() {
    let file = |path: &str, text: &str| vec![(path.to_string(), text.to_string())];
    let found = forbidden_uses(&file("run/stdio/mod.rs", "const HELD_PIPE: usize = 1;\n"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(forbidden_uses(&file("run/stderr.rs", "fn withhold() {} // withheld\n")).is_empty());
    let message = "let m = \"run {} is held by another replay\";\n";
    assert!(forbidden_uses(&file("run/claims.rs", message)).is_empty());
    let found = forbidden_uses(&file("report/log.rs", "/// Plays held output back.\n"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(forbidden_uses(&file("report/log.rs", "/// Plays withheld output back.\n")).is_empty());
    assert!(forbidden_uses(&file("policy/throttle.rs", "struct TryHeld;\n")).is_empty());
    assert_eq!(forbidden_uses(&file("run/runner/ending.rs", "")).len(), 1);
    assert_eq!(
        words("TryHeld held_start withheld"),
        ["try", "held", "held", "start", "withheld"]
    );
    assert_eq!(
        without_strings("a(\"b\\\"c\", r#\"d\"#, '\"') // \"e\"\n"),
        "a(\"\", \"\", ) // \"e\"\n"
    );
}
