#!/usr/bin/env python3
"""Unmodified Debian rstream and riostream (rdmacm-utils) in server + client pairs on
softrdma's rsockets (librdmacm.so.1's rsocket, rpoll, riomap, riowrite, ...).

usage: rsocket_pairs_test.py --list
       rsocket_pairs_test.py [--server-ip ADDR] [--client-ip ADDR] [--timeout S] SOFTRDMA CASE...

CASE is a name printed by --list, or `all`. Each case runs one server (`PROGRAM -b S -p P
ARGS`) and one client (`PROGRAM -s S -p P ARGS`) through `softrdma run --ip ADDR`, each with
its own device, on loopback: the server's on a free 127.77.X.(2k+1), X from 70 to 79, the
client's on the next address (or the addresses given). daemon.CASE runs the same pair on one softrdmad ($SOFTRDMAD) on the
server's address, both attached with `softrdma run --daemon`, which must exit 0 on SIGTERM.

The programs' test options (-T): b blocking calls (MSG_WAITALL); n, or none, non-blocking
calls retried at once (MSG_DONTWAIT); a rpoll before every call (with b it waits, else it
polls with timeout 0); v each side checks every byte it receives against the sequence the
other sends (rstream: the whole stream; riostream: each block riowrite placed in its
riomapped buffer), prints "data verification failed byte N" and exits non-zero on a
mismatch; r rdma_getaddrinfo resolves the address. (-T s would use TCP sockets, not
rsockets: it is no case here.) With -S/-C/-I a program runs one test of that size, count and
iterations and returns its result; without, it runs its latency and bandwidth suite over two
connections, and its exit status says only that both connected.

A case passes when, within its timeout, both programs exit 0, each prints its result rows
(name, size, transfers, iterations, total, seconds, Gb/sec, usec/transfer: rstream and
riostream compute them after the exchange, so a row means the whole exchange happened), and
neither prints an error line: a perror() of an r* call, "data verification failed", or a
line of softrdma's. The throughput of each row is printed.

The client starts once the server has printed its header line (after rlisten; the programs
run under stdbuf), and is started again, up to CONNECT_TRIES times, while it fails with
"Connection refused" and the server still runs.

Exit status: 0 when every case passed, 1 when one failed, 77 when every case was skipped
(rdmacm-utils not installed, no softrdmad). ctest runs each case as shim.rsocket.pairs.CASE.
"""

import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_pairs_test import run_client  # noqa: E402
from rdmacm_pairs_test import VETH_BOTH, Outcome, Side, drive, reserve, run_attached  # noqa: E402

SKIP = 77
DEFAULT_TIMEOUT = 60  # seconds for one case, server start to both exits
READY_TIMEOUT = 20
CONNECT_TRIES = 5
NUM = r"\d+(?:\.\d+)?"
SIZE = r"\d+(?:\.\d)?[kmg]?"  # rdma-core's size_str / cnt_str: 64, 1m, 1.5k, 100k

READY = re.compile(r"^name\s+bytes\s+xfers\s+iters\s+total\s+time\s+Gb/sec\s+usec/xfer$", re.M)
# perror() of the programs' calls, their verification, and softrdma's own lines.
BAD_LINE = re.compile(r"^(?:(?:rsocket|rbind|rlisten|raccept|rconnect|async rconnect|rsend|rrecv|rpoll|riomap|"
                      r"riowrite|riounmap|rsetsockopt[^:]*|rdma_getaddrinfo[^:]*|getaddrinfo[^:]*|malloc): |"
                      r".*verification failed|softrdma|.*not implemented).*$", re.M | re.I)
REFUSED = re.compile(r"Connection refused", re.I)


def row(name, size, xfers, iters):
    """A result row: name, bytes, xfers, iters, total, time, Gb/sec, usec/xfer; groups 1 and 2
    are the name and the Gb/sec."""
    return rf"^({name})\s+{size}\s+{xfers}\s+{iters}\s+{SIZE}\s+{NUM}s\s+({NUM})\s+{NUM}$"


def size_text(n):
    """rdma-core's size_str: 1000 -> 1000, 65536 -> 64k, 1048576 -> 1m, 100000 -> 97k."""
    for base, mag in ((1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")):
        if n >= base:
            whole = n // base
            frac = (n % base) * 10 // base if whole < 10 else 0
            return f"{whole}.{frac}{mag}" if frac else f"{whole}{mag}"
    return str(n)


def count_text(n):
    """rdma-core's cnt_str: 1000 -> 1k, 100 -> 100."""
    for base, mag in ((1000000000, "b"), (1000000, "m"), (1000, "k")):
        if n >= base:
            return f"{n // base}{mag}"
    return str(n)


class Case:
    """PROGRAM with ARGS on both sides; ROWS the result rows each side must print. DAEMON:
    False when the case has no daemon variant. VETH: as rdmacm_pairs_test.Case's. RUN: more
    `softrdma run` options for both sides."""

    def __init__(self, name, program, args, rows, timeout=DEFAULT_TIMEOUT, daemon=True, veth=(), run=()):
        self.name = name
        self.program = program
        self.args = list(args)
        self.rows = list(rows)
        self.timeout = timeout
        self.on_daemon = daemon
        self.veth = veth
        self.run = list(run)


def custom(name, program, size, count, iters, options, extra=(), **kw):
    """One test of SIZE bytes, COUNT transfers each way per iteration, ITERS iterations."""
    args = ["-S", str(size), "-C", str(count), "-I", str(iters), *extra]
    for o in options:
        args += ["-T", o]
    return Case(name, program, args, [row("custom", re.escape(size_text(size)), count_text(count), count_text(iters))],
                **kw)


MIB = 1 << 20
IWARP = {"run": ["--iwarp"], "daemon": False}
IWARP_DAEMON = {"run": ["--iwarp"]}  # with a daemon variant, on softrdmad --iwarp
SUITE_SIZES = ("64", "4k", "64k", "1m")
# rstream's and riostream's own suite: latency rows (1 transfer, many iterations), then on a
# second connection bandwidth rows (many transfers, 1 iteration).
SUITE_ROWS = [row(f"{s}_lat", s, "1", SIZE) for s in SUITE_SIZES] + [row(f"{s}_bw", s, SIZE, "1") for s in SUITE_SIZES]

CASES = [
    # rstream: rsend/rrecv through the receive buffer ring; verified both ways.
    custom("rstream.blocking", "rstream", MIB, 20, 2, "bv", veth=VETH_BOTH),
    custom("rstream.nonblocking", "rstream", 65536, 100, 2, "nv"),
    custom("rstream.async", "rstream", MIB, 20, 2, "av"),
    custom("rstream.async_blocking", "rstream", 4096, 200, 5, "abv"),
    custom("rstream.small", "rstream", 64, 1000, 2, "bv"),  # inline sends
    # 8 KiB buffers (-B: SO_SNDBUF and SO_RCVBUF) for 100000-byte transfers: every transfer
    # waits for the receiver to hand back half its buffer many times.
    custom("rstream.buffer_8k", "rstream", 100000, 20, 2, "bv", extra=["-B", "8192"]),
    custom("rstream.resolve", "rstream", 4096, 100, 2, "rbv"),  # rdma_getaddrinfo, RDMA_ROUTE
    # rstream's own suite: two connections one after the other, every size; 100000 round
    # trips of 64 bytes take ~15 s (~70 s under ASan), so it has no daemon variant.
    Case("rstream.suite", "rstream", ["-T", "v"], SUITE_ROWS, timeout=240, daemon=False),
    # riostream: riomap on both sides, riowrite into the peer's mapped buffer (the receiver
    # spins on its last byte without calling the library), rsend/rrecv to synchronise.
    custom("riostream.blocking", "riostream", MIB, 20, 2, "bv", veth=VETH_BOTH),
    custom("riostream.nonblocking", "riostream", 65536, 50, 4, "nv"),
    custom("riostream.async", "riostream", MIB, 20, 2, "av"),
    custom("riostream.async_blocking", "riostream", 4096, 100, 10, "abv"),
    # On srdmaiw0 (softrdma run --iwarp, embedded only), where there is no immediate data: each
    # message is a WRITE and then a SEND of its own, as rdma-core's rsockets send on iWARP.
    custom("iwarp.rstream.blocking", "rstream", MIB, 20, 2, "bv", veth=VETH_BOTH, **IWARP_DAEMON),
    custom("iwarp.rstream.nonblocking", "rstream", 65536, 100, 2, "nv", **IWARP),
    custom("iwarp.rstream.small", "rstream", 64, 1000, 2, "bv", **IWARP),
    custom("iwarp.rstream.buffer_8k", "rstream", 100000, 20, 2, "bv", extra=["-B", "8192"], **IWARP),
    custom("iwarp.riostream.blocking", "riostream", MIB, 20, 2, "bv", **IWARP),
    custom("iwarp.riostream.async_blocking", "riostream", 4096, 100, 10, "abv", **IWARP),
]


def free_loopback_pair():
    """127.77.X.(2k+1) and .(2k+2), X from 70 to 79, held for this process (reserve())."""
    for _ in range(50):
        x, k = random.randint(70, 79), random.randint(0, 126)
        pair = (f"127.77.{x}.{2 * k + 1}", f"127.77.{x}.{2 * k + 2}")
        if reserve(pair):
            return pair
    raise RuntimeError("no free 127.77.70-79.x pair")


def wait_ready(server, deadline):
    until = min(deadline, time.monotonic() + READY_TIMEOUT)
    while server.alive() and time.monotonic() < until:
        out, _ = server.output()
        if READY.search(out):
            return True
        time.sleep(0.05)
    return False


def run_case(case, softrdma, server_ip, client_ip, timeout, workdir, on_daemon=False):
    name = f"daemon.{case.name}" if on_daemon else case.name
    result = Outcome(name)
    if not os.path.exists(f"/usr/bin/{case.program}"):
        result.skipped = f"/usr/bin/{case.program} is not installed (apt-get install rdmacm-utils)"
        print(f"SKIPPED: {result.skipped}", flush=True)
        return result
    run_attached(result, on_daemon, server_ip, client_ip, workdir,
                 lambda server_attach, client_attach: run_pair(
                     case, result, softrdma, server_attach, client_attach, server_ip, timeout, workdir),
                 daemon_options=["--iwarp"] if "--iwarp" in case.run else [])
    return result


def run_pair(case, result, softrdma, server_attach, client_attach, server_ip, timeout, workdir):
    port = "7471"  # rstream's own: a port of the case's device (or daemon), nobody else's
    server_argv = [softrdma, "run", *server_attach, *case.run, "--", case.program, "-b", server_ip, "-p", port,
                   *case.args]
    client_argv = [softrdma, "run", *client_attach, *case.run, "--", case.program, "-s", server_ip, "-p", port,
                   *case.args]
    print(f"server: {' '.join(server_argv)}\nclient: {' '.join(client_argv)}", flush=True)
    deadline = time.monotonic() + (timeout or case.timeout)
    server = Side("server", server_argv, workdir, case.name)
    ready = wait_ready(server, deadline)
    result.check(ready, "the server listens (prints its header)" + ("" if server.alive() else " (it exited first)"))
    client = run_client(lambda attempt: Side("client", client_argv, workdir, f"{case.name}.{attempt}"),
                        CONNECT_TRIES if ready else 1, deadline,
                        lambda output: server.alive() and REFUSED.search(output))
    server.wait(min(deadline, time.monotonic() + 20) if not client.timed_out else time.monotonic())
    judge(case, result, server, client)
    if result.failures:
        print(server.report())
        print(client.report(), flush=True)


def judge(case, result, server, client):
    result.check(not server.timed_out and not client.timed_out, "both programs end within the timeout")
    result.check(server.proc.returncode == 0, f"the server exits 0 ({server.proc.returncode})")
    result.check(client.proc.returncode == 0, f"the client exits 0 ({client.proc.returncode})")
    for side, proc in (("server", server), ("client", client)):
        out, err = proc.output()
        for pattern in case.rows:
            m = re.search(pattern, out, re.M)
            if result.check(m is not None, f"the {side} prints a result row matching {pattern!r}"):
                print(f"       {m.group(0).strip()}    [{m.group(1)}: {m.group(2)} Gb/s]")
        bad = [m.group(0) for m in BAD_LINE.finditer(out + "\n" + err)]
        result.check(not bad, f"the {side} prints no error line", "\n".join(bad[:10]))


def main(argv):
    return drive(argv, CASES, run_case, __doc__, "softrdma-rsocket-", free_loopback_pair)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
