#!/usr/bin/env python3
"""Keeps scripts/bench.sh from rotting while it stays out of the test command: its --help, its
one-line usage error, and its --smoke mode (one tiny repetition of ib_write_bw 64 KiB over
softrdma against qperf tcp_bw on loopback, and a 2 s idle device) end to end, within 20 s,
with a table, a CSV holding both figures and a PNG plot.

usage: bench_script_test.py BENCH_SH SOFTRDMA
Exit 77 (ctest's skip) when a program the suite runs is not installed.
"""

import csv
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
SMOKE_BUDGET = 20  # seconds, the brief's bound on --smoke

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + detail.strip().replace("\n", "\n     "), flush=True)


def run(argv, timeout):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bench, softrdma = argv[1], argv[2]

    p = run([bench, "--help"], 10)
    check(p.returncode == 0, "--help exits 0", p.stderr)
    for word in ("usage: scripts/bench.sh", "--smoke", "--full", "--netns", "--reps", "ib_write_bw -q 1, 16, 256",
                 "sockperf", "iperf3", "qperf tcp_bw"):
        check(word in p.stdout, f"--help mentions {word!r}")

    p = run([bench, "--no-such-option"], 10)
    check(p.returncode == 2, "an unknown option exits 2", f"exit {p.returncode}")
    check(p.stderr.count("\n") == 1 and "no-such-option" in p.stderr, "with one line naming it", p.stderr)

    with tempfile.TemporaryDirectory(prefix="softrdma-bench-smoke-") as out:
        started = time.monotonic()
        p = run([bench, "--smoke", "--softrdma", softrdma, "--out", out], 60)
        took = time.monotonic() - started
        if p.returncode == 2 and "is not installed" in p.stderr:
            print(f"SKIPPED: {p.stderr.strip()}")
            return SKIP
        check(p.returncode == 0, "--smoke exits 0", f"exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        check(took < SMOKE_BUDGET, f"--smoke takes less than {SMOKE_BUDGET} s", f"{took:.1f} s")
        check("ib_write_bw 64 KiB" in p.stdout and "qperf tcp_bw" in p.stdout, "the table names the row and its baseline",
              p.stdout)
        check("load average (1 min) at start:" in p.stdout and "at end:" in p.stdout, "the load average is recorded")
        try:
            with open(os.path.join(out, "results.csv")) as f:
                rows = {r["row"]: r for r in csv.DictReader(f)}
        except OSError as e:
            rows = {}
            check(False, "results.csv is written", str(e))
        row = rows.get("ib_write_bw 64 KiB", {})
        for field in ("ours_median", "baseline_median", "ratio"):
            try:
                ok = float(row.get(field) or "nan") > 0
            except ValueError:
                ok = False
            check(ok, f"results.csv: ib_write_bw 64 KiB has a positive {field}", str(row))
        check(row.get("target") == ">= 1x" and row.get("met") in ("met", "NOT met"),
              "results.csv: the issue's target is judged", str(row))
        idle = rows.get("idle device VmRSS", {})
        check(float(idle.get("ours_median") or 0) > 0, "results.csv: the idle device's VmRSS is measured", str(idle))
        png = os.path.join(out, "bench.png")
        with open(png, "rb") if os.path.exists(png) else open(os.devnull, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "bench.png is a PNG")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
