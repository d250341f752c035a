//! The end-to-end tests whose longest cases wait on real timers for seconds (a countdown, a
//! `Retry-After`, a budget checked again after a hook, a grace period): one test binary, so
//! that those waits overlap, since `cargo test` runs its test binaries one after another.
//! Each concern keeps its own file.

#[path = "../common/mod.rs"]
mod common;

mod ci_lines;
mod cut;
mod edges;
mod hooks_ci;
mod pushback;
mod terminal;
