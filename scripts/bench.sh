#!/usr/bin/env bash
# The performance figures of BENCHMARKS.md, measured side by side in one run.
#
#   scripts/bench.sh            runner, stdio, herd, simulate, throttle, stats and json benchmarks
#   scripts/bench.sh --stress   also the reliability stress run (about three minutes)
#
# Debian's `retry` (a C program) is installed for comparison when it is missing and apt-get is
# there. Nothing else is needed: the harnesses time commands themselves. The stdio bench runs a
# sponge (cat > $t; cat $t) beside --buffer-stdout and prints the ratio of the two, at 256 MiB,
# each case after pages were just freed (RETRY_BENCH_PAGES=cold for each after a rest).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y -qq redis-server >/dev/null || echo "(could not install redis-server; the Redis figures are left out)"
fi
if ! /usr/bin/retry --help 2>/dev/null | grep -q -- --until; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq retry >/dev/null || echo "(could not install Debian's retry; going on without it)"
  fi
fi

uname -srm
nproc | sed 's/^/cores: /'
cargo bench --bench runner
RETRY_BENCH_MIB=256 cargo bench --bench stdio
cargo bench --bench herd
cargo bench --bench simulate
cargo bench --bench throttle
cargo bench --bench stats
cargo bench --bench json
if [ "${1:-}" = "--stress" ]; then
  cargo bench --bench stress
fi
