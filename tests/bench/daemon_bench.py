#!/usr/bin/env python3
"""Embedded mode against daemon mode (issue 6): the same unmodified perftest pairs on loopback,
once with the device inside each program (`softrdma run`) and once on one softrdmad that both
programs attach to (`softrdma run --daemon`), interleaved per repetition (embedded, daemon,
embedded, ...) so machine drift hits both alike; medians, and the ratio daemon / embedded.

usage: daemon_bench.py SOFTRDMA SOFTRDMAD [--reps N] [--smoke]

Rows: ib_write_bw 64 KiB (MB/s of 10^6 bytes; target: daemon >= 0.9x embedded) and
ib_send_lat 2 B (typical one-way latency in us; target: daemon <= 1.3x embedded). Both ends are
on one daemon, so its packets loop back inside the device; backend_bench.py measures daemons
between two hosts, on the udp and dpdk backends. --smoke: one short repetition of each, to
check that the script still works. Exit status 0 when every figure was measured, 1 otherwise.
"""

import argparse
import os
import re
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shim"))
import program_pairs_test as pairs  # noqa: E402  (Side, start_listening)

PERFTEST_MB = 1 << 20  # perftest's "MB/sec" is MiB/s
ROWS = [
    # name, argv, argv with --smoke, how to read the client's result row, unit, better, target ratio
    ("ib_write_bw 64 KiB", ["ib_write_bw", "-s", "65536", "-D", "3"], ["ib_write_bw", "-s", "65536", "-D", "1"],
     "bw", "MB/s", "higher", 0.9),
    ("ib_send_lat 2 B", ["ib_send_lat", "-s", "2", "-n", "5000"], ["ib_send_lat", "-s", "2", "-n", "200"],
     "lat", "us", "lower", 1.3),
]


def figure(kind, out):
    """The client's figure from perftest's result row: average MB/s, or (latency rows) the
    typical latency, or (bandwidth rows read as rates) the message rate in millions/s."""
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and re.fullmatch(r"\d+", cols[0]) and re.fullmatch(r"\d+", cols[1]):
            if kind == "bw":
                return float(cols[3]) * PERFTEST_MB / 1e6
            return float(cols[4])
    return None


def run_pair(run, argv, kind, work, tag, client_run=None, address="127.0.0.1", client_netns=None):
    """The client's figure for ARGV run by RUN as the server and CLIENT_RUN (default RUN) as the
    client, reaching the server at ADDRESS from the namespace of CLIENT_NETNS (default: here)."""
    server, port = pairs.start_listening(lambda p: run + argv + ["-p", str(p)], work, tag,
                                         time.monotonic() + 60)
    if server is None:
        return None
    client = pairs.Side("client", (client_run or run) + argv + ["-p", str(port), address], work, tag,
                        netns_pid=client_netns)
    client.wait(time.monotonic() + 60)
    server.wait(time.monotonic() + 10)
    out, _ = client.output()
    return figure(kind, out) if client.proc.returncode == 0 else None


def arg_parser(doc):
    """The arguments every daemon benchmark takes."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("softrdma")
    ap.add_argument("softrdmad")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    return ap


def main():
    args = arg_parser(__doc__).parse_args()
    if args.smoke:
        args.reps = 1
    ok = True
    with tempfile.TemporaryDirectory(prefix="softrdma-daemon-bench-") as work:
        sock = os.path.join(work, "softrdmad.sock")
        daemon = pairs.Side("daemon", [args.softrdmad, "--socket", sock], work, "daemon")
        while not os.path.exists(sock) and daemon.alive():
            time.sleep(0.02)
        modes = {"embedded": [args.softrdma, "run", "--"],
                 "daemon": [args.softrdma, "run", f"--daemon={sock}", "--"]}
        print(f"{'row':22} {'embedded':>10} {'daemon':>10} {'ratio':>7} {'target':>8}  met")
        for name, full_argv, smoke_argv, kind, unit, better, target in ROWS:
            argv = smoke_argv if args.smoke else full_argv
            got = {m: [] for m in modes}
            for rep in range(args.reps):
                for mode, run in modes.items():
                    value = run_pair(run, argv, kind, work, f"{mode}.{rep}")
                    if value is not None:
                        got[mode].append(value)
            if not got["embedded"] or not got["daemon"]:
                print(f"{name:22} n/a (a program failed; logs in {work} are gone with it)")
                ok = False
                continue
            emb, dmn = statistics.median(got["embedded"]), statistics.median(got["daemon"])
            ratio = dmn / emb
            met = ratio >= target if better == "higher" else ratio <= target
            sign = ">=" if better == "higher" else "<="
            print(f"{name:22} {emb:10.1f} {dmn:10.1f} {ratio:6.2f}x {sign}{target:5.1f}x  {'yes' if met else 'no'}"
                  f"   ({unit}; {len(got['embedded'])}+{len(got['daemon'])} runs)", flush=True)
        daemon.proc.send_signal(signal.SIGTERM)
        daemon.wait(time.monotonic() + 10)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
