#!/usr/bin/env bash
# Why `retry` waits for its tries with its own ppoll loop rather than tokio's process driver,
# measured: a subreaper must reap the orphans its tries leave, with waitpid(-1), and that reaps
# the tries tokio waits for too, whose wait then fails. This builds a small program against
# tokio (from crates.io, in a temporary directory: nothing of it is kept) that does what
# `retry` must do, and prints what tokio then says.
#
#   scripts/tokio-probe.sh      needs cargo and the crates.io registry; about two minutes
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cat >"$work/Cargo.toml" <<'TOML'
[package]
name = "tokio-probe"
version = "0.0.0"
edition = "2021"

[dependencies]
tokio = { version = "1", default-features = false, features = ["rt", "process", "time"] }
libc = "0.2"
TOML
cat >"$work/src/main.rs" <<'RS'
use std::time::{Duration, Instant};

fn main() {
    // As retry does: become the subreaper of what the children leave behind.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // A try that leaves a process behind, as `sh -c 'sleep 1 & exit 3'` does.
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "sleep 0.3 & exit 3"])
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The subreaper's duty: reap whatever ended below it, orphans included.
        let mut reaped = Vec::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(500) {
            let mut status = 0;
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid > 0 {
                reaped.push((pid, libc::WEXITSTATUS(status)));
            } else if pid < 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        println!("waitpid(-1) reaped {} processes: {:?}", reaped.len(), reaped);
        match child.wait().await {
            Ok(status) => println!("tokio's Child::wait: {status}"),
            Err(e) => println!("tokio's Child::wait failed: {e}"),
        }
    });
}
RS
cd "$work"
cargo build --release --quiet 2>&1 | tail -3
./target/release/tokio-probe
RS_TOKIO=$(cargo tree --prefix none 2>/dev/null | grep '^tokio ' | head -1)
echo "($RS_TOKIO)"
