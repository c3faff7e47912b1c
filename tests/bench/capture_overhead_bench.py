#!/usr/bin/env python3
"""What `softrdma run --capture` costs: ib_write_bw 64 KiB on loopback, runs without and with a
capture alternated in one invocation (machine drift hits both alike), and the ratio of the
medians. Target (issue 5): a capture costs at most 25% of throughput, ratio >= 0.75.

usage: capture_overhead_bench.py SOFTRDMA [--runs N] [--iters N] [--sides client|both] [--dir DIR]

--sides: which programs write a capture (default client, the side a person debugging usually
records; 'both' doubles the bytes written). --dir: where the capture files go (default a
temporary folder; each file is deleted after its run). Not part of ctest: a benchmark.
"""

import argparse
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shim"))
import program_pairs_test as pairs  # noqa: E402

SIZE = 65536
ROW = re.compile(rf"^\s*{SIZE}\s+\d+\s+(\S+)\s+(\S+)\s+(\S+)", re.M)  # bytes iters peak avg msgrate


def one_run(softrdma, work, iters, capture_dir, sides, tag):
    pair = pairs.perftest("write_bw", "ib_write_bw", ["-s", str(SIZE)], SIZE, iters)
    opts = {"server": [], "client": []}
    files = []
    if capture_dir is not None:
        for side in (["client"] if sides == "client" else ["server", "client"]):
            path = os.path.join(capture_dir, f"{tag}.{side}.pcap")
            opts[side] = ["--capture", path]
            files.append(path)
    ran = pairs.run_pair(pair, "loop", work, softrdma, tag, server_opts=opts["server"], client_opts=opts["client"])
    if ran is None or not pairs.judge_pair(pair, "loop", *ran):
        sys.exit(1)
    out, _ = ran[1].output()
    bw = float(ROW.search(out).group(2))  # MB/sec average, as perftest prints it
    written = sum(os.path.getsize(f) for f in files if os.path.exists(f))
    for f in files:
        os.remove(f)
    return bw, written


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("softrdma")
    p.add_argument("--runs", type=int, default=5, help="pairs of runs (default 5)")
    p.add_argument("--iters", type=int, default=5000, help="ib_write_bw -n (default 5000: 328 MB a run)")
    p.add_argument("--sides", choices=("client", "both"), default="client")
    p.add_argument("--dir", default=None, help="where capture files go (default: a temporary folder)")
    a = p.parse_args(argv[1:])
    pairs.need_program("ib_write_bw")
    plain, captured = [], []
    with tempfile.TemporaryDirectory(prefix="softrdma-capbench-") as work:
        capture_dir = a.dir or work
        for i in range(a.runs):
            bw, _ = one_run(a.softrdma, work, a.iters, None, a.sides, f"plain{i}")
            plain.append(bw)
            cbw, written = one_run(a.softrdma, work, a.iters, capture_dir, a.sides, f"cap{i}")
            captured.append(cbw)
            print(f"run {i + 1}: without capture {bw:8.1f} MB/s   with capture ({a.sides}, {written / 1e6:.0f} MB "
                  f"written) {cbw:8.1f} MB/s   ratio {cbw / bw:.3f}", flush=True)
            time.sleep(0.2)
    mp, mc = statistics.median(plain), statistics.median(captured)
    ratio = mc / mp
    print(f"\nib_write_bw {SIZE} B x {a.iters}, loopback, capture on {a.sides}: median without {mp:.1f} MB/s, "
          f"with {mc:.1f} MB/s; ratio {ratio:.3f} (target >= 0.75: {'met' if ratio >= 0.75 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
