//! Which recorded runs an operator names (docs/dead-letters.md#picking-forgetting-pruning): a run
//! id, or a prefix of one long enough to be unique, as `git` takes a commit's; a label by a shell
//! pattern, as `case` matches one. Nothing here reads a file: it picks among the ids it is given.

/// The shortest prefix of an id that names a run: eight characters of a run id are a 32-bit
/// number, unique among the runs of any file a person reads.
pub const MIN_PREFIX: usize = 8;

/// Why the words naming runs do not name them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unpicked {
    /// No run has this id, or an id starting with it.
    Unknown(String),
    /// More than one run's id starts with this: how many.
    Ambiguous(String, usize),
    /// It is shorter than [`MIN_PREFIX`] and no run has it as its whole id.
    TooShort(String),
}

impl std::fmt::Display for Unpicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unpicked::Unknown(id) => write!(f, "no pending run has the id '{id}'"),
            Unpicked::Ambiguous(id, n) => write!(
                f,
                "'{id}' starts the ids of {n} pending runs: give more of the id"
            ),
            Unpicked::TooShort(id) => write!(
                f,
                "'{id}' is too short: it is no run's whole id, and a part of one needs at least {MIN_PREFIX} characters"
            ),
        }
    }
}

/// The index in `ids` of the one run that `word` names: its whole id, or a prefix of at least
/// [`MIN_PREFIX`] characters that starts no other id.
pub fn one<'a>(word: &str, ids: impl Iterator<Item = &'a str> + Clone) -> Result<usize, Unpicked> {
    if let Some(k) = ids.clone().position(|id| id == word) {
        return Ok(k);
    }
    if word.chars().count() < MIN_PREFIX {
        return Err(Unpicked::TooShort(word.to_string()));
    }
    let mut found = ids.enumerate().filter(|(_, id)| id.starts_with(word));
    match (found.next(), found.count()) {
        (None, _) => Err(Unpicked::Unknown(word.to_string())),
        (Some((k, _)), 0) => Ok(k),
        (Some(_), more) => Err(Unpicked::Ambiguous(word.to_string(), more + 1)),
    }
}

/// Whether `text` matches the shell pattern `pattern`: `*` any characters, `?` one, `[abc]`,
/// `[a-z]` and `[!a-z]` (or `[^a-z]`) one of a set, `\` takes the next character as it is. A
/// `[` without its `]` is a plain character, as in the shell.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // The classic iterative match with one backtrack point, the last `*` seen: linear in most
    // patterns, and never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some(_) => {
                if let Some(next) = one_char(&p, pi, t[ti]) {
                    pi = next;
                    ti += 1;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Where the pattern goes on after the element at `pi`, when that element matches `c`.
fn one_char(p: &[char], pi: usize, c: char) -> Option<usize> {
    match p[pi] {
        '?' => Some(pi + 1),
        '\\' if pi + 1 < p.len() => (p[pi + 1] == c).then_some(pi + 2),
        '[' => match class(p, pi + 1, c) {
            Some((matched, end)) => matched.then_some(end),
            None => (c == '[').then_some(pi + 1),
        },
        other => (other == c).then_some(pi + 1),
    }
}

/// Whether `c` is in the set that starts at `start` (just after its `[`), and where the
/// pattern goes on after its `]`; `None` when the set has no `]`. As fnmatch(3) and bash read a
/// set, `\` in it takes the next character as it is: `[\]]` is `]`, `[a\-z]` is `a`, `-` or `z`.
fn class(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start;
    let negated = matches!(p.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while let Some(&x) = p.get(i) {
        if x == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        let (low, next) = member(p, i)?;
        match (p.get(next), p.get(next + 1)) {
            (Some('-'), Some(&e)) if e != ']' => {
                let (high, after) = member(p, next + 1)?;
                matched |= (low..=high).contains(&c);
                i = after;
            }
            _ => {
                matched |= low == c;
                i = next;
            }
        }
    }
    None
}

/// The character of a set at `i`, taken as it is after a `\`, and where the set goes on.
fn member(p: &[char], i: usize) -> Option<(char, usize)> {
    match p.get(i)? {
        '\\' => p.get(i + 1).map(|&x| (x, i + 2)),
        &x => Some((x, i + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [&str; 3] = [
        "1b0fe2fd-7ba5-8ff7-23ca-5594f412e0c2",
        "1b0fe2fd-0000-8ff7-23ca-5594f412e0c2",
        "9c11aa00-7ba5-8ff7-23ca-5594f412e0c2",
    ];

    #[test]
    fn an_id_is_named_whole_or_by_a_unique_prefix_of_eight_characters_or_more() {
        let ids = || IDS.iter().copied();
        assert_eq!(one(IDS[1], ids()), Ok(1));
        assert_eq!(one("9c11aa00", ids()), Ok(2));
        assert_eq!(one("1b0fe2fd-7", ids()), Ok(0));
        assert_eq!(
            one("1b0fe2fd", ids()),
            Err(Unpicked::Ambiguous("1b0fe2fd".into(), 2))
        );
        assert_eq!(
            one("9c11aa0", ids()),
            Err(Unpicked::TooShort("9c11aa0".into()))
        );
        assert_eq!(
            one("ffffffff", ids()),
            Err(Unpicked::Unknown("ffffffff".into()))
        );
        // A short id that is some run's whole id names it.
        assert_eq!(one("abc", ["x", "abc"].into_iter()), Ok(1));
    }

    #[test]
    fn a_label_matches_as_the_shell_matches_a_pattern() {
        for (pattern, text, expected) in [
            ("nightly-*", "nightly-sync", true),
            ("nightly-*", "weekly-sync", false),
            ("*sync*", "nightly-sync-orders", true),
            ("job-?", "job-7", true),
            ("job-?", "job-17", false),
            ("job-[0-9]", "job-7", true),
            ("job-[!0-9]", "job-7", false),
            ("job-[^0-9]", "job-x", true),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("[x", "[x", true),
            ("", "", true),
            ("*", "", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("[]]", "]", true),
            ("[\\]]", "]", true),
            ("[\\]]", "\\", false),
            ("[a\\-z]", "-", true),
            ("[a\\-z]", "m", false),
            ("[a\\-z]", "z", true),
            ("[!\\]]", "]", false),
            ("x[\\a-\\c]", "xb", true),
        ] {
            assert_eq!(glob(pattern, text), expected, "{pattern} against {text}");
        }
    }

    #[test]
    fn a_pattern_of_many_stars_against_a_long_text_ends_at_once() {
        let text = "a".repeat(10_000);
        let pattern = format!("{}b", "*a".repeat(50));
        let started = std::time::Instant::now();
        assert!(!glob(&pattern, &text));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
