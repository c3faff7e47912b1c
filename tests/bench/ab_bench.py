#!/usr/bin/env python3
"""Two softrdma builds (or one build under two environments) on the suite's latency and
bandwidth rows, interleaved in one invocation (per repetition: A, then B, then the UDP
baselines), so a change is judged by the ratio B/A of medians on a shared machine.

usage: ab_bench.py SOFTRDMA_A SOFTRDMA_B [--reps N] [--rows ROW,...] [--sizes S,...]
                   [--env-a K=V,...] [--env-b K=V,...] [--udp-pingpong PATH] [--out DIR]

ROW is one of ib_send_lat, ib_write_lat, ib_read_lat, rc_pingpong, rc_pingpong_e, ib_write_bw,
ib_read_bw, ib_send_bw (default: the latency rows). Loopback only. Prints, per row and size, A's and B's
medians (t_typical, and t_avg for perftest's latency rows), B/A, and the same-shape UDP
baseline of that run.
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_suite as suite  # noqa: E402

LAT_ROWS = ["ib_send_lat", "ib_write_lat", "ib_read_lat", "rc_pingpong", "rc_pingpong_e"]
# Which UDP baseline each row is judged against, and which of its figures.
BASELINE = {"ib_send_lat": ("busy", "value"), "ib_write_lat": ("sleep", "value"), "ib_read_lat": ("busy", "rtt"),
            "rc_pingpong": ("busy", "rtt"), "rc_pingpong_e": ("sleep", "rtt")}


def run_row(runner, path, row, size):
    if row.startswith("rc_pingpong"):
        return suite.rc_pingpong(runner, path, size, row.endswith("_e"))
    if row.endswith("_bw"):
        return suite.perftest(runner, path, row, size, suite.bw_iters(size, False))
    return suite.perftest(runner, path, row, size, suite.LAT_ITERS)


class EnvRunner(suite.Runner):
    """The suite's Runner with extra environment variables for every program it starts."""

    def __init__(self, softrdma, outdir, udp_pp, env):
        super().__init__(softrdma, outdir, udp_pp)
        self.env = env

    def pair(self, path, tag, server_argv, client_argv, udp=False):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            return super().pair(path, tag, server_argv, client_argv, udp)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def med(runs, field="value"):
    values = [r[field] for r in runs if r is not None and r.get(field) is not None]
    return statistics.median(values) if values else None


def env_arg(text):
    return dict(kv.split("=", 1) for kv in text.split(",") if kv) if text else {}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("softrdma_a")
    p.add_argument("softrdma_b")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rows", default=",".join(LAT_ROWS))
    p.add_argument("--sizes", default="2")
    p.add_argument("--env-a", default="")
    p.add_argument("--env-b", default="")
    p.add_argument("--udp-pingpong")
    p.add_argument("--out")
    a = p.parse_args(argv[1:])
    udp_pp = a.udp_pingpong or os.path.join(os.path.dirname(os.path.abspath(a.softrdma_b)), "..", "..", "tests",
                                            "bench", "udp_pingpong")
    out = a.out or tempfile.mkdtemp(prefix="softrdma-ab-")
    runners = {"A": EnvRunner(a.softrdma_a, os.path.join(out, "A"), udp_pp, env_arg(a.env_a)),
               "B": EnvRunner(a.softrdma_b, os.path.join(out, "B"), udp_pp, env_arg(a.env_b))}
    path = suite.Path("loop")
    rows = a.rows.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    results = {}
    for rep in range(a.reps):
        for size in sizes:
            for row in rows:
                for side in ("A", "B"):
                    results.setdefault((side, row, size), []).append(run_row(runners[side], path, row, size))
            for mode in {BASELINE[r][0] for r in rows if r in BASELINE}:
                results.setdefault(("udp", mode, size), []).append(suite.udp_pingpong(runners["A"], path, mode, size))
        print(f"ab: repetition {rep + 1} of {a.reps} done", file=sys.stderr, flush=True)
    f = suite.fmt
    print(f"{'row':<16} {'size':>6} {'A':>8} {'B':>8} {'B/A':>6}  {'A t_avg':>8} {'B t_avg':>8}  {'UDP':>7} "
          f"{'A/UDP':>6} {'B/UDP':>6}")
    for size in sizes:
        for row in rows:
            ra, rb = results[("A", row, size)], results[("B", row, size)]
            ma, mb = med(ra), med(rb)
            ratio = f"{mb / ma:.2f}" if ma and mb else "n/a"
            base = None
            if row in BASELINE:
                base = med(results.get(("udp", BASELINE[row][0], size), []), BASELINE[row][1])
            print(f"{row:<16} {size:>6} {f(ma):>8} {f(mb):>8} {ratio:>6}  {f(med(ra, 'avg')):>8} {f(med(rb, 'avg')):>8}  "
                  f"{f(base):>7} {(f'{ma / base:.2f}' if ma and base else ''):>6} "
                  f"{(f'{mb / base:.2f}' if mb and base else ''):>6}")
            print(f"{'':<16} {'':>6} runs A: {' '.join(f(r['value']) if r else 'n/a' for r in ra)}; "
                  f"B: {' '.join(f(r['value']) if r else 'n/a' for r in rb)}")
    print(f"logs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
