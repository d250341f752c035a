// `retry` starts at C's `main`, not through Rust's runtime start-up: that start-up reads
// /proc/self/maps to place a stack guard and installs SIGSEGV and SIGBUS handlers on an
// alternate stack, all of which `retry` replaces with its own signal handling at once. What of
// it `retry` needs is done below. The arguments still reach `std::env::args_os`: on Linux
// with glibc, the standard library reads them when the program is loaded.
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]

use retry::exit::ExitStatus;
use retry::run::{main_with, signals::die_by};

fn run() -> ! {
    // A bug in retry is retry's own error (status 125), never a status the command could have
    // produced.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("retry: internal error: {info}");
        std::process::exit(ExitStatus::USAGE);
    }));
    let status = main_with(std::env::args_os());
    if let ExitStatus::Reraise(signal) = status {
        die_by(signal);
    }
    // Flushes standard output, as returning from Rust's `main` would.
    std::process::exit(status.code());
}

#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    retry::run::startup::as_rust_would();
    run()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", not(test))))]
fn main() {
    run()
}
