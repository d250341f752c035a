#!/usr/bin/env python3
"""Start-up of several builds of retry side by side, interleaved in one run with `true` and
Debian's `retry`: the overhead of `retry -n 1 -- true` over `true`, as a ratio to Debian's, and
the peak RSS (highest of 5 runs under GNU time). Run copies of the builds (`cp`), as installed.

    scripts/startup-compare.py NAME=PATH [NAME=PATH ...] [--rounds 400]
"""

import argparse
import statistics
import subprocess
import time


def wall(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("builds", nargs="+", help="NAME=PATH")
    p.add_argument("--rounds", type=int, default=400)
    a = p.parse_args()
    builds = dict(b.split("=", 1) for b in a.builds)
    cmds = {"true": ["true"], "debian": ["/usr/bin/retry", "-t", "1", "true"]}
    cmds |= {k: [v, "-n", "1", "--", "true"] for k, v in builds.items()}
    times = {k: [] for k in cmds}
    for _ in range(a.rounds):
        for k, c in cmds.items():
            times[k].append(wall(c))
    base = statistics.median(times["true"])
    debian = statistics.median(times["debian"]) - base
    for k in cmds:
        m = statistics.median(times[k]) - base
        print(f"{k:8} overhead {m * 1e6:7.0f} us   x{m / debian:.2f} of Debian's")
    for k, b in builds.items():
        peak = max(int(subprocess.run(["/usr/bin/time", "-f", "%M", b, "-n", "1", "--", "true"],
                                      capture_output=True, text=True).stderr.split()[-1])
                   for _ in range(5))
        print(f"{k:8} peak RSS {peak} KiB")


if __name__ == "__main__":
    main()
