//! Lays out the code that every start of `retry` runs together, at the front of the program.
//!
//! `src/startup.order` lists those functions (scripts/startup-order.sh writes it). Where the
//! program is linked by LLD, the linker is given that list: the kernel reads a program in by the
//! 64 KiB around each page it touches, so start-up code gathered in a few pages, instead of
//! spread over the whole program, is read in and kept resident far less (BENCHMARKS.md,
//! "Start-up"). Nothing else changes: a name the linker does not find is skipped, quietly.
//!
//! Other linkers do not know the option, so it is given only where LLD is known to link:
//! Rust 1.90 and later link x86_64-unknown-linux-gnu programs with LLD unless a linker is chosen
//! by flags. Debug builds are left alone.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=src/startup.order");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=RETRY_LINK_MAP");
    let order = std::path::Path::new(&env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("src/startup.order");
    // A comma would split the argument where the compiler driver hands it to the linker.
    let usable = order.is_file() && !order.to_string_lossy().contains(',');
    if links_with_lld() && env::var("PROFILE").as_deref() == Ok("release") && usable {
        let order = order.display();
        println!("cargo::rustc-link-arg-bin=retry=-Wl,--symbol-ordering-file={order}");
        println!("cargo::rustc-link-arg-bin=retry=-Wl,--no-warn-symbol-ordering");
        // scripts/startup-order.sh names the functions of the program as built, symbols
        // stripped, from the linker's map: a build that kept them would name its functions
        // differently, as the names carry a hash of the build's settings.
        if let Some(map) = env::var_os("RETRY_LINK_MAP") {
            let map = std::path::PathBuf::from(map);
            println!("cargo::rustc-link-arg-bin=retry=-Wl,-Map={}", map.display());
            // The names as the ordering file takes them.
            println!("cargo::rustc-link-arg-bin=retry=-Wl,--no-demangle");
        }
    }
}

fn links_with_lld() -> bool {
    if env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return false;
    }
    // A linker chosen by the environment or by flags may not be LLD.
    if env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some()
        || env::var_os("RUSTC_LINKER").is_some()
    {
        return false;
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if ["linker", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|chosen| flags.contains(chosen))
    {
        return false;
    }
    rustc_minor().is_some_and(|minor| minor >= 90)
}

/// The minor version of the compiler that builds `retry` (1.x).
fn rustc_minor() -> Option<u32> {
    let rustc = env::var_os("RUSTC")?;
    let out = Command::new(rustc).arg("-V").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
