#!/usr/bin/env bash
# Writes src/startup.order: the functions that `retry` runs in its common command lines, the
# ones every run needs first. build.rs gives the file to the linker (LLD's
# --symbol-ordering-file), which then lays those functions out next to each other at the start
# of the program's code. The kernel reads a program in around the pages it touches, so code that
# a run needs, gathered in a few pages instead of spread over all of them, makes every start
# fault in less and keeps less resident (BENCHMARKS.md, "Start-up").
#
#   scripts/startup-order.sh     needs valgrind and python3; about a minute after a release build
#
# Run it again after a toolchain or dependency update, or when start-up code changes much: the
# names carry hashes that those change. A name the linker no longer finds is skipped, so a stale
# file costs only speed (`cargo bench --bench runner` shows the peak memory it leads to).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "startup-order.sh needs valgrind" >&2; exit 1; }

# The release build itself, as `cargo build --release` makes it: its symbols are stripped, so
# the linker's map names its functions. (A build that kept them would name them differently:
# the names carry a hash of the build's settings.)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
RETRY_LINK_MAP="$work/retry.map" cargo build --release --locked --quiet --bin retry
bin=target/release/retry
test -s "$work/retry.map" || { echo "the linker wrote no map: is it LLD? (see build.rs)" >&2; exit 1; }

# The command lines, most common first: their functions are laid out in this order. Each with
# the status it must end with: a run that fails early would list only the functions up to its
# error.
runs=(
  "0 -n 1 -- true"
  "1 -n 3 -d 1ms -- false"
  "0 -n 2 -d 1ms -t 5s -- true"
  "0 --version"
  "0 --dry-run -n 5 -d 1s"
  "0 -n 0 -- true"
)
i=0
for run in "${runs[@]}"; do
  i=$((i + 1))
  want=${run%% *}
  # Standard output and error are pipes, as under a CI runner or `| tee`: retry takes another
  # path for a pipe than for /dev/null. Each process gets its own profile (%p): the child of a
  # vfork runs retry's code until its exec.
  set +e
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --log-file="$work/$i.vg" \
    --callgrind-out-file="$work/$i.%p.out" "$bin" ${run#* } </dev/null 2>&1 | cat >"$work/$i.err"
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" != "$want" ]; then
    echo "retry ${run#* } ended with $status under valgrind, not $want:" >&2
    cat "$work/$i.err" >&2
    exit 1
  fi
done

# callgrind names code in a stripped program by address; the map says which function holds
# each. Each function once, in the order first seen. Then the other versions of the string
# functions that glibc picks by CPU at start: valgrind's CPU is not the one the program will run
# on. They come last, so that only the one picked is read in.
python3 - "$work" ${#runs[@]} "$(rustc -V)" >src/startup.order <<'EOF'
import bisect, glob, re, sys

work, runs, rustc = sys.argv[1], int(sys.argv[2]), sys.argv[3]
symbols = []
for line in open(f"{work}/retry.map"):
    f = line.split()
    # "VMA LMA Size Align Symbol": a symbol line, not an output or input section.
    if len(f) == 5 and not f[4].startswith(".") and ":(" not in f[4]:
        symbols.append((int(f[0], 16), f[4]))
symbols.sort()
starts = [a for a, _ in symbols]

seen = {}
for i in range(1, runs + 1):
    for path in sorted(glob.glob(f"{work}/{i}.*.out")):
        for line in open(path):
            m = re.match(r"c?fn=\(\d+\) 0x([0-9a-f]+)", line)
            if m:
                k = bisect.bisect_right(starts, int(m.group(1), 16)) - 1
                if k >= 0:
                    seen.setdefault(symbols[k][1], None)
family = re.compile(r"^(__[a-z0-9]+)_(sse|ssse|avx|evex|erms)")
families = {m.group(1) for m in map(family.match, seen) if m}
others = sorted({n for _, n in symbols if (m := family.match(n)) and m.group(1) in families} - set(seen))

print(f"# Written by scripts/startup-order.sh for {rustc}; see build.rs.")
print("\n".join(list(seen) + others))
EOF

# Then what valgrind cannot show: where the program, run for real on this CPU, first touches
# each 64 KiB of its code (perf's page-fault samples). A function found there is added and the
# program linked again, until no fault of these runs falls outside the ordered code.
if command -v perf >/dev/null; then
  for round in 1 2 3 4 5; do
    RETRY_LINK_MAP="$work/retry.map" cargo build --release --locked --quiet --bin retry
    : >"$work/faults"
    for run in "${runs[@]}"; do
      # Output to pipes, to /dev/null, and standard error alone to a pipe (as under a harness
      # that reads the log): each takes its own path.
      for output in pipes null log; do
        set -- perf record -q -e page-faults -c 1 -d -o "$work/perf.data" -- "$bin"
        # shellcheck disable=SC2086
        case $output in
          pipes) "$@" ${run#* } </dev/null 2>&1 | cat >/dev/null || true ;;
          null) "$@" ${run#* } </dev/null >/dev/null 2>&1 || true ;;
          log) "$@" ${run#* } </dev/null 2>&1 >/dev/null | cat >/dev/null || true ;;
        esac
        perf script -i "$work/perf.data" -F comm,ip,addr 2>/dev/null | awk '$1 == "retry" { print $2, $3 }' >>"$work/faults"
      done
    done
    added=$(python3 - "$work" <<'EOF'
import bisect, sys

work = sys.argv[1]
symbols, text = [], None
for line in open(f"{work}/retry.map"):
    f = line.split()
    if len(f) == 5 and f[4] == ".text":
        text = (int(f[0], 16), int(f[0], 16) + int(f[2], 16))
    elif len(f) == 5 and not f[4].startswith(".") and ":(" not in f[4]:
        symbols.append((int(f[0], 16), f[4]))
symbols.sort()
starts = [a for a, _ in symbols]
order = [l.rstrip("\n") for l in open("src/startup.order")]
known = set(order)
new = []
for line in open(f"{work}/faults"):
    addr, ip = (int(x, 16) for x in line.split())
    if text and text[0] <= addr < text[1]:
        name = symbols[bisect.bisect_right(starts, ip) - 1][1]
        if name not in known:
            known.add(name)
            new.append(name)
open("src/startup.order", "w").write("\n".join(order + new) + "\n")
print(len(new))
EOF
)
    echo "round $round: $added functions added from page faults"
    [ "$added" = 0 ] && break
  done
fi

names=$(grep -vc '^#' src/startup.order)
echo "src/startup.order: $names functions"
