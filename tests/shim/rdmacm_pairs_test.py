#!/usr/bin/env python3
"""Unmodified Debian rdmacm programs in server + client pairs on softrdma's librdmacm.so.1.

usage: rdmacm_pairs_test.py --list
       rdmacm_pairs_test.py [--server-ip ADDR] [--client-ip ADDR] [--timeout S] SOFTRDMA CASE...

CASE is a name printed by --list, or `all`. Each case runs one server and one client, both
through `softrdma run --ip ADDR` in embedded mode (each program its own device) on loopback:
the server's device on a free 127.77.X.1, the client's on 127.77.X.2, X from 100 to 254 (or
the addresses given), and the client is pointed at the server's address. daemon.CASE runs the same pair on
one softrdmad ($SOFTRDMAD) on the server's address, both programs attached to it with
`softrdma run --daemon`, so that the connection is between two QPs of one device, as two
processes on one host with one RNIC connect; softrdmad must then exit 0 on SIGTERM. Cases
that inject faults per program have no daemon variant (the daemon's faults are its own). The pairs are rdma-core's
rdmacm-utils (rping, ucmatose, udaddy, rdma_server/rdma_client, cmtime, mckey), perftest with
-R (its QPs connected by the RDMA CM) and qperf with -cm1.

veth.CASE and veth6.CASE run a few pairs in a network namespace of their own, the two devices
on the ends of a veth pair (NETNS4_ADDR, NETNS6_ADDR), as two hosts on one link: the packets
then take the kernel's UDP path both ways instead of loopback.

mckey pairs are a receiver and a sender of one multicast group (239.77.X.Y, chosen per run),
each bound to its own address; mckey.ipv6 runs in a network namespace of its own, where the
two devices sit on the ends of a veth pair (NETNS6_ADDR), since IPv6 multicast does not work
on loopback, and its group is ff0e::77:40:1. Their daemon variants put receiver and sender on
one softrdmad, whose device hears the group for the receiver's QP.

A case passes when, within its timeout, both programs exit 0 (a server that never exits on
its own, cmtime's and qperf's, must still be running when the client is done and is then
stopped), each prints the lines its CASES row asks for (rping: every ping line, each with
the exact text rping generates, counted; perftest: its result row; qperf: its result), and
neither prints an error line (BAD_LINE, less the lines a program prints when all went well).
On failure both sides' command lines, exit codes, stdout and stderr are shown, with the
lines that name softrdma first.

Servers hold no TCP socket to wait for (only qperf's control port): the client starts once
the server has printed its "starting" line, or after a short pause, and is started again
(up to CONNECT_TRIES times) while it fails the way a client fails when nothing listens yet
(REJECTED, UNREACHABLE, "Connection refused") and the server still runs. A server that is
ready once it listens on TCP (iWARP, qperf) was listening when its client started, so a
refusal there means it stopped between two connections (perftest -R on iWARP does): the pair
is started again together, up to PAIR_TRIES times (stranded()).

Exit status: 0 when every case passed, 1 when one failed, 77 when every case was skipped (a
program not installed: rdmacm-utils, perftest, qperf). Every process has a timeout and dies
with this script. ctest runs each case as shim.rdmacm.pairs.CASE.
"""

import fcntl
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_pairs_test import Side as ProgramSide, listens, run_client  # noqa: E402

SKIP = 77
DEFAULT_TIMEOUT = 60  # seconds for one case, server start to both exits
READY_TIMEOUT = 20  # seconds for the server's "starting" line or control port
SETTLE = 0.5  # seconds between the server's "starting" line (or start) and the client
CONNECT_TRIES = 10
PAIR_TRIES = 3  # server and client started again together (stranded())
PACKAGES = {"rping": "rdmacm-utils", "ucmatose": "rdmacm-utils", "udaddy": "rdmacm-utils",
            "rdma_server": "rdmacm-utils", "rdma_client": "rdmacm-utils", "cmtime": "rdmacm-utils",
            "qperf": "qperf"}  # anything else: perftest
NUM = r"(?:\d+(?:\.\d+)?|-?inf|-?nan)"

# A line like these on either side fails the case whatever the exit codes say.
BAD_LINE = re.compile(r"^.*(couldn't|fail|\berror\b|unable|invalid|mismatch|not implemented|"
                      r"REJECTED|UNREACHABLE|RDMA_CM_EVENT_\w*ERROR|unexpected|bad event|"
                      r"wait for \w+ state).*$", re.I | re.M)
# How a client fails when the server does not listen yet: worth another try.
NOT_LISTENING = re.compile(r"REJECTED|UNREACHABLE|connection refused|Unable to connect|"
                           r"Failed to connect RDMA CM client|failed to connect", re.I)
# Lines naming softrdma (its librdmacm's ENOSYS notes, the device's errors).
SOFTRDMA_LINE = re.compile(r"^softrdma.*$", re.M)


# ---------------------------------------------------------------------------------------------
# The cases.

class Case:
    """One pair. SERVER and CLIENT are argv templates: {S} is the server's address, {P} a free
    port. READY: a regex of the server's output that says it is about to listen, "tcp" (it
    listens on TCP port {P}), or None (a pause). PERSISTENT: the server never exits on its
    own. CHECK(server_out, client_out) returns [(ok, what, detail)] beyond the EXPECT regexes.
    ALLOWED: regexes of lines BAD_LINE would catch that the program prints on success.
    SERVER_RUN, CLIENT_RUN: more `softrdma run` options for that side (--faults ...).
    In the templates {C} is the client's address and {G} a multicast group of the addresses'
    family. DAEMON: False when the pair has no daemon variant. NETNS: the pair runs only in a
    namespace of its own (run_in_namespace). VETH: the variants that also run there, "veth." on
    the veth pair's IPv4 addresses and "veth6." on its IPv6 ones (VETH_BOTH, VETH_IPV4)."""

    def __init__(self, name, server, client, server_expect=(), client_expect=(), ready=None, persistent=False,
                 check=None, allowed=(), timeout=DEFAULT_TIMEOUT, server_run=(), client_run=(), daemon=True,
                 netns=False, veth=()):
        self.name = name
        self.server_run = list(server_run)
        # A daemon variant, when no side injects faults and softrdmad serves what the pair uses
        # (srdmaiw0 with softrdmad --iwarp).
        self.iwarp = "--iwarp" in self.server_run
        self.on_daemon = daemon and all(option == "--iwarp" for option in self.server_run + list(client_run))
        self.netns = netns  # only on a veth pair in a namespace of its own (NETNS6_ADDR), IPv6
        self.veth = veth  # the VETH_PREFIXES it also runs under
        self.client_run = list(client_run)
        self.server = server
        self.client = client
        self.server_expect = list(server_expect)
        self.client_expect = list(client_expect)
        self.ready = ready
        self.persistent = persistent
        self.check = check
        self.allowed = [re.compile(a) for a in allowed]
        self.timeout = timeout

    @property
    def programs(self):
        return sorted({self.server[0], self.client[0]})


def rping_text(ping, size):
    """The string rping's client sends as ping PING of SIZE bytes (rping.c, rping_test_client):
    "rdma-ping-N: " and then letters from 'A' + N (wrapping after 'z' to 'A'), NUL at SIZE-1."""
    prefix = f"rdma-ping-{ping}: "
    c = 65 + ping % 58
    chars = []
    for _ in range(len(prefix), size - 1):
        chars.append(chr(c))
        c = 65 if c + 1 > 122 else c + 1
    return (prefix + "".join(chars))[:size - 1]


def rping_check(count, size=64):
    def check(server_out, client_out):
        results = []
        for role, out, prefix in (("server", server_out, "server ping data: "), ("client", client_out, "ping data: ")):
            lines = [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]
            want = [rping_text(i, size) for i in range(count)]
            wrong = [f"ping {i}: got {got!r}, want {w!r}" for i, (got, w) in enumerate(zip(lines, want)) if got != w]
            results.append((len(lines) == count, f"the {role} prints {count} ping lines (it printed {len(lines)})", ""))
            results.append((not wrong, f"the {role}'s ping lines hold the bytes rping sent", "\n".join(wrong[:5])))
        return results
    return check


def rping(name, args, count=100, size=64, **runs):
    common = ["-v", "-C", str(count), "-p", "{P}"] + (["-S", str(size)] if size != 64 else []) + args
    # On the client's disconnect the server's loop ends "waiting" in state 10 (DISCONNECTED),
    # which rping treats as success; both print their DISCONNECT EVENT.
    return Case(name, ["rping", "-s", "-a", "{S}"] + common, ["rping", "-c", "-a", "{S}"] + common,
                check=rping_check(count, size), allowed=[r"^wait for RDMA_READ_ADV state 10$"], **runs)


def cmatose(name, program, args=(), **opts):
    done = [r"^data transfers complete$", r"^test complete$", r"^return status 0$"]
    port = [] if program == "udaddy" else ["-p", "{P}"]  # udaddy's -p is the port space; it uses 7174
    starting = "cmatose" if program == "ucmatose" else program
    return Case(name, [program, *port, *args], [program, "-s", "{S}", *port, *args], done, done,
                ready=rf"^{starting}: starting server$", **opts)


CMTIME_STEPS = ["create id", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"]


def cmtime(name, connections):
    rows = [rf"^{step}\s*:\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}$" for step in CMTIME_STEPS]
    args = ["-p", "{P}"] + (["-c", str(connections)] if connections != 100 else [])
    # rdma-core 44's cmtime server serves until it is killed.
    return Case(name, ["cmtime", *args], ["cmtime", "-s", "{S}", *args], [],
                [r"^step\s+total ms\s+max ms\s+min us\s+us / conn$", *rows], persistent=True, timeout=90)


def perftest(name, program, args, size, iters, server_row=True, device="srdma0", **opts):
    """perftest with -R: no socket exchange, the RDMA CM connects the QPs (and carries their
    parameters). The row: #bytes #iterations and three numbers."""
    row = [rf"^\s*{size}\s+{iters}\s+{NUM}\s+{NUM}\s+{NUM}"]
    argv = [program, "-R", "-d", device, "-F", "-p", "{P}", *args, "-n", str(iters)]
    opts.setdefault("ready", r"Waiting for client to connect")
    return Case(name, argv, argv + ["{S}"], row if server_row else [], row, **opts)


def qperf(name, test, result, length=("-t", "2"), **opts):
    """LENGTH: how long the test runs, in seconds (-t) or messages (-n)."""
    # qperf's server serves until it is killed; the client's -lp names the server's port.
    opts["ready"] = "tcp"  # its control port, also on srdmaiw0
    return Case(name, ["qperf", "-lp", "{P}"], ["qperf", "{S}", "-lp", "{P}", "-cm1", *length, test],
                [], [rf"^{test}:$", result], persistent=True, **opts)


def mckey(name, sender_args=(), netns=False):
    """The receiver joins {G} from its address and waits for mckey's 10 datagrams; the sender
    joins from its own (or, with -o, as a send-only member) and sends them 3 s after its join,
    mckey's pause for a subnet manager."""
    joined = r"^mckey: joined dgid: (::ffff:239\.77\.\d+\.\d+|ff0e::77:40:1) mlid 0x0 sl 0$"
    done = [r"^data transfers complete$", r"^test complete$", r"^return status 0$"]
    return Case(name, ["mckey", "-m", "{G}", "-b", "{S}"], ["mckey", "-m", "{G}", "-s", "-b", "{C}", *sender_args],
                [joined, r"^receiving data transfers$", *done], [joined, r"^initiating data transfers$", *done],
                ready=r"^mckey: joined dgid", netns=netns)


# perftest -R and qperf -cm1 resolve the server's name for IPv4 only (their getaddrinfo hints
# say AF_INET): they have no veth6 variant.
VETH_BOTH = ("veth.", "veth6.")
VETH_IPV4 = ("veth.",)
# Both sides on srdmaiw0 (softrdma run --iwarp), whose connections rdma_cm makes over TCP and
# MPA; the daemon variants on softrdmad --iwarp's. An iWARP server listens on TCP port {P} once
# rdma_cm listens: the client starts then, not on a line printed before it.
IWARP = {"server_run": ["--iwarp"], "client_run": ["--iwarp"], "ready": "tcp"}

QPERF_BW = rf"^\s+bw\s+=\s+{NUM} [KMG]?B/sec$"
QPERF_MSG_RATE = rf"^\s+msg_rate\s+=\s+{NUM} [KM]?/sec$"
QPERF_LAT = rf"^\s+latency\s+=\s+{NUM} (ns|us|ms|sec)$"
QPERF_RECV_1000 = r"^\s+recv_msgs\s+=\s+1,000\s*$"

CASES = [
    # rping: RDMA READ of the client's buffer, RDMA WRITE back, 100 times; -V compares.
    rping("rping", []),
    rping("rping.validate", ["-V"], veth=VETH_BOTH),
    rping("rping.size_4096", ["-V"], size=4096),
    # -q: the programs create and move their QPs themselves (rdma_init_qp_attr, rdma_establish).
    rping("rping.self_qp", ["-V", "-q"]),
    # Lost CM MADs: the client's first REQ, or the server's first REP (each side's first packet
    # to QP1), is dropped by the fault stage; the REQ's resend after the response timeout (or
    # the REQ resent for want of a REP) still connects.
    rping("rping.lost_req", ["-V"], count=10, client_run=["--faults", "tx.qp=1,tx.drop=1"]),
    rping("rping.lost_rep", ["-V"], count=10, server_run=["--faults", "tx.qp=1,tx.drop=1"]),
    # ucmatose: RC SENDs over connected ids; -c several connections at once; -m moves the ids
    # to another event channel before disconnecting.
    cmatose("ucmatose", "ucmatose"),
    cmatose("ucmatose.c4", "ucmatose", ["-c", "4"], veth=VETH_BOTH),
    cmatose("ucmatose.c4_C100", "ucmatose", ["-c", "4", "-C", "100", "-S", "4096"]),
    cmatose("ucmatose.migrate", "ucmatose", ["-m"]),
    # udaddy: UD QPs and address handles from the CM (SIDR).
    cmatose("udaddy", "udaddy", veth=VETH_BOTH),
    cmatose("udaddy.c4", "udaddy", ["-c", "4"]),
    # rdma_server / rdma_client: the synchronous rdma_create_ep / rdma_get_request API.
    Case("rdma_server", ["rdma_server", "-s", "{S}", "-p", "{P}"], ["rdma_client", "-s", "{S}", "-p", "{P}"],
         [r"^rdma_server: end 0$"], [r"^rdma_client: end 0$"], ready=r"^rdma_server: start$", veth=VETH_BOTH),
    # cmtime: the time of each step for many connections.
    cmtime("cmtime", 100),
    cmtime("cmtime.c10", 10),
    # perftest -R.
    perftest("ib_send_bw.R", "ib_send_bw", ["-c", "RC", "-s", "65536"], 65536, 200, veth=VETH_IPV4),
    perftest("ib_send_bw.R_ud", "ib_send_bw", ["-c", "UD", "-s", "1024"], 1024, 200),
    perftest("ib_write_bw.R", "ib_write_bw", ["-s", "65536"], 65536, 200),
    perftest("ib_read_bw.R", "ib_read_bw", ["-s", "65536"], 65536, 200),
    perftest("ib_send_lat.R", "ib_send_lat", ["-s", "2"], 2, 500),
    perftest("ib_write_lat.R", "ib_write_lat", ["-s", "2"], 2, 500),
    perftest("ib_read_lat.R", "ib_read_lat", ["-s", "2"], 2, 500, server_row=False),  # the reader measures
    # qperf with the CM (-cm1; RC tests only: its UD tests build address handles from a LID
    # alone, which a RoCE port refuses with EINVAL, as the kernel's rdma_check_ah_attr does).
    qperf("qperf.rc_bw", "rc_bw", QPERF_BW, veth=VETH_IPV4),
    qperf("qperf.rc_bi_bw", "rc_bi_bw", QPERF_BW),
    qperf("qperf.rc_lat", "rc_lat", QPERF_LAT),
    qperf("qperf.rc_rdma_write_bw", "rc_rdma_write_bw", QPERF_BW),
    qperf("qperf.rc_rdma_read_bw", "rc_rdma_read_bw", QPERF_BW),
    qperf("qperf.rc_rdma_read_lat", "rc_rdma_read_lat", QPERF_LAT),
    qperf("qperf.rc_compare_swap_mr", "rc_compare_swap_mr", QPERF_MSG_RATE),
    qperf("qperf.ver_rc_fetch_add", "ver_rc_fetch_add", QPERF_MSG_RATE),
    # The iWARP device: rping, perftest -R and qperf -cm1's RC tests but those that need RDMA
    # Write with Immediate or atomics, which RDMAP (RFC 5040) does not have. rc_bw sends 1000
    # messages, fewer than the 1024 receives its server posts: timed, its server stops posting
    # when its own clock ends the test, and a Send that then finds no receive is a Terminate
    # (RFC 5041 s7.2: no buffer available); iWARP has no RNR NAK to hold the client back.
    rping("iwarp.rping", [], **IWARP),
    rping("iwarp.rping.validate", ["-V"], veth=VETH_BOTH, daemon=False, **IWARP),
    rping("iwarp.rping.size_4096", ["-V"], size=4096, daemon=False, **IWARP),
    perftest("iwarp.ib_send_bw.R", "ib_send_bw", ["-c", "RC", "-s", "65536"], 65536, 200, device="srdmaiw0", veth=VETH_IPV4,
             **IWARP),
    perftest("iwarp.ib_write_bw.R", "ib_write_bw", ["-s", "65536"], 65536, 200, device="srdmaiw0", veth=VETH_IPV4,
             **IWARP),
    perftest("iwarp.ib_read_bw.R", "ib_read_bw", ["-s", "65536"], 65536, 200, device="srdmaiw0", veth=VETH_IPV4,
             **IWARP),
    perftest("iwarp.ib_send_lat.R", "ib_send_lat", ["-s", "2"], 2, 500, device="srdmaiw0", veth=VETH_IPV4, **IWARP),
    perftest("iwarp.ib_write_lat.R", "ib_write_lat", ["-s", "2"], 2, 500, device="srdmaiw0", veth=VETH_IPV4, **IWARP),
    qperf("iwarp.qperf.rc_lat", "rc_lat", QPERF_LAT, veth=VETH_IPV4, **IWARP),
    # -n 1000: fewer SENDs than the server's receives (above). Moving 65.5 MB can take less
    # than the 10 ms tick qperf times with, and then its bw reads 0: -vvs's count is checked.
    qperf("iwarp.qperf.rc_bw", "rc_bw", QPERF_RECV_1000, length=("-n", "1000", "-vvs"), veth=VETH_IPV4, **IWARP),
    qperf("iwarp.qperf.rc_rdma_read_bw", "rc_rdma_read_bw", QPERF_BW, veth=VETH_IPV4, **IWARP),
    # mckey: UD multicast through rdma_join_multicast_ex; -o joins the sender to send only.
    mckey("mckey"),
    mckey("mckey.send_only", ["-o"]),
    mckey("mckey.ipv6", netns=True),
]


# ---------------------------------------------------------------------------------------------
# Running one case.

class Side(ProgramSide):
    """One program, its stdout/stderr in files; a server that never exits on its own is stopped."""

    def __init__(self, role, argv, workdir, tag):
        super().__init__(role, argv, workdir, tag)
        self.stopped = False

    def stop(self):
        self.kill()

    def report(self, limit=4000):
        out, err = self.output()
        if self.timed_out:
            status = "killed at the timeout"
        elif self.stopped:
            status = f"stopped after the client ({self.proc.returncode})"
        else:
            status = self.proc.returncode
        notes = SOFTRDMA_LINE.findall(out + "\n" + err)
        return (f"--- {self.role}: {' '.join(self.argv)}\n--- {self.role} exit: {status}\n"
                + (f"--- {self.role} softrdma says:\n" + "\n".join(notes[:10]) + "\n" if notes else "")
                + f"--- {self.role} stdout:\n{out.rstrip()[-limit:]}\n--- {self.role} stderr:\n{err.rstrip()[-limit:]}")


def free_loopback_pair():
    """A 127.77.X.1 / 127.77.X.2 pair, X from 100 to 254, held for this process (reserve())."""
    for x in random.sample(range(100, 255), 155):
        pair = (f"127.77.{x}.1", f"127.77.{x}.2")
        if reserve(pair):
            return pair
    raise RuntimeError("no free 127.77.X.1/2 pair")


# Tests running at once pick their addresses here: a lock file per pair, held until the
# process exits, so that no two take the same pair between the check and their devices' bind.
RESERVATIONS = os.path.join(tempfile.gettempdir(), "softrdma-test-addresses")
_reserved = []


def reserve(pair):
    """True when PAIR's UDP port 4791 is free on both addresses and no other test holds the
    pair; it is then this process's until it exits."""
    os.makedirs(RESERVATIONS, exist_ok=True)
    fd = os.open(os.path.join(RESERVATIONS, "-".join(pair)), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    if not all(udp_free(a) for a in pair):
        os.close(fd)
        return False
    _reserved.append(fd)
    return True


def udp_free(addr, port=4791):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((addr, port))
            return True
        except OSError:
            return False


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


class Outcome:
    def __init__(self, name):
        self.name = name
        self.failures = []
        self.skipped = None

    def check(self, ok, what, detail=""):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)
            if detail:
                print("     " + detail.replace("\n", "\n     "), flush=True)
        return ok


def start_daemon(address, workdir, tag, result, options=()):
    """softrdmad on ADDRESS, with OPTIONS, its socket in WORKDIR: (the Side, the socket), or
    (None, None)."""
    softrdmad = os.environ.get("SOFTRDMAD", "")
    if not os.path.exists(softrdmad):
        result.skipped = f"softrdmad is not at '{softrdmad}' (set SOFTRDMAD)"
        print(f"SKIPPED: {result.skipped}", flush=True)
        return None, None
    sock = os.path.join(workdir, f"{tag}.sock")
    daemon = Side("softrdmad", [softrdmad, "--ip", address, "--socket", sock, *options], workdir, tag)
    deadline = time.monotonic() + READY_TIMEOUT
    while not os.path.exists(sock) and daemon.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not result.check(os.path.exists(sock), f"softrdmad listens on {sock}", daemon.report()):
        daemon.kill()
        return None, None
    return daemon, sock


def stop_daemon(daemon, result):
    daemon.proc.terminate()
    try:
        rc = daemon.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        daemon.kill()
        rc = None
    result.check(rc == 0, "softrdmad exits 0 on SIGTERM", daemon.report())


def fill(template, server_ip, port, client_ip="", group=""):
    return [a.replace("{S}", server_ip).replace("{P}", str(port)).replace("{C}", client_ip).replace("{G}", group)
            for a in template]


def multicast_group(address):
    """A group of ADDRESS's family: a random 239.77.X.Y (no other run shares it), ff0e::77:40:1
    (in a namespace of its own)."""
    return "ff0e::77:40:1" if ":" in address else f"239.77.{random.randint(1, 254)}.{random.randint(1, 254)}"


# The namespace of a NETNS or VETH case: the two ends of a veth pair, with one address of each
# family each.
NETNS4_ADDR = ("10.78.0.1", "10.78.0.2")
NETNS6_ADDR = ("fd77:40::1", "fd77:40::2")
VETH_PREFIXES = {"veth.": NETNS4_ADDR, "veth6.": NETNS6_ADDR}
NETNS_VETH = ("srdmc0", "srdmc1")
INSIDE_NETNS = "SOFTRDMA_PAIRS_IN_NETNS"  # set in the namespace run_in_namespace makes


def run_in_namespace(name, inner_name, addresses, softrdma, timeout, case_timeout):
    """Runs the case INNER_NAME of this driver again, as NAME, in a network namespace of its own
    (unshare, as root of a user namespace where not root), its two sides on ADDRESSES: the
    namespace's exit status is the case's outcome."""
    result = Outcome(name)
    if shutil.which("ip") is None:
        result.skipped = "the ip command is missing (apt-get install iproute2)"
    elif subprocess.run(["unshare", "--net", "--map-root-user", "true"], capture_output=True).returncode != 0:
        result.skipped = "cannot create a network namespace here (needs root or unprivileged user namespaces)"
    if result.skipped:
        print(f"SKIPPED: {result.skipped}", flush=True)
        return result
    ends = [(NETNS_VETH[i], NETNS4_ADDR[i], NETNS6_ADDR[i]) for i in (0, 1)]
    setup = (f"ip link set lo up && ip link add {NETNS_VETH[0]} type veth peer name {NETNS_VETH[1]} && "
             + "".join(f"ip addr add {v4}/24 dev {dev} && ip -6 addr add {v6}/64 dev {dev} nodad && "
                       for dev, v4, v6 in ends)
             + f"ip link set {NETNS_VETH[0]} up && ip link set {NETNS_VETH[1]} up && "
             f"until ip link show {NETNS_VETH[1]} | grep -q LOWER_UP; do sleep 0.05; done && "
             'exec "$@"')
    argv = [sys.executable, os.path.abspath(sys.argv[0]), "--server-ip", addresses[0], "--client-ip", addresses[1],
            *(["--timeout", str(timeout)] if timeout else []), softrdma, inner_name]
    inner = subprocess.run(["unshare", "--net", "--map-root-user", "sh", "-c", setup, "in_netns", *argv],
                           env={**os.environ, INSIDE_NETNS: "1"}, timeout=(timeout or case_timeout) + 30)
    if inner.returncode == SKIP:
        result.skipped = "skipped inside the namespace"
    else:
        result.check(inner.returncode == 0, f"the case passes in its namespace (exit {inner.returncode})")
    return result


def wait_ready(case, server, port, deadline):
    """Until the server is about to listen (its READY line or TCP port), or a pause without one.
    False when it exited or never got there."""
    if case.ready is None:
        until = min(deadline, time.monotonic() + SETTLE * 2)
        while server.alive() and time.monotonic() < until:
            time.sleep(0.05)
        return server.alive()
    until = min(deadline, time.monotonic() + READY_TIMEOUT)
    pattern = None if case.ready == "tcp" else re.compile(case.ready, re.M)
    # On softrdmad the daemon holds the listening socket for its client.
    on_daemon = any(a.startswith("--daemon") for a in server.argv)
    while server.alive() and time.monotonic() < until:
        if pattern is None:
            if listens(server.pid, port, owned=not on_daemon):
                return True
        else:
            out, err = server.output()
            if pattern.search(out) or pattern.search(err):
                time.sleep(SETTLE)  # printed just before it binds and listens
                return server.alive()
        time.sleep(0.05)
    return False


def run_case(case, softrdma, server_ip, client_ip, timeout, workdir, on_daemon=False):
    name = f"daemon.{case.name}" if on_daemon else case.name
    if case.netns and not os.environ.get(INSIDE_NETNS):
        return run_in_namespace(name, name, NETNS6_ADDR, softrdma, timeout, case.timeout)
    result = Outcome(name)
    for program in case.programs:
        if not os.path.exists(f"/usr/bin/{program}"):
            result.skipped = f"/usr/bin/{program} is not installed (apt-get install {PACKAGES.get(program, 'perftest')})"
            print(f"SKIPPED: {result.skipped}", flush=True)
            return result
    run_attached(result, on_daemon, server_ip, client_ip, workdir,
                 lambda server_attach, client_attach: run_pair(
                     case, result, softrdma, server_attach, client_attach, server_ip, timeout, workdir,
                     client_ip=server_ip if on_daemon else client_ip),
                 daemon_options=["--iwarp"] if case.iwarp else [])
    return result


def run_attached(result, on_daemon, server_ip, client_ip, workdir, run, daemon_options=()):
    """RUN(server_attach, client_attach) with the `softrdma run` options that give each side a
    device of its own on its address or, ON_DAEMON, one softrdmad (with DAEMON_OPTIONS) on the
    server's for both."""
    if not on_daemon:
        run(["--ip", server_ip], ["--ip", client_ip])
        return
    daemon, sock = start_daemon(server_ip, workdir, result.name, result, daemon_options)
    if daemon is None:
        return
    try:
        run([f"--daemon={sock}"], [f"--daemon={sock}"])
    finally:
        stop_daemon(daemon, result)


def run_pair(case, result, softrdma, server_attach, client_attach, server_ip, timeout, workdir, client_ip):
    deadline = time.monotonic() + (timeout or case.timeout)
    stats = {side: os.path.join(workdir, f"{case.name}.{side}.stats.json") for side in ("server", "client")}
    for pair_try in range(PAIR_TRIES):
        port = free_port()
        group = multicast_group(server_ip)
        server_argv = [softrdma, "run", *server_attach, *faulted(case.server_run, stats["server"]), "--"] + \
            fill(case.server, server_ip, port, client_ip, group)
        client_argv = [softrdma, "run", *client_attach, *faulted(case.client_run, stats["client"]), "--"] + \
            fill(case.client, server_ip, port, client_ip, group)
        print(f"server: {' '.join(server_argv)}\nclient: {' '.join(client_argv)}", flush=True)
        server, client, ready = connect_pair(case, server_argv, client_argv, port, workdir, deadline,
                                             f"{case.name}.{pair_try}")
        if pair_try == PAIR_TRIES - 1 or not stranded(case, client):
            break
        print("note: the client was refused by a server that had been listening; starting both again",
              flush=True)
        server.kill()
    result.check(ready, "the server starts and gets ready to listen"
                 + ("" if server.alive() else " (it exited first)"))
    if case.persistent:
        still = server.alive()
        result.check(still or not ready, "the server still serves when the client is done")
        server.stopped = still
        server.stop()
    else:
        server.wait(min(deadline, time.monotonic() + 20) if not client.timed_out else time.monotonic())

    judge(case, result, server, client)
    for side, runopts in (("server", case.server_run), ("client", case.client_run)):
        if "--faults" in runopts:
            judge_faults(result, side, stats[side])
    if result.failures:
        print(server.report())
        print(client.report(), flush=True)


def connect_pair(case, server_argv, client_argv, port, workdir, deadline, tag):
    """Starts the server and, once it is ready, the client, again while the client finds no
    listener; (server, client, whether the server got ready)."""
    server = Side("server", server_argv, workdir, tag)
    ready = wait_ready(case, server, port, deadline)

    def refused(output):
        return server.alive() and NOT_LISTENING.search(output)

    # A TCP-ready server that refused its client is in a state no second client can fix.
    tries = CONNECT_TRIES if ready and case.ready != "tcp" else 1
    client = run_client(lambda attempt: Side("client", client_argv, workdir, f"{tag}.{attempt}"), tries, deadline,
                        refused)
    return server, client, ready


def stranded(case, client):
    """Whether a TCP-ready server's client was refused: perftest -R on iWARP connects twice to
    one port, and its server stops listening between the two, so a SYN in that gap is refused
    (as the kernel refuses it to siw). The server then waits for a client that is gone, or,
    listening again, would take a new client's first connection for the old one's second: only
    a new pair can go on from there."""
    if case.ready != "tcp" or client.timed_out or client.proc.returncode == 0:
        return False
    out, err = client.output()
    return NOT_LISTENING.search(out + err) is not None


def faulted(runopts, stats_path):
    """A side's run options, with --stats when it injects faults (judge_faults reads them)."""
    return runopts + ["--stats", stats_path] if "--faults" in runopts else runopts


def judge_faults(result, side, stats_path):
    """The scripted drop happened, and QP1 resent a MAD for it: the case tested a loss."""
    try:
        with open(stats_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        result.check(False, f"the {side}'s --stats report is readable", str(e))
        return
    dropped = report.get("faults", {}).get("tx", {}).get("dropped_nth", 0)
    resent = report.get("cm", {}).get("mads_resent", 0)
    result.check(dropped >= 1 and resent >= 1, f"the {side} dropped a CM MAD and QP1 resent one",
                 f"dropped_nth={dropped} mads_resent={resent}")


def judge(case, result, server, client):
    result.check(not server.timed_out and not client.timed_out, "both programs end within the timeout")
    if not case.persistent:
        result.check(server.proc.returncode == 0, "the server exits 0")
    result.check(client.proc.returncode == 0, "the client exits 0")
    server_out, server_err = server.output()
    client_out, client_err = client.output()
    for side, out, err, expect in (("server", server_out, server_err, case.server_expect),
                                   ("client", client_out, client_err, case.client_expect)):
        for pattern in expect:
            m = re.search(pattern + r".*$", out, re.M)
            if result.check(m is not None, f"the {side} prints a line matching {pattern!r}"):
                print(f"       {m.group(0).strip()}")
        bad = [m.group(0) for m in BAD_LINE.finditer(out + "\n" + err)
               if not any(a.search(m.group(0)) for a in case.allowed)]
        result.check(not bad, f"the {side} prints no error line", "\n".join(bad[:10]))
    if case.check is not None:
        for ok, what, detail in case.check(server_out, client_out):
            result.check(ok, what, detail)


# ---------------------------------------------------------------------------------------------

def drive(argv, cases, run, doc, prefix, free_pair=free_loopback_pair):
    """The command line both pair drivers share: --list, options, CASE... or all; RUN(case,
    softrdma, server_ip, client_ip, timeout, workdir, on_daemon=) runs one of CASES, on
    FREE_PAIR()'s addresses unless the options give them."""
    args = argv[1:]
    by_name = {c.name: c for c in cases}
    by_name.update({f"daemon.{c.name}": c for c in cases if c.on_daemon})
    by_name.update({f"{prefix}{c.name}": c for prefix in VETH_PREFIXES for c in cases if prefix in c.veth})
    if args == ["--list"]:
        print("\n".join(by_name))
        return 0
    server_ip = client_ip = None
    timeout = None
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt in ("--server-ip", "--client-ip", "--timeout") and args:
            value = args.pop(0)
            if opt == "--server-ip":
                server_ip = value
            elif opt == "--client-ip":
                client_ip = value
            else:
                timeout = float(value)
        else:
            print(doc, file=sys.stderr)
            return 2
    if len(args) < 2:
        print(doc, file=sys.stderr)
        return 2
    softrdma, names = args[0], args[1:]
    if names == ["all"]:
        names = list(by_name)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f"unknown case(s) {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 2
    if server_ip is None or client_ip is None:
        pair = free_pair()
        server_ip = server_ip or pair[0]
        client_ip = client_ip or pair[1]

    results = []
    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        for name in names:
            print(f"=== {name}", flush=True)
            case = by_name[name]
            veth = next((p for p in VETH_PREFIXES if name.startswith(p)), None)
            try:
                if veth is not None:
                    results.append(run_in_namespace(name, case.name, VETH_PREFIXES[veth], softrdma, timeout,
                                                    case.timeout))
                else:
                    results.append(run(case, softrdma, server_ip, client_ip, timeout, work,
                                       on_daemon=name.startswith("daemon.")))
            except subprocess.TimeoutExpired as e:
                r = Outcome(name)
                r.check(False, f"timed out after {e.timeout}s: {' '.join(map(str, e.cmd))}")
                results.append(r)

    passed = [r.name for r in results if not r.failures and not r.skipped]
    failed = [r.name for r in results if r.failures]
    skipped = [r.name for r in results if r.skipped]
    print(f"=== {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped"
          + (f"; failed: {' '.join(failed)}" if failed else "")
          + (f"; skipped: {' '.join(skipped)}" if skipped else ""))
    if failed:
        return 1
    return SKIP if skipped and not passed else 0


def main(argv):
    return drive(argv, CASES, run_case, __doc__, "softrdma-rdmacm-")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
