#!/usr/bin/env bash
# Writes src/startup.order: the functions that `retry` runs in its common command lines, the
# ones every run needs first. build.rs gives the file to the linker (LLD's
# --symbol-ordering-file), which then lays those functions out next to each other at the start
# of the program's code. The kernel reads a program in around the pages it touches, so code that
# a run needs, gathered in a few pages instead of spread over all of them, makes every start
# fault in less and keeps less resident (BENCHMARKS.md, "Start-up").
#
#   scripts/startup-order.sh     needs valgrind; takes about a minute after a release build
#
# Run it again after a toolchain or dependency update, or when start-up code changes much: the
# names carry hashes that those change. A name the linker no longer finds is skipped, so a stale
# file costs only speed; this script prints how many of its names the new binary has.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "startup-order.sh needs valgrind" >&2; exit 1; }

# Symbols kept (not stripped) so that callgrind can name the functions; the names are the same
# as in the stripped build.
target=target/startup-order
CARGO_PROFILE_RELEASE_STRIP=false CARGO_TARGET_DIR=$target cargo build --release --locked --quiet --bin retry
bin=$target/release/retry

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The command lines, most common first: their functions are laid out in this order.
runs=(
  "-n 1 -- true"
  "-n 3 -d 1ms -- sh -c exit\\ 3"
  "-n 2 -d 1ms -t 5s -- true"
  "--version"
  "--dry-run -n 5 -d 1s"
  "-n 0 -- true"
)
i=0
for run in "${runs[@]}"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/$i.out" \
    "$bin" $run </dev/null >/dev/null 2>&1 || true
done

# Each function once, in the order first seen; not the addresses of nameless code.
out=src/startup.order
{
  echo "# Written by scripts/startup-order.sh for $(rustc -V); see build.rs."
  for i in $(seq 1 ${#runs[@]}); do
    sed -nE 's/^c?fn=\([0-9]+\) ([^ ]+).*/\1/p' "$work/$i.out" | sed -E "s/'[0-9]+$//"
  done | grep -vE '^(0x|\(below)' | awk '!seen[$0]++'
} >"$out"

names=$(grep -vc '^#' "$out")
found=$(grep -v '^#' "$out" | sort -u | comm -12 - <(nm --defined-only "$bin" | awk '{print $3}' | sort -u) | wc -l)
echo "$out: $names functions, $found of them in $bin"
