//! The shape of the source: no module imports one that imports it back (directly or through
//! others), and the lower layers (`policy`, `sim`, `store`, `json`, `text`, `duration`,
//! `http`) import nothing from the shell above them (`run`, `report`, `cli`, `config`), and no
//! module imports what its parent module defines (a parent uses its children, never the other way round). Read
//! from the source itself: every `crate::` path outside comments and tests, and every `super::`
//! path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src/`, by its path (`report::log`), with its source less comments and tests.
fn modules() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
                .unwrap()
                .with_extension("");
            let mut name = rel.to_string_lossy().replace('/', "::");
            if let Some(parent) = name.strip_suffix("::mod") {
                name = parent.to_string();
            }
            if matches!(name.as_str(), "lib" | "main") || name.ends_with("tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| format!("{l}\n"))
                .collect();
            out.insert(name, code);
        }
    }
    out
}

/// The paths of the use tree at the start of `text`, braces spread out, and how much of `text`
/// it took: `a::{b, c::{d, e}}` gives `a::b`, `a::c::d` and `a::c::e`.
fn tree_paths(text: &str) -> (Vec<String>, usize) {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '*'))
        .unwrap_or(text.len());
    let head = &text[..end];
    if !text[end..].starts_with('{') {
        return (vec![head.trim_end_matches(':').to_string()], end);
    }
    let mut paths = Vec::new();
    let mut at = end + 1;
    while at < text.len() {
        at += text[at..].len() - text[at..].trim_start().len();
        if text[at..].starts_with('}') {
            return (paths, at + 1);
        }
        let (inner, used) = tree_paths(&text[at..]);
        paths.extend(inner.into_iter().map(|p| format!("{head}{p}")));
        at += used;
        // Past a rename (`X as Y`) to the next path of the braces, or their end.
        at += text[at..].find([',', '}']).unwrap_or(text.len() - at);
        at += usize::from(text[at..].starts_with(','));
    }
    (paths, at)
}

/// Every path that follows `prefix` in `code`, the braces of a `use` spread out:
/// `crate::run::{a, b::C}` gives `run::a` and `run::b::C`.
fn use_paths(code: &str, prefix: &str) -> Vec<String> {
    code.match_indices(prefix)
        .filter(|(at, _)| {
            !code[..*at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .flat_map(|(at, _)| tree_paths(&code[at + prefix.len()..]).0)
        .filter(|path| !path.is_empty())
        .collect()
}

/// `code` less the modules declared inside it (`mod imp { .. }`, a test module whose
/// `#[cfg(..)]` spans lines), in which `super::` names the module of `code` itself.
fn less_inline_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("mod ") {
        let head = &rest[at + 4..];
        let name = head
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(head.len());
        let starts_word = !rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !starts_word || name == 0 || !head[name..].starts_with(" {") {
            out.push_str(&rest[..at + 4]);
            rest = head;
            continue;
        }
        out.push_str(&rest[..at]);
        let mut depth = 0usize;
        let body = &head[name + 1..];
        let end = body
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => return false,
                }
                depth == 0
            })
            .map_or(body.len(), |(i, _)| i + 1);
        rest = &body[end..];
    }
    out.push_str(rest);
    out
}

/// The names that a module's own source defines (functions, types, traits, constants, statics,
/// macros), not those it imports or passes on with `pub use`.
fn defined(code: &str) -> BTreeSet<&str> {
    let kinds = [
        "fn",
        "struct",
        "enum",
        "union",
        "trait",
        "type",
        "const",
        "static",
        "macro_rules",
    ];
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|pair| kinds.contains(&pair[0]))
        .map(|pair| pair[1])
        .collect()
}

/// The module a path names: the longest of its leading parts that is a module.
fn module_of(path: &str, names: &BTreeMap<String, String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|k| parts[..k].join("::"))
        .find(|m| names.contains_key(m))
}

/// Each module and the modules it imports, a module's own parent and children left out (a
/// parent declares its children, and they may use what it defines).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut graph = BTreeMap::new();
    for (name, code) in &mods {
        let parent = name.rsplit_once("::").map_or("", |(p, _)| p);
        let mut deps = BTreeSet::new();
        let mut imported = use_paths(code, "crate::");
        for path in use_paths(&less_inline_modules(code), "super::") {
            imported.push(match parent {
                "" => path.to_string(),
                parent => format!("{parent}::{path}"),
            });
        }
        for path in imported {
            if let Some(m) = module_of(&path, &mods) {
                let related = m.starts_with(&format!("{name}::"))
                    || name.starts_with(&format!("{m}::"))
                    || m == *name;
                if !related {
                    deps.insert(m);
                }
            }
        }
        graph.insert(name.clone(), deps);
    }
    graph
}

/// Whether `to` is reached from `from` through the graph.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        for next in graph.get(&m).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    false
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = graph();
    assert!(graph.len() > 40, "only {} modules read", graph.len());
    let mut cycles = Vec::new();
    for (name, deps) in &graph {
        for dep in deps {
            if reaches(&graph, dep, name) {
                cycles.push(format!("{name} -> {dep} -> ... -> {name}"));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_lower_layers_import_nothing_from_the_shell() {
    let lower = ["policy", "sim", "store", "json", "text", "duration", "http"];
    let shell = ["run", "report", "cli", "config"];
    let mut upward = Vec::new();
    for (name, deps) in graph() {
        if !lower.contains(&name.split("::").next().unwrap_or("")) {
            continue;
        }
        for dep in deps {
            if shell.contains(&dep.split("::").next().unwrap_or("")) {
                upward.push(format!("{name} imports {dep}"));
            }
        }
    }
    assert!(upward.is_empty(), "{}", upward.join("\n"));
}

#[test]
fn the_reading_of_imports_finds_what_it_should() {
    let code = "use crate::report::log::Log;\nlet x = my_crate::run::go();\n";
    assert_eq!(use_paths(code, "crate::"), ["report::log::Log"]);
    let code = "use crate::run::{a::{B, c}, D as E, f};\nsuper::g(1);\n";
    assert_eq!(
        use_paths(code, "crate::"),
        ["run::a::B", "run::a::c", "run::D", "run::f"]
    );
    assert_eq!(use_paths(code, "super::"), ["g"]);
    let code = "fn a() {}\nmod imp {\n    use super::b;\n}\nuse super::c;\n";
    assert_eq!(use_paths(&less_inline_modules(code), "super::"), ["c"]);
    let code = "pub(crate) fn run_id() {}\npub use x::Y;\nstruct Z;\n";
    assert_eq!(defined(code), BTreeSet::from(["run_id", "Z"]));
    let graph = graph();
    assert!(
        graph["run::runner::state"].contains("report::log"),
        "{:?}",
        graph["run::runner::state"]
    );
    assert!(graph["report::log"].contains("report::human"));
}

/// Each module and the items of its parent's own source that it imports, by their path:
/// `crate::a::b::X` in module `a::b::c`, or `super::X` outside a test module, where `a::b`
/// defines `X` itself (not a child module of `a::b`, nor what it passes on with `pub use`).
fn parent_imports() -> BTreeMap<String, Vec<String>> {
    let mods = modules();
    let mut out = BTreeMap::new();
    for (name, code) in &mods {
        let Some((parent, _)) = name.rsplit_once("::") else {
            continue;
        };
        let defined = defined(&mods[parent]);
        let mut paths = use_paths(code, "crate::");
        paths.extend(
            use_paths(&less_inline_modules(code), "super::")
                .into_iter()
                .map(|path| format!("{parent}::{path}")),
        );
        let upward: Vec<String> = paths
            .into_iter()
            .filter(|path| {
                let Some(item) = path.strip_prefix(&format!("{parent}::")) else {
                    return false;
                };
                let item = item.split("::").next().unwrap_or("");
                module_of(path, &mods).as_deref() == Some(parent)
                    && (item == "*" || defined.contains(item))
            })
            .collect();
        if !upward.is_empty() {
            out.insert(name.clone(), upward);
        }
    }
    out
}

#[test]
fn no_module_imports_an_item_of_its_own_parent() {
    let found = parent_imports();
    let upward: Vec<String> = found
        .iter()
        .map(|(name, paths)| format!("{name} imports {}", paths.join(", ")))
        .collect();
    assert!(
        upward.is_empty(),
        "modules that import items of their parent (move them into a sibling):\n{}",
        upward.join("\n")
    );
}

/// The clap tables of `cli.rs`: one builder expression per option group, long by nature.
const LONG_TABLES: [&str; 2] = ["cli::options", "cli::flaky_options"];

/// The most lines a function of `src/` may have, its signature and braces included.
const MOST_LINES: usize = 80;

/// `code` with the text of its string and character literals taken out, so that the braces
/// left are those of the code.
fn without_literals(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    while at < bytes.len() {
        let raw = bytes[at] == b'r' && matches!(bytes.get(at + 1), Some(b'"' | b'#'));
        if raw && (at == 0 || !(bytes[at - 1] as char).is_alphanumeric()) {
            let hashes = bytes[at + 1..].iter().take_while(|&&b| b == b'#').count();
            if bytes.get(at + 1 + hashes) == Some(&b'"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let start = at + 2 + hashes;
                let end = code[start..].find(&close).map_or(code.len(), |e| start + e);
                out.extend(code[at..end].chars().filter(|&c| c == '\n'));
                at = end + close.len();
                continue;
            }
        }
        match bytes[at] {
            b'"' => {
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    if bytes[at] == b'\n' {
                        out.push('\n');
                    }
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at += 1;
            }
            // A character literal ('{', '\n'), not a lifetime ('a).
            b'\'' if bytes.get(at + 2) == Some(&b'\'') => at += 3,
            b'\'' if bytes.get(at + 1) == Some(&b'\\') => {
                at += code[at + 2..].find('\'').map_or(code.len(), |e| e + 3);
            }
            _ => {
                let c = code[at..].chars().next().unwrap_or(' ');
                out.push(c);
                at += c.len_utf8();
            }
        }
    }
    out
}

/// Every function of `code` longer than `most` lines: its name and its lines.
fn long_functions(code: &str, most: usize) -> Vec<(String, usize)> {
    let code = without_literals(code);
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line
            .split_whitespace()
            .skip_while(|word| *word != "fn")
            .nth(1)
            .map(|w| w.split(['(', '<']).next().unwrap_or(w))
        else {
            continue;
        };
        let (mut depth, mut opened) = (0i64, false);
        for (j, body) in lines[i..].iter().enumerate() {
            let body = body.split("//").next().unwrap_or("");
            if !opened && body.contains(';') && !body.contains('{') {
                break;
            }
            depth += body.matches('{').count() as i64 - body.matches('}').count() as i64;
            opened |= body.contains('{');
            if opened && depth <= 0 {
                if j + 1 > most {
                    out.push((name.to_string(), j + 1));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn no_function_of_the_source_is_over_80_lines() {
    let mut long = Vec::new();
    for (module, code) in modules() {
        for (name, lines) in long_functions(&code, MOST_LINES) {
            if !LONG_TABLES.contains(&format!("{module}::{name}").as_str()) {
                long.push(format!("{module}::{name}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MOST_LINES} lines (split them):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_reading_of_functions_finds_long_ones_and_skips_literals() {
    let body = "    x();\n".repeat(80);
    let code = format!("fn short() {{\n    let s = \"}}}}{{\";\n}}\nfn long() {{\n{body}}}\n");
    assert_eq!(long_functions(&code, 80), [("long".to_string(), 82)]);
    assert_eq!(
        long_functions("fn a() {\n    '{';\n}\n", 1),
        [("a".to_string(), 3)]
    );
    assert!(long_functions("fn declared(x: u8);\n", 0).is_empty());
}

/// The most lines a source file may have before its tests: a file that grows past it holds
/// more than one concern, and splits along its seams. The clap table may stay whole.
const MOST_FILE_LINES: usize = 700;

#[test]
fn no_source_file_but_the_option_table_is_over_700_lines_before_its_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src.clone()];
    let mut long = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("src/cli.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let lines = text.lines().take_while(|l| *l != "#[cfg(test)]").count();
                if lines > MOST_FILE_LINES {
                    long.push(format!("{}: {lines} lines", path.display()));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MOST_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The state `src/` may keep in statics, by module and name, each for a reason: the signal
/// handler's pipe and the process that owns it, which only a static can hand a handler (it
/// gets no arguments); and whether the command line being built carries its help texts, set
/// and put back while it is built, before any run starts. Everything a run writes (where the
/// line stands on standard error, what `--output-on-failure` holds) is owned by the shell and
/// handed to its writers (`run::stderr`).
const ALLOWED_STATE: [(&str, &str); 3] = [
    ("run::signals", "WRITE_FD"),
    ("run::signals", "OWNER"),
    ("cli", "TEXTS"),
];

/// The statics of `code` that hold state, by name: a `static mut`, a static whose type can
/// change behind a shared reference (atomics, cells, locks, lazy values), and every static a
/// `thread_local!` declares.
fn state_statics(code: &str) -> Vec<String> {
    let code: String = without_literals(code)
        .lines()
        .map(|l| format!("{}\n", l.split("//").next().unwrap_or("")))
        .collect();
    let mutable = [
        "Atomic",
        "Cell",
        "Mutex",
        "RwLock",
        "Once",
        "Lazy",
        "UnsafeCell",
    ];
    let local: Vec<(usize, usize)> = code
        .match_indices("thread_local!")
        .map(|(at, _)| {
            let mut depth = 0i64;
            let end = code[at..]
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' | '(' => depth += 1,
                        '}' | ')' => depth -= 1,
                        _ => return false,
                    }
                    depth == 0
                })
                .map_or(code.len(), |(i, _)| at + i);
            (at, end)
        })
        .collect();
    let mut found = Vec::new();
    for (at, _) in code.match_indices("static") {
        let before = code[..at].chars().next_back();
        let after = code[at + 6..].chars().next();
        let word = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '\'')
            && after.is_some_and(char::is_whitespace);
        if !word {
            continue;
        }
        let rest = code[at + 6..].trim_start();
        let (is_mut, rest) = match rest.strip_prefix("mut ") {
            Some(rest) => (true, rest.trim_start()),
            None => (false, rest),
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let ty = rest[name.len()..].split(['=', ';']).next().unwrap_or("");
        let in_local = local.iter().any(|&(start, end)| start < at && at < end);
        if is_mut || in_local || mutable.iter().any(|m| ty.contains(m)) {
            found.push(name);
        }
    }
    found
}

/// Every source file of `src/`, by module path, before its test module.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src.clone()];
    let mut out = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
                continue;
            }
            let name = path
                .strip_prefix(&src)
                .unwrap()
                .with_extension("")
                .to_string_lossy()
                .replace('/', "::");
            let name = name.strip_suffix("::mod").unwrap_or(&name).to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            out.push((name, code.to_string()));
        }
    }
    out
}

#[test]
fn no_state_is_kept_in_statics_but_the_signal_flags_and_the_help_switch() {
    let mut found = Vec::new();
    for (module, code) in sources() {
        for name in state_statics(&code) {
            if !ALLOWED_STATE.contains(&(module.as_str(), name.as_str())) {
                found.push(format!("{module}::{name}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "state in statics (own it in the shell and hand it over, as run::stderr does):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reading_of_statics_finds_state_and_skips_constants() {
    let code = "static A: AtomicBool = AtomicBool::new(false);\n\
                static mut B: u8 = 0;\n\
                thread_local! {\n    static C: u8 = const { 0 };\n}\n\
                thread_local!(static D: RefCell<u8> = RefCell::new(0));\n\
                static E: &str = \"static F: AtomicU8\";\n\
                fn f(x: &'static str) -> &'static str { x } // static G: Cell<u8>\n\
                pub(crate) static H: [std::sync::atomic::AtomicI32; 2] = [];\n";
    assert_eq!(state_statics(code), ["A", "B", "C", "D", "H"]);
}
