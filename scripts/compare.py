#!/usr/bin/env python3
"""Two builds of retry side by side, interleaved in one run, so that a change's cost is a ratio
measured under the same noise: per-invocation overhead over `true`, peak memory, and 1 GiB
through replay, output matching and --buffer-stdout.

    scripts/compare.py OLD_RETRY NEW_RETRY [--runs 300] [--gib 1]

Build the old one from another checkout (`git worktree add ../old REV && cargo build --release`).
"""

import argparse
import os
import resource
import statistics
import subprocess
import time


def wall(cmd, **kw):
    start = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, **kw)
    return time.perf_counter() - start


def peak_kib(cmd):
    """The largest resident set of `cmd` over 5 runs, as GNU time reports it."""
    best = 0
    for _ in range(5):
        out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        best = max(best, int(out.stderr.strip().splitlines()[-1]))
    return best


def throughput(cmd, size):
    """MB/s of `size` bytes of text (lines of 64 bytes) through `cmd`, pipes on both sides."""
    producer = subprocess.Popen(["head", "-c", str(size)], stdin=subprocess.Popen(
        ["yes", "a" * 63], stdout=subprocess.PIPE).stdout, stdout=subprocess.PIPE)
    start = time.perf_counter()
    consumer = subprocess.Popen(cmd, stdin=producer.stdout, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
    producer.stdout.close()
    total = 0
    while True:
        chunk = consumer.stdout.read(1 << 20)
        if not chunk:
            break
        total += len(chunk)
    consumer.wait()
    producer.wait()
    took = time.perf_counter() - start
    assert total == size, f"{cmd}: {total} bytes of {size}"
    return size / took / 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--gib", type=float, default=1.0)
    a = p.parse_args()
    builds = {"old": a.old, "new": a.new}

    print(f"per invocation, median of {a.runs} interleaved runs:")
    times = {"true": []} | {k: [] for k in builds}
    for _ in range(a.runs):
        times["true"].append(wall(["true"]))
        for k, b in builds.items():
            times[k].append(wall([b, "-n", "1", "--", "true"]))
    base = statistics.median(times["true"])
    for k, v in times.items():
        m = statistics.median(v)
        print(f"  {k:5} {m * 1e6:8.0f} us   overhead over true {(m - base) * 1e6:6.0f} us")
    old = statistics.median(times["old"]) - base
    new = statistics.median(times["new"]) - base
    print(f"  new overhead / old overhead: x{new / old:.2f}")

    print("peak RSS of retry -n 1 -- true (highest of 5):")
    for k, b in builds.items():
        print(f"  {k:5} {peak_kib([b, '-n', '1', '--', 'true'])} KiB")

    size = int(a.gib * (1 << 30))
    print(f"{a.gib:g} GiB through each, pipes in and out, best of 3, interleaved:")
    cases = {
        "cat": lambda b: ["cat"],
        "stdin auto": lambda b: [b, "--", "cat"],
        "stdin replay": lambda b: [b, "--stdin", "replay", "--", "cat"],
        "matching": lambda b: [b, "--stdin", "inherit", "--retry-if-output", "zzz", "--", "cat"],
        "buffer-stdout": lambda b: [b, "--stdin", "inherit", "--buffer-stdout", "--", "cat"],
    }
    best = {}
    for _ in range(3):
        for case, make in cases.items():
            for k, b in builds.items():
                if case == "cat" and k == "new":
                    continue
                key = (case, k)
                best[key] = max(best.get(key, 0), throughput(make(b), size))
    cat = best[("cat", "old")]
    print(f"  cat                 {cat:7.0f} MB/s")
    for case in ["stdin auto", "stdin replay", "matching", "buffer-stdout"]:
        o, n = best[(case, "old")], best[(case, "new")]
        print(f"  {case:14} old {o:7.0f} MB/s ({o / cat:4.0%} of cat)   "
              f"new {n:7.0f} MB/s ({n / cat:4.0%} of cat)   new/old x{n / o:.2f}")


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ.pop("RETRY_RUN_ID", None)
    main()
