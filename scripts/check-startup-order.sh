#!/usr/bin/env bash
# Fails when src/startup.order has gone stale: when too many of the functions it names are no
# longer in the program (code moved or renamed, a toolchain or dependency update changed their
# hashes). The linker skips such names quietly, so a stale file would only cost start-up time
# and memory, unseen; CI runs this check so that it is seen.
#
#   scripts/check-startup-order.sh [MAP]    the linker's map of a release build (see build.rs);
#                                           without one, a release build is made to get it
#
# At least RETRY_ORDER_MIN percent (default 90) of the names must be found.
set -euo pipefail
cd "$(dirname "$0")/.."

order=src/startup.order
min=${RETRY_ORDER_MIN:-90}
map=${1:-}
if [ -z "$map" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  map="$work/retry.map"
  # The same build as `cargo build --release`: the map only names what the linker placed.
  RETRY_LINK_MAP="$map" cargo build --release --locked --quiet --bin retry
fi
if [ ! -s "$map" ]; then
  echo "check-startup-order: no linker map at $map: the release build is not linked by LLD here (see build.rs); nothing to check"
  exit 0
fi

python3 - "$order" "$map" "$min" <<'PY'
import sys
order, map_path, least = sys.argv[1], sys.argv[2], float(sys.argv[3])
names = [l.strip() for l in open(order) if l.strip() and not l.startswith("#")]
symbols = set()
for line in open(map_path, errors="replace"):
    f = line.split()
    if len(f) == 5:
        symbols.add(f[4])
found = sum(1 for n in names if n in symbols)
share = 100.0 * found / max(len(names), 1)
print(f"{order}: {found} of {len(names)} names are in the program ({share:.0f}%)")
if share < least:
    missing = [n for n in names if n not in symbols][:5]
    print(f"{order} is stale: fewer than {least:.0f}% of its names are found "
          f"(first missing: {', '.join(missing)}).", file=sys.stderr)
    print("Regenerate it with scripts/startup-order.sh (needs valgrind and perf; about 6 minutes) "
          "and commit it.", file=sys.stderr)
    sys.exit(1)
PY
