//! `man/retry.1` and `completions/` are generated from the clap definition and checked in
//! (spec 13). This test fails when they are stale; to regenerate them, run
//!
//!     RETRY_UPDATE_DOCS=1 cargo test --test docs

use std::path::{Path, PathBuf};

use clap_complete::Shell;
use retry::cli::command;

fn generated() -> Vec<(PathBuf, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut man = Vec::new();
    clap_mangen::Man::new(command())
        .render(&mut man)
        .expect("render the man page");
    files.push((root.join("man/retry.1"), man));
    for (shell, name) in [
        (Shell::Bash, "retry.bash"),
        (Shell::Zsh, "_retry"),
        (Shell::Fish, "retry.fish"),
        (Shell::Elvish, "retry.elv"),
        (Shell::PowerShell, "_retry.ps1"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut command(), "retry", &mut out);
        files.push((root.join("completions").join(name), out));
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

#[test]
fn the_man_page_documents_every_option() {
    let man = generated().remove(0).1;
    let man = String::from_utf8(man).unwrap();
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
