#!/usr/bin/env python3
"""The benchmark suite's runner (issue 7), called by scripts/bench.sh: unmodified perftest over
softrdma against the kernel's TCP/UDP baselines on the same path, interleaved (per repetition:
ours, then the baseline, then ours...) so machine drift hits both sides alike; medians.

usage: bench_suite.py SOFTRDMA OUTDIR [--reps N] [--full | --smoke] [--paths loop[,veth]]
                      [--netns A B --addrs ADDR_A ADDR_B] [--idle-seconds S] [--udp-pingpong PATH]
                      [--only WORD]

SOFTRDMA is the `softrdma` executable; PATH the project's udp_pingpong (tests/bench), the
baseline of the same shape as each latency row (default: beside SOFTRDMA's build); OUTDIR receives results.csv, table.txt, the plot's data
files (bw_PATH.dat, lat_PATH.dat) and logs/ (every program's stdout and stderr). The veth path
runs servers in network namespace A and clients in namespace B, which scripts/bench.sh creates
(and removes) with ADDR_A and ADDR_B on the two ends of a veth.

Units: bandwidth in MB/s of 10^6 bytes (perftest prints MiB/s: converted), latency in
microseconds, one way for SEND/WRITE and the UDP/TCP ping-pongs, a full round trip for READ
(perftest reports READ latency as the round trip) and for ibv_rc_pingpong's usec/iter.

Baselines of the same shape (docs/benchmarks.md): a row whose application busy-polls its CQ
(ib_send_lat, ib_read_lat, ibv_rc_pingpong) against udp_pingpong --mode busy; a row where only
the device's own thread can receive (ib_write_lat spins on memory, ibv_rc_pingpong -e sleeps on
a completion channel) against udp_pingpong --mode sleep. sockperf and qperf stay as second
references. Each latency row also gives t_avg against its own t_typical (a tail of stalls).
The iWARP row runs ib_write_bw -R on srdmaiw0 (RDMAP over the kernel's TCP) against qperf
tcp_bw, both 64 KiB, on the same path.
"""

import argparse
import csv
import ctypes
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shim"))
import program_pairs_test as pairs  # noqa: E402  (listens)

PERFTEST_MB = 1 << 20  # perftest's "MB/sec" is MiB/s
RUN_TIMEOUT = 60  # seconds for one program pair
LISTEN_TIMEOUT = 20
DEFAULT_BW_SIZES = [2, 64, 1024, 4096, 65536, 1 << 20]
FULL_BW_SIZES = [1 << k for k in range(1, 21)]  # 2 B .. 1 MiB
LAT_SIZES = [2, 4096, 65536]
QP_COUNTS = [1, 16, 256]
IPERF3_MAX_STREAMS = 128  # iperf3 -P accepts at most 128
SOCKPERF_MIN, UDP_MAX = 14, 65507  # sockperf's smallest message; the largest UDP payload on IPv4
CPU_SIZE, CPU_SHORT_ITERS, CPU_LONG_ITERS = 65536, 50, 4000
# Latency iterations: 500 give a stable median, and ib_write_lat over softrdma takes milliseconds
# per iteration on a loaded 2-core machine (both programs spin on memory and the device's
# progress thread waits for a core), which would otherwise dominate the suite's time.
LAT_ITERS = 500
UDP_PP_ITERS = 5000  # udp_pingpong's round trips: 3-50 us each on loopback
PINGPONG_SIZES = [2, 4096]  # ibv_rc_pingpong's rows
PINGPONG_ITERS = 1000  # its default
STREAM_SIZES = [64, 65536]  # udp_pingpong --stream beside the bandwidth rows
# udp_pingpong --roce-calls sends with DF, as the backend does, and a veth refuses a datagram
# above its MTU; the backend never sends one (it cuts messages at the path MTU), so the floor of
# its calls is measured only for messages that are one packet on any path.
ROCE_CALLS_MAX = 1024
# The issue's targets (issue 26's acceptance list).
LAT_TARGET = ("ratio", "<=", 1.5)  # every latency row against its same-shape baseline, and t_avg/t_typical
BUSY_TARGET_SIZES = (2, 4096)  # ib_send_lat, ib_read_lat and ibv_rc_pingpong
BW_TARGETS = {("ib_write_bw", 65536): ("ratio", ">=", 1.2), ("ib_read_bw", 65536): ("ratio", ">=", 1.0)}
IWARP_SIZE = 65536
IWARP_TARGET = ("ratio", ">=", 0.8)  # issue 23: iWARP adds framing and CRC to TCP's own copies
IWARP_LOOP_ADDRS = ("127.83.98.1", "127.83.98.2")  # on loopback each side binds its own
# perftest -R's server listens on its port twice, for its exchange of parameters and then for
# the RDMA CM; a client that connects between the two is refused (RDMA_CM_EVENT_REJECTED), and
# perftest's retry then reuses the IDs it has just destroyed. Such a pair is run again.
IWARP_PAIR_TRIES = 5

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: nothing outlives the suite


# ---------------------------------------------------------------------------------------------
# Paths: where servers and clients run and which address the client dials.

class Path:
    def __init__(self, name, server_ns=None, client_ns=None, server_addr="127.0.0.1", client_addr=None):
        self.name = name
        self.server_ns, self.client_ns = server_ns, client_ns
        self.server_addr, self.client_addr = server_addr, client_addr

    def wrap(self, role, argv):
        ns = self.server_ns if role == "server" else self.client_ns
        return (["ip", "netns", "exec", ns] if ns else []) + argv

    def softrdma_run(self, softrdma, role):
        """`softrdma run` with the device on this side's address (loopback: the first free
        127.0.0.N, so the two processes need no configuration)."""
        addr = self.server_addr if role == "server" else self.client_addr
        return [softrdma, "run"] + (["--ip", addr] if self.server_ns else []) + ["--"]

    def iwarp_addrs(self):
        """(server, client) addresses for srdmaiw0: rdma_cm dials the server's device address, so
        on loopback both sides take fixed ones rather than the first free 127.0.0.N."""
        return (self.server_addr, self.client_addr) if self.server_ns else IWARP_LOOP_ADDRS


# ---------------------------------------------------------------------------------------------
# Running programs: stdout/stderr to files, CPU seconds from wait4's rusage.

class Proc:
    def __init__(self, argv, log_base):
        self.argv = argv
        self.out_path, self.err_path = log_base + ".out", log_base + ".err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          preexec_fn=_die_with_parent)
        self.rc = None
        self.cpu = None  # user + system seconds, its reaped children included

    @property
    def pid(self):
        return self.popen.pid

    def poll(self):
        if self.rc is None:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.rc = os.waitstatus_to_exitcode(status)
                self.cpu = ru.ru_utime + ru.ru_stime
                self.popen.returncode = self.rc
        return self.rc

    def wait(self, deadline):
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.rc is None:
            self.stop(signal.SIGKILL)
        return self.rc

    def stop(self, sig=signal.SIGTERM):
        if self.poll() is None:
            os.kill(self.pid, sig)
            deadline = time.monotonic() + 3
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.rc is None:
                os.kill(self.pid, signal.SIGKILL)
                while self.poll() is None:
                    time.sleep(0.02)

    def stdout(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


class Runner:
    def __init__(self, softrdma, outdir, udp_pingpong_path):
        self.softrdma = softrdma
        self.udp_pingpong = udp_pingpong_path
        self.logs = os.path.join(outdir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.count = 0

    def pair(self, path, tag, server_argv, client_argv, udp=False):
        """Starts the server, waits until it is bound on the port, runs the client. The argvs
        are functions of the port. Returns (server, client) Procs after both ended, or None."""
        self.count += 1
        base = os.path.join(self.logs, f"{self.count:04d}.{path.name}.{tag}")
        deadline = time.monotonic() + RUN_TIMEOUT
        for _ in range(3):
            port = free_port()
            server = Proc(path.wrap("server", server_argv(port)), base + ".server")
            until = min(deadline, time.monotonic() + LISTEN_TIMEOUT)
            while server.poll() is None and not pairs.listens(server.pid, port, udp) and time.monotonic() < until:
                time.sleep(0.02)
            if server.poll() is None and pairs.listens(server.pid, port, udp):
                break
            server.stop(signal.SIGKILL)
        else:
            warn(f"{path.name} {tag}: the server never listened (see {base}.server.*)")
            return None
        client = Proc(path.wrap("client", client_argv(port)), base + ".client")
        client.wait(deadline)
        return server, client


def warn(message):
    print(f"bench: {message}", file=sys.stderr, flush=True)


NUM = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


# ---------------------------------------------------------------------------------------------
# The measurements. Each returns a dict with "value" (and "cpu", "bytes" where known) or None.

def parse_perftest(text, program, size):
    """perftest's result line: bw tests give MB/s ("value") and msg/s, lat tests t_typical
    ("value", a median) and t_avg ("avg"), in microseconds; None when there is no such line."""
    row = re.search(rf"^\s*{size}\s+(\d+)\s+({NUM})\s+({NUM})\s+({NUM})\s*(?:({NUM})\s*)?", text, re.M)
    if row is None:
        return None
    if program.endswith("_bw"):
        return {"value": float(row.group(3)) * PERFTEST_MB / 1e6, "msg_rate": float(row.group(4)) * 1e6,
                "bytes": size * int(row.group(1))}
    if row.group(5) is None:
        return None
    return {"value": float(row.group(4)), "avg": float(row.group(5))}


def parse_rc_pingpong(text):
    """ibv_rc_pingpong's "N iters in S seconds = U usec/iter": the mean round trip ("value")."""
    m = re.search(rf"^\s*\d+ iters in {NUM} seconds = ({NUM}) usec/iter", text, re.M)
    return {"value": float(m.group(1))} if m else None


def parse_udp_pingpong(text):
    """udp_pingpong's result line, key=value pairs: the ping-pong's one way ("value": the median
    round trip / 2, "avg": the mean / 2) and round trip ("rtt", "rtt_avg"), or the stream's
    MB/s ("value") and msg/s."""
    line = next((l for l in text.splitlines() if l.startswith("udp_pingpong ")), None)
    if line is None:
        return None
    kv = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
    try:
        if kv.get("mode") == "stream":
            return {"value": float(kv["mb_per_s"]), "msg_rate": float(kv["msg_per_s"])}
        return {"value": float(kv["one_way_typical_us"]), "avg": float(kv["one_way_avg_us"]),
                "rtt": float(kv["rtt_typical_us"]), "rtt_avg": float(kv["rtt_avg_us"])}
    except (KeyError, ValueError):
        return None


def perftest(runner, path, program, size, iters, extra=(), iwarp=False):
    """An unmodified perftest pair over softrdma: bw tests give MB/s and msg/s, lat tests the
    typical (median) and average latency in microseconds. IWARP: on srdmaiw0, connected by
    rdma_cm (-R) over the kernel's TCP."""
    server_addr = path.iwarp_addrs()[0] if iwarp else path.server_addr

    def argv(role):
        if iwarp:
            addr = path.iwarp_addrs()[role == "client"]
            head = [runner.softrdma, "run", "--iwarp", "--ip", addr, "--", program, "-R", "-d", "srdmaiw0"]
        else:
            head = path.softrdma_run(runner.softrdma, role) + [program, "-d", "srdma0", "-x", "0"]
        return lambda port: head + ["-F", "-p", str(port), "-s", str(size), "-n", str(iters), *extra] + (
            [server_addr] if role == "client" else [])
    for tries_left in reversed(range(IWARP_PAIR_TRIES if iwarp else 1)):
        ran = runner.pair(path, f"{program}{'.iwarp' if iwarp else ''}.{size}", argv("server"), argv("client"))
        if ran is None:
            return None
        server, client = ran
        if tries_left == 0 or not (client.rc != 0 and refused_before_listen(client)):
            break
        warn(f"{path.name} {program} -R -s {size}: refused before the server listened again; once more")
        server.stop(signal.SIGKILL)
    server.wait(time.monotonic() + 10)
    result = parse_perftest(client.stdout(), program, size)
    if client.rc != 0 or server.rc != 0 or result is None:
        warn(f"{path.name} {program} -s {size}: failed (exit {server.rc}/{client.rc}; {client.out_path})")
        return None
    result["cpu"] = server.cpu + client.cpu
    return result


def refused_before_listen(client):
    """Whether perftest's client was refused by a server between its two listens."""
    with open(client.err_path, errors="replace") as err:
        return "RDMA_CM_EVENT_REJECTED" in err.read()


def rc_pingpong(runner, path, size, events):
    """ibv_rc_pingpong over softrdma, busy-polling its CQ or (events) asleep on its completion
    channel: usec/iter, the mean round trip."""
    extra = ["-e"] if events else []

    def argv(role):
        return lambda port: path.softrdma_run(runner.softrdma, role) + [
            "ibv_rc_pingpong", "-d", "srdma0", "-g", "0", "-p", str(port), "-s", str(size),
            "-n", str(PINGPONG_ITERS), *extra] + ([path.server_addr] if role == "client" else [])
    ran = runner.pair(path, f"ibv_rc_pingpong{''.join(extra)}.{size}", argv("server"), argv("client"))
    if ran is None:
        return None
    server, client = ran
    server.wait(time.monotonic() + 10)
    result = parse_rc_pingpong(client.stdout())
    if client.rc != 0 or server.rc != 0 or result is None:
        warn(f"{path.name} ibv_rc_pingpong {' '.join(extra)} -s {size}: failed "
             f"(exit {server.rc}/{client.rc}; {client.out_path})")
        return None
    return result


def udp_pingpong(runner, path, mode, size, stream=False, acked=False, roce_calls=False):
    """The project's UDP baseline of the same shape (udp_pingpong.cpp): a ping-pong whose ends
    busy-poll or sleep, or a busy-polling stream; acked, each message with an ACK-sized
    datagram behind it (the kernel's floor for an RC SEND and the ACK it carries back);
    roce_calls, the socket called as softrdma's UDP backend calls it (the floor of those calls)."""
    size = min(size, UDP_MAX)
    extra = (["--mode", mode] + (["--stream"] if stream else []) + (["--acked"] if acked else []) +
             (["--roce-calls"] if roce_calls else []))
    kind = ("stream" if stream else mode) + (".acked" if acked else "") + (".roce_calls" if roce_calls else "")
    ran = runner.pair(path, f"udp_pingpong.{kind}.{size}",
                      lambda port: [runner.udp_pingpong, "--server", "--bind", path.server_addr, "-p", str(port),
                                    *extra],
                      lambda port: [runner.udp_pingpong, path.server_addr, "-p", str(port), "-s", str(size),
                                    "-n", str(UDP_PP_ITERS), *extra], udp=True)
    if ran is None:
        return None
    server, client = ran
    server.wait(time.monotonic() + 5)
    result = parse_udp_pingpong(client.stdout())
    if client.rc != 0 or result is None:
        warn(f"{path.name} udp_pingpong {' '.join(extra)} -s {size}: failed (exit {client.rc}; {client.err_path})")
        return None
    return result


def qperf(runner, path, test, size, seconds=1):
    """qperf TEST (tcp_bw: MB/s; tcp_lat, udp_lat: one-way microseconds) with a server of its own."""
    ran = runner.pair(path, f"qperf.{test}.{size}", lambda port: ["qperf", "-lp", str(port)],
                      lambda port: ["qperf", "-lp", str(port), "-t", str(seconds), "-m", str(size), "-vv",
                                    path.server_addr, test])
    if ran is None:
        return None
    server, client = ran
    time.sleep(0.1)  # the server reaps the child that served the test
    server.stop()
    out = client.stdout()
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    if test == "tcp_bw":
        m = re.search(rf"^\s*bw\s*=\s*({NUM})\s*([KMGT]?)B/sec", out, re.M)
        sent = re.search(rf"^\s*send_bytes\s*=\s*({NUM})\s*([KMGT]?)B", out, re.M)
        if client.rc != 0 or m is None:
            warn(f"{path.name} qperf {test} -m {size}: failed ({client.out_path})")
            return None
        return {"value": float(m.group(1)) * scale[m.group(2)] / 1e6, "cpu": server.cpu + client.cpu,
                "bytes": float(sent.group(1)) * scale[sent.group(2)] if sent else None}
    m = re.search(rf"^\s*latency\s*=\s*({NUM})\s*(ns|us|ms|sec)", out, re.M)
    if client.rc != 0 or m is None or float(m.group(1)) == 0:
        warn(f"{path.name} qperf {test} -m {size}: failed ({client.out_path})")
        return None
    return {"value": float(m.group(1)) * {"ns": 1e-3, "us": 1, "ms": 1e3, "sec": 1e6}[m.group(2)]}


def sockperf(runner, path, mode, size, seconds=1):
    """sockperf over UDP: ping-pong gives the median one-way latency (its percentile 50, as
    perftest's t_typical is a median), throughput the sender's messages per second."""
    ran = runner.pair(path, f"sockperf.{mode}.{size}",
                      lambda port: ["sockperf", "sr", "-i", path.server_addr, "-p", str(port)],
                      lambda port: ["sockperf", mode, "-i", path.server_addr, "-p", str(port), "-t", str(seconds),
                                    "-m", str(size)], udp=True)
    if ran is None:
        return None
    server, client = ran
    server.stop()
    out = client.stdout() + open(client.err_path, errors="replace").read()
    pattern = r"percentile 50\.000 =\s*(" + NUM + ")" if mode == "pp" else r"Message Rate is (" + NUM + ")"
    m = re.search(pattern, out)
    if client.rc != 0 or m is None:
        warn(f"{path.name} sockperf {mode} -m {size}: failed ({client.out_path})")
        return None
    return {"value": float(m.group(1))}


def iperf3(runner, path, streams, seconds=1):
    """iperf3 TCP, STREAMS parallel connections: the receiver's MB/s."""
    ran = runner.pair(path, f"iperf3.P{streams}", lambda port: ["iperf3", "-s", "-1", "-p", str(port)],
                      lambda port: ["iperf3", "-c", path.server_addr, "-p", str(port), "-t", str(seconds),
                                    "-P", str(streams), "-J"])
    if ran is None:
        return None
    server, client = ran
    server.wait(time.monotonic() + 5)
    try:
        received = json.loads(client.stdout())["end"]["sum_received"]
        return {"value": received["bits_per_second"] / 8e6, "cpu": (server.cpu or 0) + client.cpu,
                "bytes": received["bytes"]}
    except (ValueError, KeyError, TypeError):
        warn(f"{path.name} iperf3 -P {streams}: failed ({client.out_path})")
        return None


def idle_device(runner, seconds):
    """An ibv_rc_pingpong server over softrdma waiting for a client that never comes: the CPU
    its whole process used in SECONDS (% of one core) and its VmRSS (MiB) at the end."""
    port = free_port()
    base = os.path.join(runner.logs, "idle.ibv_rc_pingpong")
    server = Proc([runner.softrdma, "run", "--", "ibv_rc_pingpong", "-d", "srdma0", "-g", "0", "-p", str(port)],
                  base)
    until = time.monotonic() + LISTEN_TIMEOUT
    while server.poll() is None and not pairs.listens(server.pid, port) and time.monotonic() < until:
        time.sleep(0.02)
    if server.poll() is not None or not pairs.listens(server.pid, port):
        server.stop(signal.SIGKILL)
        warn(f"idle: the ibv_rc_pingpong server never listened ({base}.err)")
        return None

    def ticks():
        with open(f"/proc/{server.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of proc(5))

    time.sleep(0.5)  # let start-up settle: the device's progress thread spins briefly after activity
    t0, c0 = time.monotonic(), ticks()
    time.sleep(seconds)
    t1, c1 = time.monotonic(), ticks()
    with open(f"/proc/{server.pid}/status") as f:
        rss_kib = int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))
    server.stop()
    return {"cpu_pct": 100.0 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0), "ticks": c1 - c0,
            "rss_mib": rss_kib / 1024.0, "seconds": t1 - t0}


# ---------------------------------------------------------------------------------------------
# The plan: groups of measurements run interleaved per repetition, then rows built from medians.

def bw_iters(size, smoke):
    if smoke:
        return 200
    # About 320 MiB a run, 200..20000 messages: 5120 of 64 KiB, near perftest's own default of
    # 5000. (At 64 MiB a 64 KiB run lasted 30-40 ms and the first window's ramp weighed in it,
    # against the baselines' one-second runs.)
    return max(200, min(20000, (320 << 20) // size))


def plan(args):
    """[(group name, [(key, function)])]: each repetition runs a group's measurements in order."""
    sizes = [65536] if args.smoke else (FULL_BW_SIZES if args.full else DEFAULT_BW_SIZES)
    groups = []
    for size in sizes:
        ms = [(("pt", "ib_write_bw", size), lambda r, p, s=size: perftest(r, p, "ib_write_bw", s, bw_iters(s, args.smoke))),
              (("qperf", "tcp_bw", size), lambda r, p, s=size: qperf(r, p, "tcp_bw", s))]
        if not args.smoke:
            ms.insert(1, (("pt", "ib_read_bw", size), lambda r, p, s=size: perftest(r, p, "ib_read_bw", s, bw_iters(s, False))))
            ms.insert(2, (("pt", "ib_send_bw", size), lambda r, p, s=size: perftest(r, p, "ib_send_bw", s, bw_iters(s, False))))
            if size == 64:  # the message-rate target: UDP packets/s of 64 B
                ms.append((("sockperf", "tp", 64), lambda r, p: sockperf(r, p, "tp", 64)))
            if size in STREAM_SIZES:  # a busy-polling UDP stream, a second reference
                ms.append((("udp", "stream", size), lambda r, p, s=size: udp_pingpong(r, p, "busy", s, stream=True)))
        groups.append((f"bandwidth {size} B", ms))
    # ib_write_bw -R on srdmaiw0 against qperf tcp_bw, interleaved in a group of their own.
    groups.append(("iWARP bandwidth 64 KiB", [
        (("iw", "ib_write_bw", IWARP_SIZE),
         lambda r, p: perftest(r, p, "ib_write_bw", IWARP_SIZE, bw_iters(IWARP_SIZE, args.smoke), iwarp=True)),
        (("qperf_iw", "tcp_bw", IWARP_SIZE), lambda r, p: qperf(r, p, "tcp_bw", IWARP_SIZE)),
    ]))
    if args.smoke:  # one latency row of each kind the table parses, tiny
        groups.append(("latency 2 B", [
            (("pt", "ib_send_lat", 2), lambda r, p: perftest(r, p, "ib_send_lat", 2, 100)),
            (("udp", "busy", 2), lambda r, p: udp_pingpong(r, p, "busy", 2)),
            (("udp", "busy_acked", 2), lambda r, p: udp_pingpong(r, p, "busy", 2, acked=True)),
            (("pt", "ib_read_lat", 2), lambda r, p: perftest(r, p, "ib_read_lat", 2, 100)),
            (("udp", "busy_roce_calls", 2), lambda r, p: udp_pingpong(r, p, "busy", 2, roce_calls=True)),
            (("rc_pp", "poll", 2), lambda r, p: rc_pingpong(r, p, 2, False)),
        ]))
        return groups
    for size in LAT_SIZES:
        udp = min(max(size, SOCKPERF_MIN), UDP_MAX)
        ms = [
            (("pt", "ib_send_lat", size), lambda r, p, s=size: perftest(r, p, "ib_send_lat", s, LAT_ITERS)),
            (("udp", "busy", size), lambda r, p, s=size: udp_pingpong(r, p, "busy", s)),
            (("udp", "busy_acked", size), lambda r, p, s=size: udp_pingpong(r, p, "busy", s, acked=True)),
            (("sockperf", "pp", size), lambda r, p, u=udp: sockperf(r, p, "pp", u)),
            (("pt", "ib_write_lat", size), lambda r, p, s=size: perftest(r, p, "ib_write_lat", s, LAT_ITERS)),
            (("udp", "sleep", size), lambda r, p, s=size: udp_pingpong(r, p, "sleep", s)),
            (("qperf", "udp_lat", size), lambda r, p, u=min(size, UDP_MAX): qperf(r, p, "udp_lat", u)),
            (("pt", "ib_read_lat", size), lambda r, p, s=size: perftest(r, p, "ib_read_lat", s, LAT_ITERS)),
            (("qperf", "tcp_lat", size), lambda r, p, s=size: qperf(r, p, "tcp_lat", s)),
        ]
        if size <= ROCE_CALLS_MAX:
            ms.append((("udp", "busy_roce_calls", size),
                       lambda r, p, s=size: udp_pingpong(r, p, "busy", s, roce_calls=True)))
        if size in PINGPONG_SIZES:
            ms += [(("rc_pp", "poll", size), lambda r, p, s=size: rc_pingpong(r, p, s, False)),
                   (("rc_pp", "events", size), lambda r, p, s=size: rc_pingpong(r, p, s, True))]
        groups.append((f"latency {size} B", ms))
    ms = []
    for q in QP_COUNTS:
        # -n counts per QP: about 320 MiB in all whatever the QP count, as bw_iters.
        ms += [(("pt", "ib_write_bw_q", q),
                lambda r, p, q=q: perftest(r, p, "ib_write_bw", 65536, max(8, bw_iters(65536, False) // q), ("-q", str(q)))),
               (("iperf3", "P", q), lambda r, p, q=q: iperf3(r, p, min(q, IPERF3_MAX_STREAMS)))]
    groups.append(("queue pairs 1/16/256 at 64 KiB", ms))
    groups.append(("CPU per GB at 64 KiB", [
        (("cpu", "short"), lambda r, p: perftest(r, p, "ib_write_bw", CPU_SIZE, CPU_SHORT_ITERS)),
        (("cpu", "long"), lambda r, p: perftest(r, p, "ib_write_bw", CPU_SIZE, CPU_LONG_ITERS)),
        (("cpu", "qperf"), lambda r, p: qperf(r, p, "tcp_bw", CPU_SIZE)),
    ]))
    return groups


def measure(runner, paths, groups, reps):
    results = {}  # (path, key) -> [result dicts]
    for name, ms in groups:
        for path in paths:
            started = time.monotonic()
            for _ in range(reps):
                for key, fn in ms:
                    results.setdefault((path.name, key), []).append(fn(runner, path))
            print(f"bench: {path.name}: {name}: {reps} x {len(ms)} runs in {time.monotonic() - started:.0f} s",
                  file=sys.stderr, flush=True)
    return results


def median(runs, field="value"):
    values = [r[field] for r in runs if r is not None and r.get(field) is not None]
    return (statistics.median(values), values) if values else (None, values)


def size_label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


class Row:
    def __init__(self, path, name, unit, ours, base, base_name, higher_better, target=None, size=""):
        self.path, self.name, self.unit, self.size = path, name, unit, size
        self.ours, self.ours_runs = ours
        self.base, self.base_runs = base
        self.base_name = base_name
        self.higher_better = higher_better
        self.target = target  # ("ratio" or "abs", ">=" or "<=", number)
        self.ratio = self.ours / self.base if self.ours is not None and self.base else None

    def met(self):
        if self.target is None:
            return ""
        kind, op, bound_ = self.target
        x = self.ratio if kind == "ratio" else self.ours
        if x is None:
            return "n/a"
        return "met" if (x >= bound_ if op == ">=" else x <= bound_) else "NOT met"

    def target_text(self):
        if self.target is None:
            return ""
        kind, op, bound_ = self.target
        return f"{op} {bound_:g}x" if kind == "ratio" else f"{op} {bound_:g} {self.unit}"


def build_rows(results, paths, groups, idle):
    rows = []
    keys = {key for _, ms in groups for key, _ in ms}

    def get(path, key, field="value"):
        return median(results.get((path, key), []), field)

    for path in [p.name for p in paths]:
        for test in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
            for key in sorted(k for k in keys if k[:2] == ("pt", test)):
                size = key[2]
                target = BW_TARGETS.get((test, size))
                rows.append(Row(path, f"{test} {size_label(size)}", "MB/s", get(path, key),
                                get(path, ("qperf", "tcp_bw", size)), "qperf tcp_bw", True, target, size))
                if test == "ib_write_bw" and ("udp", "stream", size) in keys:
                    rows.append(Row(path, f"{test} {size_label(size)}, 2nd baseline", "MB/s", get(path, key),
                                    get(path, ("udp", "stream", size)), f"UDP busy-poll stream {min(size, UDP_MAX)} B",
                                    True, None, size))
        if ("iw", "ib_write_bw", IWARP_SIZE) in keys:
            rows.append(Row(path, "ib_write_bw -R 64 KiB on srdmaiw0 (iWARP)", "MB/s",
                            get(path, ("iw", "ib_write_bw", IWARP_SIZE)), get(path, ("qperf_iw", "tcp_bw", IWARP_SIZE)),
                            "qperf tcp_bw", True, IWARP_TARGET, IWARP_SIZE))
        if ("pt", "ib_send_bw", 64) in keys:
            rows.append(Row(path, "ib_send_bw 64 B message rate", "msg/s", get(path, ("pt", "ib_send_bw", 64), "msg_rate"),
                            get(path, ("sockperf", "tp", 64)), "sockperf tp UDP 64 B", True, ("ratio", ">=", 0.8), 64))
            if ("udp", "stream", 64) in keys:
                rows.append(Row(path, "ib_send_bw 64 B message rate, 2nd baseline", "msg/s",
                                get(path, ("pt", "ib_send_bw", 64), "msg_rate"), get(path, ("udp", "stream", 64), "msg_rate"),
                                "UDP busy-poll stream 64 B", True, None, 64))
        for size in LAT_SIZES:
            rows += latency_rows(path, size, keys, get)
        if ("pt", "ib_write_bw_q", 1) in keys:
            for q in QP_COUNTS:
                rows.append(Row(path, f"ib_write_bw -q {q} 64 KiB", "MB/s", get(path, ("pt", "ib_write_bw_q", q)),
                                get(path, ("iperf3", "P", q)), f"iperf3 -P {min(q, IPERF3_MAX_STREAMS)}", True))
            rows.append(Row(path, "ib_write_bw 256 QPs vs 1 QP", "MB/s", get(path, ("pt", "ib_write_bw_q", 256)),
                            get(path, ("pt", "ib_write_bw_q", 1)), "ours -q 1", True, ("ratio", ">=", 0.8)))
        if ("cpu", "long") in keys:
            rows.append(cpu_row(path, results))
    if idle is not None:
        rows.append(Row("loop", "idle device CPU", "% of a core", (idle["cpu_pct"], [idle["cpu_pct"]]), (None, []),
                        "", False, ("abs", "<=", 1.0)))
        rows.append(Row("loop", "idle device VmRSS", "MiB", (idle["rss_mib"], [idle["rss_mib"]]), (None, []),
                        "", False, ("abs", "<=", 16.0)))
    return rows


def latency_rows(path, size, keys, get):
    """The latency rows of one message size: each perftest row against its same-shape UDP
    baseline (busy-polling or sleeping), its second reference (sockperf, qperf) and its t_avg
    against its own t_typical; ibv_rc_pingpong's mean round trip, polling and with -e; and the
    UDP baselines' own t_avg, which shows how much of a tail is the machine's."""
    rows = []
    label, udp = size_label(size), min(size, UDP_MAX)

    def both(name, key, base, base_name, target, second, second_name, floor=None, floor_name=None,
             floor_kind="ACK floor"):
        if key not in keys:
            return
        ours = get(path, key)
        rows.append(Row(path, name, "us", ours, base, base_name, False, target, size))
        if second is not None:
            rows.append(Row(path, f"{name}, 2nd baseline", "us", ours, second, second_name, False, None, size))
        if floor is not None:
            rows.append(Row(path, f"{name}, {floor_kind}", "us", ours, floor, floor_name, False, None, size))
        rows.append(Row(path, f"{name} t_avg", "us", get(path, key, "avg"), ours, "its t_typical", False, LAT_TARGET,
                        size))

    def doubled(v):  # qperf tcp_lat is one way: a round trip is twice it
        return (v[0] * 2 if v[0] is not None else None, [x * 2 for x in v[1]])

    busy_target = LAT_TARGET if size in BUSY_TARGET_SIZES else None
    both(f"ib_send_lat {label}", ("pt", "ib_send_lat", size), get(path, ("udp", "busy", size)),
         f"UDP busy-poll one way {udp} B", busy_target,
         get(path, ("sockperf", "pp", size)) if ("sockperf", "pp", size) in keys else None,
         f"sockperf pp UDP {min(max(size, SOCKPERF_MIN), UDP_MAX)} B",
         get(path, ("udp", "busy_acked", size)) if ("udp", "busy_acked", size) in keys else None,
         f"UDP busy-poll one way {udp} B + ACK")
    both(f"ib_write_lat {label}", ("pt", "ib_write_lat", size), get(path, ("udp", "sleep", size)),
         f"UDP sleeping one way {udp} B", LAT_TARGET,
         get(path, ("qperf", "udp_lat", size)) if ("qperf", "udp_lat", size) in keys else None,
         f"qperf udp_lat {udp} B")
    both(f"ib_read_lat {label} (round trip)", ("pt", "ib_read_lat", size), get(path, ("udp", "busy", size), "rtt"),
         f"UDP busy-poll round trip {udp} B", busy_target,
         doubled(get(path, ("qperf", "tcp_lat", size))) if ("qperf", "tcp_lat", size) in keys else None,
         "qperf tcp_lat x 2",
         get(path, ("udp", "busy_roce_calls", size), "rtt") if ("udp", "busy_roce_calls", size) in keys else None,
         f"UDP busy-poll round trip {udp} B in the backend's calls", "socket-call floor")
    for mode, flag, base in (("poll", "", "busy"), ("events", " -e", "sleep")):
        if ("rc_pp", mode, size) in keys:
            rows.append(Row(path, f"ibv_rc_pingpong{flag} {label} (round trip, mean)", "us",
                            get(path, ("rc_pp", mode, size)), get(path, ("udp", base, size), "rtt"),
                            f"UDP {'busy-poll' if base == 'busy' else 'sleeping'} round trip {udp} B", False,
                            busy_target, size))
    if ("rc_pp", "poll", size) in keys and ("udp", "busy_acked", size) in keys:
        rows.append(Row(path, f"ibv_rc_pingpong {label} (round trip, mean), ACK floor", "us",
                        get(path, ("rc_pp", "poll", size)), get(path, ("udp", "busy_acked", size), "rtt"),
                        f"UDP busy-poll round trip {udp} B + ACK", False, None, size))
    for mode in ("busy", "sleep"):
        if ("udp", mode, size) in keys:
            rows.append(Row(path, f"UDP {'busy-poll' if mode == 'busy' else 'sleeping'} {label} t_avg", "us",
                            get(path, ("udp", mode, size), "avg"), get(path, ("udp", mode, size)), "its t_typical",
                            False, None, size))
    return rows


def cpu_row(path, results):
    """CPU seconds per GB moved. Ours: (CPU of a long run - CPU of a short run) / (bytes of the
    long - bytes of the short), pairing the runs of one repetition, so perftest's and the
    device's start-up (CPU frequency probe, registration) cancel out. qperf's start-up is a
    TCP connection, negligible: its whole CPU over its bytes. Both ends' processes counted."""
    ours = []
    for short, long_ in zip(results.get((path, ("cpu", "short")), []), results.get((path, ("cpu", "long")), [])):
        if short and long_ and long_["bytes"] > short["bytes"]:
            ours.append((long_["cpu"] - short["cpu"]) / ((long_["bytes"] - short["bytes"]) / 1e9))
    base = [r["cpu"] / (r["bytes"] / 1e9) for r in results.get((path, ("cpu", "qperf")), []) if r and r.get("bytes")]
    return Row(path, "CPU per GB, ib_write_bw 64 KiB", "CPU s/GB",
               (statistics.median(ours) if ours else None, ours),
               (statistics.median(base) if base else None, base), "qperf tcp_bw 64 KiB", False, ("ratio", "<=", 1.0),
               size=CPU_SIZE)


# ---------------------------------------------------------------------------------------------
# Output: the table, the CSV and the plot's data files.

def fmt(x):
    if x is None:
        return "n/a"
    if abs(x) >= 100000:
        return f"{x:.3g}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def table(rows):
    head = ["path", "row", "unit", "ours", "baseline", "baseline is", "ratio", "target", "met"]
    body = [[r.path, r.name, r.unit, fmt(r.ours), fmt(r.base) if r.base_name else "",
             r.base_name, f"{r.ratio:.2f}x" if r.ratio is not None else "", r.target_text(), r.met()] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head] + body]
    return "\n".join(lines[:1] + ["-" * len(lines[0])] + lines[1:]) + "\n"


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "row", "size_bytes", "unit", "better", "ours_median", "baseline_median", "baseline",
                    "ratio", "target", "met", "ours_runs", "baseline_runs"])
        for r in rows:
            w.writerow([r.path, r.name, r.size, r.unit, "higher" if r.higher_better else "lower", r.ours, r.base,
                        r.base_name, r.ratio, r.target_text(), r.met(), " ".join(f"{v:.6g}" for v in r.ours_runs),
                        " ".join(f"{v:.6g}" for v in r.base_runs)])


def write_plot_data(results, paths, outdir):
    """bw_PATH.dat: size, ib_write_bw, ib_read_bw, ib_send_bw, qperf tcp_bw (MB/s);
    lat_PATH.dat: size, ib_send_lat, ib_write_lat, ib_read_lat, sockperf pp, qperf udp_lat,
    qperf tcp_lat x 2, udp_pingpong busy and sleeping one way (us). A missing figure is '?',
    which gnuplot skips."""
    def m(path, key):
        v = median(results.get((path, key), []))[0]
        return "?" if v is None else f"{v:.6g}"

    for path in [p.name for p in paths]:
        sizes = sorted({k[2] for (p, k) in results if p == path and k[:2] == ("pt", "ib_write_bw")})
        with open(os.path.join(outdir, f"bw_{path}.dat"), "w") as f:
            f.write("# size ib_write_bw ib_read_bw ib_send_bw qperf_tcp_bw (MB/s)\n")
            for s in sizes:
                f.write(f"{s} {m(path, ('pt', 'ib_write_bw', s))} {m(path, ('pt', 'ib_read_bw', s))} "
                        f"{m(path, ('pt', 'ib_send_bw', s))} {m(path, ('qperf', 'tcp_bw', s))}\n")
        sizes = sorted({k[2] for (p, k) in results if p == path and k[:2] == ("pt", "ib_send_lat")})
        with open(os.path.join(outdir, f"lat_{path}.dat"), "w") as f:
            f.write("# size ib_send_lat ib_write_lat ib_read_lat sockperf_pp qperf_udp_lat qperf_tcp_lat_x2 "
                    "udp_busy_one_way udp_sleep_one_way (us)\n")
            for s in sizes:
                tcp = median(results.get((path, ("qperf", "tcp_lat", s)), []))[0]
                f.write(f"{s} {m(path, ('pt', 'ib_send_lat', s))} {m(path, ('pt', 'ib_write_lat', s))} "
                        f"{m(path, ('pt', 'ib_read_lat', s))} {m(path, ('sockperf', 'pp', s))} "
                        f"{m(path, ('qperf', 'udp_lat', s))} {'?' if tcp is None else f'{tcp * 2:.6g}'} "
                        f"{m(path, ('udp', 'busy', s))} {m(path, ('udp', 'sleep', s))}\n")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("softrdma")
    p.add_argument("outdir")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--full", action="store_true")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--paths", default="loop")
    p.add_argument("--netns", nargs=2, metavar=("A", "B"))
    p.add_argument("--addrs", nargs=2, metavar=("ADDR_A", "ADDR_B"))
    p.add_argument("--idle-seconds", type=float, default=10)
    p.add_argument("--only", help="run only the groups whose name holds this word (latency, bandwidth, ...)")
    p.add_argument("--udp-pingpong", help="the udp_pingpong executable (default: beside SOFTRDMA's build)")
    a = p.parse_args(argv[1:])
    udp_pp = a.udp_pingpong or os.path.join(os.path.dirname(os.path.abspath(a.softrdma)), "..", "..", "tests", "bench",
                                            "udp_pingpong")
    if not os.access(udp_pp, os.X_OK):
        p.error(f"no udp_pingpong at {udp_pp} (cmake --build BUILD --target udp_pingpong)")
    paths = []
    for name in a.paths.split(","):
        if name == "loop":
            paths.append(Path("loop"))
        elif name == "veth" and a.netns and a.addrs:
            paths.append(Path("veth", a.netns[0], a.netns[1], a.addrs[0], a.addrs[1]))
        else:
            p.error(f"unknown path '{name}' (loop, or veth with --netns and --addrs)")
    os.makedirs(a.outdir, exist_ok=True)
    runner = Runner(a.softrdma, a.outdir, udp_pp)
    groups = [g for g in plan(a) if not a.only or a.only in g[0]]
    results = measure(runner, paths, groups, a.reps)
    idle = idle_device(runner, a.idle_seconds) if a.idle_seconds > 0 else None
    rows = build_rows(results, paths, groups, idle)
    text = table(rows)
    if idle is not None:
        text += (f"idle: {idle['ticks']} CPU ticks in {idle['seconds']:.1f} s, VmRSS {idle['rss_mib']:.1f} MiB "
                 f"(the whole ibv_rc_pingpong process: program, shim and device)\n")
    with open(os.path.join(a.outdir, "table.txt"), "w") as f:
        f.write(text)
    write_csv(rows, os.path.join(a.outdir, "results.csv"))
    write_plot_data(results, paths, a.outdir)
    print(text, end="")
    # A figure missing means a program failed: the suite says so in its exit status.
    return 1 if any(r.ours is None or (r.base_name and r.base is None) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
