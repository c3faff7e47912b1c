#!/usr/bin/env python3
"""softrdmad's backends between two hosts (issue 6): the same unmodified perftest pairs across
two network namespaces, with the device inside each program (embedded, udp), on one daemon per
host with the udp backend, with the dpdk backend over net_af_packet and over net_af_xdp (each
daemon owning its end of an address-less veth pair), and on two daemons joined by net_memif
(shared memory, no kernel on the data path; both in the server's namespace). Modes are
interleaved per repetition (each mode's daemons started for its turn and stopped after it) so
machine drift hits all alike; medians.

usage: backend_bench.py SOFTRDMA SOFTRDMAD [--reps N] [--smoke] [--modes a,b,...]

Rows: ib_write_bw 64 KiB (MB/s of 10^6 bytes), ib_send_lat, ib_write_lat and ib_read_lat 2 B
(typical latency, us; READ's a round trip) and ib_write_bw 64 B (million messages/s). Each row
gives every mode's figure and its ratio to the row's baseline: embedded for bandwidth and
latency (issue 6: daemon >= 0.9x bandwidth, <= 1.3x latency), the udp daemons for 64 B (af_xdp
must lead them; memif must lead both).
Needs root (af_packet, XDP); it makes its own namespaces (10.77.0.x for the programs' TCP,
10.77.1.x for the dpdk devices) and exits 77 where it cannot. --smoke: one short repetition.
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shim"))
import program_pairs_test as pairs  # noqa: E402
import daemon_bench  # noqa: E402  (arg_parser, run_pair)

MODES = ["embedded", "udp", "afpacket", "afxdp", "memif"]
ROWS = [
    # name, argv, argv with --smoke, figure, unit, better, baseline mode
    ("ib_write_bw 64 KiB", ["ib_write_bw", "-s", "65536", "-D", "3"], ["ib_write_bw", "-s", "65536", "-D", "1"],
     "bw", "MB/s", "higher", "embedded"),
    ("ib_send_lat 2 B", ["ib_send_lat", "-s", "2", "-n", "5000"], ["ib_send_lat", "-s", "2", "-n", "200"],
     "lat", "us", "lower", "embedded"),
    ("ib_write_lat 2 B", ["ib_write_lat", "-s", "2", "-n", "5000"], ["ib_write_lat", "-s", "2", "-n", "200"],
     "lat", "us", "lower", "embedded"),
    ("ib_read_lat 2 B", ["ib_read_lat", "-s", "2", "-n", "5000"], ["ib_read_lat", "-s", "2", "-n", "200"],
     "lat", "us", "lower", "embedded"),
    ("ib_write_bw 64 B", ["ib_write_bw", "-s", "64", "-D", "3"], ["ib_write_bw", "-s", "64", "-D", "1"],
     "rate", "Mmsg/s", "higher", "udp"),
]


class Setup:
    """The daemons of one mode, and how each side's program runs."""

    def __init__(self, mode, softrdma, softrdmad, work, hosts):
        self.mode, self.daemons = mode, []
        b = hosts.holder.pid
        run = [softrdma, "run"]
        if mode == "embedded":
            self.server = run + ["--ip", pairs.NETNS_ADDR[0], "--"]
            self.client, self.client_netns, self.address = run + ["--ip", pairs.NETNS_ADDR[1], "--"], b, pairs.NETNS_ADDR[0]
            return
        if mode == "memif":
            memif = os.path.join(work, "memif.sock")
            opts = [["--backend", "dpdk", "--ip", pairs.DPDK_ADDR[side], "--eal",
                     f"{pairs.EAL_ARGS} --file-prefix=bench{side} --vdev=net_memif0,role={role},socket={memif}"]
                    for side, role in ((0, "server"), (1, "client"))]
            netns = [None, None]
        else:
            opts = [pairs.daemon_options(mode, side) for side in (0, 1)]
            netns = [None, b]
        socks = []
        for side in (0, 1):
            daemon, sock = pairs.start_daemon(softrdmad, work, f"{mode}-{side}", opts[side], netns_pid=netns[side])
            if daemon is None:
                self.stop()
                raise RuntimeError(f"{mode}: softrdmad {side} did not start")
            self.daemons.append(daemon)
            socks.append(sock)
        self.server = run + [f"--daemon={socks[0]}", "--"]
        self.client, self.client_netns = run + [f"--daemon={socks[1]}", "--"], netns[1]
        self.address = pairs.NETNS_ADDR[0]

    def stop(self):
        for d in self.daemons:
            d.proc.send_signal(signal.SIGTERM)
            d.wait(time.monotonic() + 10)


def bench(args, host_netns):
    pairs.inside_own_namespace(host_netns)
    ok = True
    with tempfile.TemporaryDirectory(prefix="softrdma-backend-bench-") as work, pairs.TwoHosts(True) as hosts:
        # One mode's daemons at a time: idle DPDK daemons still poll their ports, and af_xdp's
        # XDP program would take af_packet's frames off the shared veth.
        got = {(row[0], m): [] for row in ROWS for m in args.modes}
        for rep in range(args.reps):
            for mode in args.modes:
                try:
                    setup = Setup(mode, args.softrdma, args.softrdmad, work, hosts)
                except RuntimeError as e:
                    print(f"note: {e}", flush=True)
                    continue
                for name, full_argv, smoke_argv, kind, _, _, _ in ROWS:
                    value = daemon_bench.run_pair(setup.server, smoke_argv if args.smoke else full_argv, kind, work,
                                                  f"{mode}.{rep}", client_run=setup.client, address=setup.address,
                                                  client_netns=setup.client_netns)
                    if value is not None:
                        got[(name, mode)].append(value)
                setup.stop()
        print(f"{'row':20}" + "".join(f"{m:>16}" for m in args.modes))
        for name, _, _, kind, unit, better, baseline in ROWS:
            medians = {m: statistics.median(got[(name, m)]) for m in args.modes if got[(name, m)]}
            ok &= len(medians) == len(args.modes)
            base = medians.get(baseline)
            cells = []
            for m in args.modes:
                if m not in medians:
                    cells.append(f"{'n/a':>16}")
                    continue
                ratio = f" ({medians[m] / base:4.2f}x)" if base else ""
                cells.append(f"{medians[m]:>9.{3 if kind == 'rate' else 1}f}{ratio:>7}")
            print(f"{name:20}" + "".join(cells) + f"   {unit}, {better} is better, ratios to {baseline}", flush=True)
    return 0 if ok else 1


def main():
    ap = daemon_bench.arg_parser(__doc__)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--inside", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in args.modes):
        ap.error(f"--modes takes some of {','.join(MODES)}")
    if args.smoke:
        args.reps = 1
    if args.inside is None:
        inner = pairs.netns_unshare() + [sys.executable, os.path.abspath(__file__), "--inside",
                                         os.readlink("/proc/self/ns/net")] + sys.argv[1:]
        sys.stdout.flush()
        os.execvp(inner[0], inner)
    return bench(args, args.inside)


if __name__ == "__main__":
    sys.exit(main())
