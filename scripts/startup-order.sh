#!/usr/bin/env bash
# Writes src/startup.order: the functions that `retry` runs in its common command lines, the
# ones every run needs first, in the order first seen. scripts/link-cc gives the file to the linker
# of the release build, which lays those functions out together at the front of the program's
# code (docs/startup.md).
#
#   scripts/startup-order.sh     needs valgrind and python3; a few minutes
#
# The names carry no hashes (scripts/link-cc matches them to the program's symbols), so the file
# stays good across dependency updates and changes of code elsewhere; run this again when the
# code a plain run goes through changes much (`cargo bench --bench runner` and BENCHMARKS.md
# show the peak memory it leads to).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "startup-order.sh needs valgrind" >&2; exit 1; }

# A release build that keeps its symbols, so that valgrind names the functions it runs.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CARGO_PROFILE_RELEASE_STRIP=false cargo build --release --locked --quiet --bin retry \
  --target-dir target/startup-order
bin=target/startup-order/release/retry

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
  for output in pipes null; do
    set +e
    # Standard output and error are pipes, as under a CI runner or `| tee`, or /dev/null, as
    # under cron: retry takes another path for each.
    # shellcheck disable=SC2086
    case $output in
      pipes) valgrind --tool=callgrind --demangle=no --log-file="$work/$i.vg" \
        --callgrind-out-file="$work/$i.$output.%p.out" "$bin" ${run#* } </dev/null 2>&1 | cat >"$work/$i.err"
        status=${PIPESTATUS[0]} ;;
      null) valgrind --tool=callgrind --demangle=no --log-file="$work/$i.vg" \
        --callgrind-out-file="$work/$i.$output.%p.out" "$bin" ${run#* } </dev/null >/dev/null 2>&1
        status=$? ;;
    esac
    set -e
    if [ "$status" != "$want" ]; then
      echo "retry ${run#* } ended with $status under valgrind, not $want" >&2
      exit 1
    fi
  done
done

# Each function once, in the order first seen, its name without hashes (as scripts/link-cc reads
# it). Then the other versions of the string functions that glibc picks by CPU at start:
# valgrind's CPU is not the one the program will run on. They come last, so that only the one
# picked is read in.
python3 - "$work" ${#runs[@]} "$(rustc -V)" "$bin" >src/startup.order <<'PY'
import glob, re, subprocess, sys

work, runs, rustc, binary = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def normal(name):
    name = re.sub(r"17h[0-9a-f]{16}E$", "E", name)
    return re.sub(r"Cs[0-9A-Za-z]+_([0-9])", r"Cs_\1", name)

seen = {}
for i in range(1, runs + 1):
    for output in ("pipes", "null"):
        for line in (l for p in sorted(glob.glob(f"{work}/{i}.{output}.*.out")) for l in open(p)):
            m = re.match(r"c?fn=\(\d+\) (\S+)$", line)
            if m and not m.group(1).startswith("0x"):
                seen.setdefault(normal(m.group(1)), None)
symbols = subprocess.run(["nm", "-P", "--defined-only", binary], capture_output=True, text=True,
                         check=True).stdout.split("\n")
names = {line.split()[0] for line in symbols if line.strip()}
family = re.compile(r"^(__[a-z0-9]+)_(sse|ssse|avx|evex|erms)")
families = {m.group(1) for m in map(family.match, seen) if m}
others = sorted({n for n in names if (m := family.match(n)) and m.group(1) in families} - set(seen))

print(f"# Written by scripts/startup-order.sh with {rustc}; read by scripts/link-cc.")
print("\n".join(list(seen) + others))
PY
# Then what valgrind cannot show: where the program, run for real, first touches each 64 KiB of
# its code (perf's page-fault samples): glibc's functions that valgrind names by another symbol
# at the same address, and what the child of posix_spawn runs before its exec. A function
# found there is added and the program linked again, until no fault of these runs falls
# outside the ordered code.
if command -v perf >/dev/null; then
  for round in 1 2 3 4 5; do
    CARGO_PROFILE_RELEASE_STRIP=false cargo build --release --locked --quiet --bin retry \
      --target-dir target/startup-order
    : >"$work/faults"
    for run in "${runs[@]}"; do
      for output in pipes null; do
        set -- perf record -q -e page-faults -c 1 -d -o "$work/perf.data" -- "$bin"
        # shellcheck disable=SC2086
        case $output in
          pipes) "$@" ${run#* } </dev/null 2>&1 | cat >/dev/null || true ;;
          null) "$@" ${run#* } </dev/null >/dev/null 2>&1 || true ;;
        esac
        base=$(perf script -i "$work/perf.data" --show-mmap-events 2>/dev/null |
          awk '/PERF_RECORD_MMAP2/ && $NF ~ /\/retry$/ && match($0, /\[0x[0-9a-f]+/) { print substr($0, RSTART + 1, RLENGTH - 1); exit }' || true)
        perf script -i "$work/perf.data" -F comm,addr 2>/dev/null |
          awk -v base="$base" '$1 == "retry" { print $2, base }' >>"$work/faults" || true
      done
    done
    added=$(python3 - "$bin" "$work/faults" <<'PY'
import bisect, re, subprocess, sys

binary, faults = sys.argv[1], sys.argv[2]
def normal(name):
    name = re.sub(r"17h[0-9a-f]{16}E$", "E", name)
    return re.sub(r"Cs[0-9A-Za-z]+_([0-9])", r"Cs_\1", name)
symbols = []
for line in subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True,
                           text=True, check=True).stdout.splitlines():
    f = line.split()
    if len(f) == 3 and f[1] in "tTwW" and f[1] != "i":
        symbols.append((int(f[0], 16), f[2]))
starts = [a for a, _ in symbols]
heads = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True).stdout
text = None
for f in map(str.split, heads.splitlines()):
    if f[:1] == ["LOAD"] and "E" in f[6:-1]:
        text = (int(f[2], 16), int(f[2], 16) + int(f[5], 16))
order = [l.rstrip("\n") for l in open("src/startup.order")]
known = set(order)
new = []
for line in open(faults):
    try:
        addr, base = (int(x, 16) for x in line.split())
    except ValueError:
        continue
    at = addr - base
    if not text[0] <= at < text[1]:
        continue
    name = normal(symbols[bisect.bisect_right(starts, at) - 1][1])
    if name not in known:
        known.add(name)
        new.append(name)
open("src/startup.order", "w").write("\n".join(order + new) + "\n")
print(len(new))
PY
)
    echo "round $round: $added functions added" >&2
    [ "$added" = 0 ] && break
  done
fi
echo "src/startup.order: $(grep -vc '^#' src/startup.order) functions" >&2
