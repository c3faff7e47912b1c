#!/usr/bin/env python3
"""Keeps scripts/bench.sh from rotting while it stays out of the test command: its --help, its
one-line usage error, its parsers of every program's output (perftest's bw and lat lines,
ibv_rc_pingpong's usec/iter, udp_pingpong's ping-pong and stream lines), and its --smoke mode
(one tiny repetition of ib_write_bw 64 KiB over softrdma, on srdma0 and with -R on srdmaiw0,
against qperf tcp_bw, and of ib_send_lat and ibv_rc_pingpong 2 B against the busy-polling UDP
ping-pong, alone and with an ACK-sized datagram behind each message, on loopback, and a 2 s
idle device) end to end, within 20 s, with a table, a CSV holding the figures and a PNG.

usage: bench_script_test.py BENCH_SH SOFTRDMA
Exit 77 (ctest's skip) when a program the suite runs is not installed.
"""

import csv
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_suite  # noqa: E402  (its parsers)

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


# What the programs print, as captured from their runs.
PERFTEST_LAT = """\
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]
 2       500          5.70           42.48        6.22     	       7.04        	2.94   		25.79
"""
PERFTEST_BW = """\
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5120             3410.20            3405.61		   0.054490
"""
RC_PINGPONG = """\
  local address:  LID 0x0000, QPN 0x000011, PSN 0x7c430e, GID ::ffff:127.0.0.2
4000 bytes in 0.01 seconds = 2.16 Mbit/sec
1000 iters in 0.01 seconds = 14.84 usec/iter
"""
UDP_PP = ("udp_pingpong mode=busy acked=0 roce_calls=0 size=2 iters=5000 one_way_typical_us=1.43 one_way_avg_us=5.30 rtt_typical_us=2.87 "
          "rtt_avg_us=10.59 rtt_p99_us=3.89 rtt_max_us=8024.14\n")
UDP_STREAM = "udp_pingpong mode=stream size=64 sent=301568 received=301568 lost=0 mb_per_s=19.2 msg_per_s=299536\n"


def check_parsers():
    lat = bench_suite.parse_perftest(PERFTEST_LAT, "ib_send_lat", 2)
    check(lat == {"value": 6.22, "avg": 7.04}, "perftest lat: t_typical and t_avg", str(lat))
    bw = bench_suite.parse_perftest(PERFTEST_BW, "ib_write_bw", 65536)
    check(bw is not None and abs(bw["value"] - 3405.61 * 1.048576) < 0.01 and bw["bytes"] == 65536 * 5120,
          "perftest bw: MiB/s converted to MB/s, bytes moved", str(bw))
    check(bench_suite.parse_perftest(PERFTEST_LAT, "ib_send_lat", 4096) is None, "perftest: another size's line is none")
    rc = bench_suite.parse_rc_pingpong(RC_PINGPONG)
    check(rc == {"value": 14.84}, "ibv_rc_pingpong: usec/iter", str(rc))
    pp = bench_suite.parse_udp_pingpong(UDP_PP)
    check(pp == {"value": 1.43, "avg": 5.30, "rtt": 2.87, "rtt_avg": 10.59}, "udp_pingpong: one way and round trip",
          str(pp))
    st = bench_suite.parse_udp_pingpong(UDP_STREAM)
    check(st == {"value": 19.2, "msg_rate": 299536.0}, "udp_pingpong --stream: MB/s and msg/s", str(st))
    check(bench_suite.parse_udp_pingpong("udp_pingpong: recv: Connection refused\n") is None,
          "udp_pingpong: an error line is no result")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bench, softrdma = argv[1], argv[2]
    check_parsers()

    p = run([bench, "--help"], 10)
    check(p.returncode == 0, "--help exits 0", p.stderr)
    for word in ("usage: scripts/bench.sh", "--smoke", "--full", "--netns", "--reps", "ib_write_bw -q 1, 16, 256",
                 "sockperf", "iperf3", "qperf tcp_bw", "udp_pingpong", "ibv_rc_pingpong -e", "t_avg"):
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
        check(row.get("target") == ">= 1.2x" and row.get("met") in ("met", "NOT met"),
              "results.csv: the issue's target is judged", str(row))
        row = rows.get("ib_write_bw -R 64 KiB on srdmaiw0 (iWARP)", {})
        try:
            ok = float(row.get("ours_median") or "nan") > 0 and float(row.get("baseline_median") or "nan") > 0
        except ValueError:
            ok = False
        check(ok and row.get("target") == ">= 0.8x", "results.csv: the iWARP row has figures and issue 23's target",
              str(row))
        for name, base, target in (
                ("ib_send_lat 2 B", "UDP busy-poll one way 2 B", "<= 1.5x"),
                ("ib_send_lat 2 B t_avg", "its t_typical", "<= 1.5x"),
                ("ibv_rc_pingpong 2 B (round trip, mean)", "UDP busy-poll round trip 2 B", "<= 1.5x"),
                ("ib_send_lat 2 B, ACK floor", "UDP busy-poll one way 2 B + ACK", ""),
                ("ibv_rc_pingpong 2 B (round trip, mean), ACK floor", "UDP busy-poll round trip 2 B + ACK", ""),
                ("ib_read_lat 2 B (round trip), socket-call floor",
                 "UDP busy-poll round trip 2 B in the backend's calls", "")):
            row = rows.get(name, {})
            try:
                ok = float(row.get("ratio") or "nan") > 0
            except ValueError:
                ok = False
            check(ok and row.get("baseline") == base and row.get("target") == target,
                  f"results.csv: {name} against {base}, judged against {target or 'no target'}", str(row))
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
