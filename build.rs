//! Relinks `retry` when the list of the functions every start runs changes: `scripts/link-cc`,
//! the linker of `.cargo/config.toml`, reads `src/startup.order` at each link of the release
//! build (docs/startup.md), a file that Cargo would not otherwise know the program depends on.

fn main() {
    for file in ["src/startup.order", "scripts/link-cc"] {
        // A file named but missing would have the program built again every time.
        if std::path::Path::new(file).exists() {
            println!("cargo::rerun-if-changed={file}");
        }
    }
    println!("cargo::rerun-if-changed=build.rs");
}
