//! The shape of the source: no module imports one that imports it back (directly or through
//! others), and the pure layers (`policy`, `sim`, `store`, `json`, `text`, `duration`) import
//! nothing from the shell above them (`run`, `report`, `cli`, `config`). Read from the source
//! itself: every `crate::` path outside comments and tests, and every `super::` path.

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

/// The paths that follow `prefix` in `code`: `crate::report::log::Log` gives `report::log::Log`.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    code.match_indices(prefix)
        .filter(|(at, _)| {
            !code[..*at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, _)| {
            let rest = &code[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches(':')
        })
        .filter(|path| !path.is_empty())
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
        let mut imported: Vec<String> = paths_after(code, "crate::")
            .into_iter()
            .map(String::from)
            .collect();
        // `use crate::{a::b, c}`: each path of the braces.
        for group in code.split("use crate::{").skip(1) {
            let inner = group.split('}').next().unwrap_or("");
            imported.extend(inner.split(',').map(|p| p.trim().to_string()));
        }
        for path in paths_after(code, "super::") {
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
fn the_pure_layers_import_nothing_from_the_shell() {
    let pure = ["policy", "sim", "store", "json", "text", "duration"];
    let shell = ["run", "report", "cli", "config"];
    let mut upward = Vec::new();
    for (name, deps) in graph() {
        if !pure.contains(&name.split("::").next().unwrap_or("")) {
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
    assert_eq!(paths_after(code, "crate::"), ["report::log::Log"]);
    let graph = graph();
    assert!(
        graph["run::runner"].contains("report::log"),
        "{:?}",
        graph["run::runner"]
    );
    assert!(graph["report::log"].contains("report::human"));
}
