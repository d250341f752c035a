//! The default build links `retry` statically on Linux with glibc (`.cargo/config.toml`). This
//! checks that it is, and that what a static glibc makes fragile still works: host names
//! resolve (glibc's getaddrinfo reads nsswitch.conf, /etc/hosts and resolv.conf itself when
//! it cannot load NSS modules), as the fleet quota's Redis host names will need.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::net::ToSocketAddrs;

const RETRY: &str = env!("CARGO_BIN_EXE_retry");

/// The first `len` bytes of the file at `path`.
fn head(path: &str, len: usize) -> Vec<u8> {
    use std::io::Read;
    let file = std::fs::File::open(path).expect("open the binary");
    let mut bytes = Vec::with_capacity(len);
    file.take(len as u64)
        .read_to_end(&mut bytes)
        .expect("read the binary");
    bytes
}

/// An ELF file's header and its table of program headers: the start of the file, not the
/// tens of megabytes of a debug build.
fn elf_head(path: &str) -> Vec<u8> {
    let elf = head(path, 64);
    assert_eq!(&elf[..4], b"\x7fELF", "{path} is not an ELF file");
    assert_eq!(elf[4], 2, "{path} is not a 64-bit ELF file");
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    head(path, phoff + u16_at(0x36) * u16_at(0x38))
}

/// Whether an ELF file asks for a program interpreter (the dynamic loader).
fn has_interpreter(path: &str) -> bool {
    let elf = elf_head(path);
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    (0..count).any(|i| u32_at(phoff + i * size) == PT_INTERP)
}

#[test]
fn retry_is_linked_statically() {
    assert!(
        !has_interpreter(RETRY),
        "{RETRY} needs the dynamic loader: .cargo/config.toml's rustflags were not applied"
    );
    // The same check says yes for a dynamically linked program.
    assert!(has_interpreter("/bin/sh") || std::fs::read("/bin/sh").is_err());
}

#[test]
fn host_names_resolve_in_a_static_build() {
    // This test is built with the same flags as retry, so it runs the same static getaddrinfo.
    assert!(!has_interpreter(
        &std::env::current_exe().unwrap().to_string_lossy()
    ));
    let addresses: Vec<_> = ("localhost", 6379)
        .to_socket_addrs()
        .expect("resolve localhost")
        .collect();
    assert!(
        addresses
            .iter()
            .any(|a| a.ip().is_loopback() && a.port() == 6379),
        "localhost resolved to {addresses:?}"
    );
}

#[test]
fn retry_is_position_independent_so_its_image_is_placed_at_a_random_address() {
    let elf = elf_head(RETRY);
    // e_type: ET_EXEC (2) is linked at a fixed address; ET_DYN (3) with no interpreter is a
    // static PIE, which the kernel places at a random address.
    let e_type = u16::from_le_bytes([elf[16], elf[17]]);
    assert_eq!(
        e_type, 3,
        "{RETRY} is not position-independent (e_type {e_type})"
    );
    assert!(!has_interpreter(RETRY));
}

/// The names of `src/startup.order` as `scripts/link-cc` reads them still name most of the
/// program's functions. The release build lays those out together (docs/startup.md); a file
/// that names none of them would cost a plain run 1.3 MiB of resident memory, and no build
/// would fail. The names carry no hashes, so this build (debug, other hashes) has them too.
#[test]
fn the_start_up_order_names_functions_of_the_program() {
    let root = env!("CARGO_MANIFEST_DIR");
    if !crate::common::have_package(
        "the_start_up_order_names_functions_of_the_program",
        "nm",
        "binutils",
        crate::common::on_path("nm"),
    ) {
        return;
    }
    let link = std::fs::read_to_string(format!("{root}/scripts/link-cc")).unwrap();
    // The script's own expression, so that this checks what the link does.
    let normal = link
        .lines()
        .find_map(|l| l.strip_prefix("normal='")?.strip_suffix('\''))
        .expect("scripts/link-cc sets normal='...'");
    let symbols = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "nm -P --defined-only \"$1\" | awk '{{ print $1 }}' | sed -E '{normal}'"
        ))
        .arg("sh")
        .arg(RETRY)
        .output()
        .unwrap();
    assert!(symbols.status.success(), "nm failed: {symbols:?}");
    let program: std::collections::HashSet<&str> = std::str::from_utf8(&symbols.stdout)
        .unwrap()
        .lines()
        .collect();
    let order = std::fs::read_to_string(format!("{root}/src/startup.order")).unwrap();
    let rust: Vec<&str> = order
        .lines()
        .filter(|l| l.starts_with("_ZN") || l.starts_with("_R"))
        .collect();
    let found = rust.iter().filter(|n| program.contains(*n)).count();
    assert!(
        rust.len() >= 100 && found * 10 >= rust.len() * 7,
        "src/startup.order names {found} of its {} Rust functions as this build has them: write \
         it again with scripts/startup-order.sh (docs/startup.md)",
        rust.len()
    );
}
