#!/usr/bin/env bash
# Admission control on one machine (docs/herd.md#admission-control): 40 runs at once of
# `-n 3 -d 50ms --stagger 4s --quota q --throttle 2` against a command that always fails,
# sharing one local store, over SEEDS rounds (20 unless given): how many times the command ran
# in each round, then the least, the median and the most. BENCHMARKS.md has the figures.
#
#     scripts/throttle-local.sh [SEEDS] [RETRY]
set -euo pipefail
seeds=${1:-20}
retry=${2:-target/release/retry}
counts=()
for s in $(seq 1 "$seeds"); do
  dir=$(mktemp -d)
  chmod 700 "$dir"
  for k in $(seq 1 40); do
    XDG_RUNTIME_DIR=$dir "$retry" -n 3 -d 50ms --stagger 4s --quota q --throttle 2 \
      --seed $((s * 1000 + k)) -- sh -c "echo x >> '$dir/ran'; exit 1" 2>/dev/null &
  done
  wait
  n=$(wc -l < "$dir/ran")
  counts+=("$n")
  echo "round $s: the command ran $n times"
  rm -rf "$dir"
done
sorted=$(printf '%s\n' "${counts[@]}" | sort -n)
least=$(echo "$sorted" | head -1)
most=$(echo "$sorted" | tail -1)
median=$(echo "$sorted" | sed -n "$(( (seeds + 1) / 2 ))p")
echo "$seeds rounds of 40 runs: the command ran $least to $most times, $median at the median (the quota alone: about 60; nothing: 120)"
