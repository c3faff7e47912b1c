#!/usr/bin/env python3
"""Unmodified Debian RDMA programs in server + client PAIRS on softrdma's libibverbs.so.1.

usage: program_pairs_test.py --list
       program_pairs_test.py TEST SOFTRDMA [TSHARK_VALIDATE]

TEST is one name printed by --list; CMake makes one ctest of each (shim.pairs.TEST):

  loop.NAME     the pair NAME on one machine: both programs through `softrdma run` with no
                address, so each binds the first free 127.0.0.N:4791, and the client reaches
                the server's TCP port on 127.0.0.1.
  netns.NAME    the pair NAME on two "hosts": two network namespaces this test creates,
                joined by a veth pair (10.77.0.1/24 and 10.77.0.2/24, MTU 1500, so the
                device's active MTU is 1024); the programs run with `softrdma run --ip`.
  daemon.NAME   a loop pair on one softrdmad (both programs with `softrdma run --daemon`, so
                they share its device and address); softrdmad must then exit 0 on SIGTERM.
                The daemon is $SOFTRDMAD (CMake sets it).
  daemons.NAME  a netns pair (DAEMON_NETNS_PAIRS) with one softrdmad on each "host", on the
                veth's addresses; the programs attach to their host's daemon.
  afpacket.NAME the same with both daemons on the dpdk backend: each owns its end of a second
  afxdp.NAME    veth pair, which has no kernel address (net_af_packet or net_af_xdp, EAL with
                --no-huge), at 10.77.1.1 and 10.77.1.2, answering ARP itself; the programs'
                TCP exchange stays on the first pair. afxdp.NAME skips where the kernel refuses
                an XDP socket.
  afpacket6.NAME afpacket.NAME with the daemons at fd77:1::1 and fd77:1::2 (IPv6, neighbour
                discovery instead of ARP; the programs' GID 0 is then that address), for a few
                pairs (DPDK_IPV6_PAIRS). The kernel's own IPv6 on the data veth (its link-local
                address, router solicitations, MLD) must reach the daemons as "not ours".
  afpacketrouted.NAME afpacket.NAME with the daemons on two subnets (10.77.1.1/24 and
                10.77.2.1/24) and a third namespace between them that routes (the kernel's IPv4
                forwarding): each daemon sends to its --gateway, whose MAC it learns by ARP.
  afpacketmq.NAME afpacket.NAME with two queue pairs on each port (qpairs=2, --dpdk-queues 2),
                for DPDK_MQ_PAIRS: the kernel's fanout spreads the QPs' flows (a UDP source
                port each) over both sockets, and both queues must have received frames.
  capture.NAME  a netns pair (--no-gso) while tcpdump records the veth (udp port 4791); the file must
                pass TSHARK_VALIDATE (SOFTRDMA_SHARED_DIR/tools/tshark-validate.sh) and
                `softrdma dump --check`, and hold RoCE packets.

The pairs are the table PAIRS below: one row per pair, the arguments both sides get (the
client adds the server's address), and the regexes each side's stdout must match. A pair
passes when both programs exit 0 within the timeout, print their result lines (pingpong:
"N bytes in X seconds" and "N iters in"; perftest: its result-table row) and print no
"Couldn't" / "failed" / "error" / "Unable" / "invalid data" line. On failure both sides'
command lines, exit codes, stdout and stderr are printed, and always the kernel's UDP drop
counters over the pair (UC/UD lose a message for every dropped datagram). The pingpongs' -c
compares only the first byte of each page of the last message; the capture check covers the
rest of the wire: every SEND packet present, cut at the path MTU, with good ICRCs.

Each pair uses its own TCP port for the out-of-band exchange (a free port from the kernel,
retried if the server cannot listen on it), the server starts first and the client starts
once the server's socket is in LISTEN (read from /proc/PID/net/tcp*, so no probe connection
consumes the server's one accept). Exit 77 (ctest's SKIP_RETURN_CODE) when a program or tool
is not installed or when network namespaces cannot be created; every process has a timeout
and dies with this script.
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
DEVICE = "srdma0"
PAIR_TIMEOUT = 60  # seconds for one pair, server start to both exits (ctest's TIMEOUT is 120)
LISTEN_TIMEOUT = 20  # seconds for the server to reach LISTEN
NETNS_ADDR = ("10.77.0.1", "10.77.0.2")  # server, client; only ever inside the namespaces made here
VETH = ("srdmaA", "srdmaB")  # server's end, client's end
VETH_MTU = 1500
DATA_VETH = ("srdmaDA", "srdmaDB")  # the dpdk daemons' wire: no kernel address on it
DPDK_ADDR = ("10.77.1.1", "10.77.1.2")
DPDK_ADDR6 = ("fd77:1::1", "fd77:1::2")  # afpacket6's; unique-local (RFC 4193), only inside the namespaces
DPDK_PMDS = {"afpacket": "net_af_packet", "afxdp": "net_af_xdp", "afpacket6": "net_af_packet",
             "afpacketmq": "net_af_packet", "afpacketrouted": "net_af_packet"}
DPDK_ROUTED_MODES = {"afpacketrouted"}
# afpacketrouted's subnets: each daemon's address, and the router's on the same subnet.
ROUTED_ADDR = ("10.77.1.1", "10.77.2.1")
ROUTER_ADDR = ("10.77.1.254", "10.77.2.254")
ROUTER_VETH = ("srdmaRA", "srdmaRB")  # the router's ends of the two data links
DPDK_IPV6_MODES = {"afpacket6"}
DPDK_MQ_MODES = {"afpacketmq"}
# What EAL needs here: no hugepages, PCI or shared config (two daemons side by side), and the
# pool's 32 MiB (net/dpdk_backend.cpp).
EAL_ARGS = "-l 0 --no-huge -m 128 --no-pci --no-shconf --no-telemetry"
NETNS_ACTIVE_MTU = 1024  # what the device reports on a 1500-byte interface (verbs-shim/README.md)

PACKAGES = {
    "ibv_rc_pingpong": "ibverbs-utils", "ibv_uc_pingpong": "ibverbs-utils", "ibv_ud_pingpong": "ibverbs-utils",
    "ibv_srq_pingpong": "ibverbs-utils", "ibv_xsrq_pingpong": "ibverbs-utils", "ucx_info": "ucx-utils",
    "ucx_perftest": "ucx-utils",
}

# A line like these on either side fails the pair whatever the exit codes say (rc_pingpong -c
# prints "invalid data in page N" and still exits 0).
BAD_LINE = re.compile(r"^.*(couldn't|failed|\berror\b|unable to|invalid data|requested size larger).*$",
                      re.I | re.M)
NUM = r"(?:\d+(?:\.\d+)?|-?inf|-?nan)"


# ---------------------------------------------------------------------------------------------
# The table.

class Pair:
    """One server + client pair: argv = PROGRAM + common options + ARGS (+ the server's address
    for the client); each side's stdout must match every regex of its list."""

    def __init__(self, name, program, args, server_expect, client_expect, modes=("loop", "netns"), netns_args=None,
                 netns_expect=None, judge=None):
        self.name = name
        self.program = program
        self.args = list(args)
        self.netns_args = list(netns_args) if netns_args is not None else list(args)
        self.server_expect = server_expect
        self.client_expect = client_expect
        self.modes = modes
        self.netns_expect = netns_expect  # both sides' regexes in the namespaces, when they differ
        self.judge = judge  # judge(stdout) -> [(ok, what)], further checks of each side's output

    def argv(self, mode, port, server_host=None):
        if self.program.startswith("ibv_"):
            common = [self.program, "-d", DEVICE, "-g", "0", "-p", str(port)]
        else:  # perftest; -F: no failure on the CPU frequency warning
            common = [self.program, "-d", DEVICE, "-x", "0", "-F", "-p", str(port)]
        args = self.args if mode == "loop" else self.netns_args
        return common + args + ([server_host] if server_host else [])


def pingpong_lines(size, iters):
    # rdma-core's examples print bytes = size * iters * 2 (both directions).
    lines = [rf"^{size * iters * 2} bytes in \d+\.\d+ seconds = {NUM} Mbit/sec$",
             rf"^{iters} iters in \d+\.\d+ seconds = {NUM} usec/iter$"]
    return lines


def pingpong(name, program, args, size, iters, modes=("loop", "netns"), netns_args=None, netns_size=None):
    return Pair(name, program, args, pingpong_lines(size, iters), pingpong_lines(size, iters), modes, netns_args,
                pingpong_lines(netns_size, iters) if netns_size is not None else None)


def timestamps_match_iterations(out):
    """ibv_rc_pingpong -t: the mean gap between receive completions, in cycles of the
    hca_core_clock the device reports (1 GHz), is about the mean iteration it timed itself."""
    avg = re.search(rf"^Average receive completion clock cycles = ({NUM})$", out, re.M)
    per_iter = re.search(rf"^\d+ iters in \d+\.\d+ seconds = ({NUM}) usec/iter$", out, re.M)
    if not avg or not per_iter:
        return [(False, "both the average completion gap and usec/iter are printed")]
    ratio = float(avg.group(1)) / 1000 / float(per_iter.group(1))
    return [(0.5 <= ratio <= 2, f"the average completion gap is 0.5-2x usec/iter ({ratio:.2f}x)")]


def perftest_row(size, iters):
    # The result-table row: #bytes #iterations and at least three numbers (BW peak, average,
    # message rate; or t_min, t_max, t_typical, ...).
    return [rf"^\s*{size}\s+{iters}\s+{NUM}\s+{NUM}\s+{NUM}"]


def perftest(name, program, args, size, iters, server_row=True):
    """Latency tests whose server only answers (read, atomic) print no row on the server."""
    row = perftest_row(size, iters)
    return Pair(name, program, args + ["-n", str(iters)], row if server_row else [], row)


# ibv_xsrq_pingpong prints both ends' numbers, then "success" when every receive completed.
XSRQ_LINES = [rf"^\s*{who}: LID [0-9a-f]{{4}}, QPN RECV [0-9a-f]{{6}} SEND [0-9a-f]{{6}}, PSN [0-9a-f]{{6}}, "
              r"SRQN [0-9a-f]{6}" for who in ("local", "remote")] + [r"^success$"]
TIMESTAMP_LINES = [rf"^{w} receive completion clock cycles = [1-9]" for w in ("Max", "Min", "Average")]
RC_SIZES = [1, 100, 4097, 65536, 1 << 20]
MTUS = [256, 512, 1024, 2048, 4096]
BW_ITERS, LAT_ITERS = 200, 500

PAIRS = [
    # rdma-core's pingpongs (ibverbs-utils): -n 100 exchanges of 4096 bytes unless told.
    pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", ["-n", "100"], 4096, 100),
    pingpong("ibv_rc_pingpong.chk", "ibv_rc_pingpong", ["-c", "-n", "100"], 4096, 100),
    pingpong("ibv_rc_pingpong.events", "ibv_rc_pingpong", ["-e", "-c", "-n", "100"], 4096, 100),
    pingpong("ibv_rc_pingpong.new_send", "ibv_rc_pingpong", ["-N", "-c", "-n", "100"], 4096, 100),
    # -t: an extended CQ with completion timestamps; each side prints the gaps between its
    # receive completions in core clock cycles.
    Pair("ibv_rc_pingpong.timestamps", "ibv_rc_pingpong", ["-t", "-c", "-n", "200"],
         pingpong_lines(4096, 200) + TIMESTAMP_LINES, pingpong_lines(4096, 200) + TIMESTAMP_LINES, modes=("loop",),
         judge=timestamps_match_iterations),
]
for _size in RC_SIZES:
    _iters = 20 if _size >= (1 << 20) else 100
    PAIRS.append(pingpong(f"ibv_rc_pingpong.size_{_size}", "ibv_rc_pingpong",
                          ["-c", "-s", str(_size), "-n", str(_iters)], _size, _iters))
for _mtu in MTUS:
    # 8 KiB messages: 2 to 32 packets each at this path MTU. Over the veth the active MTU is
    # 1024, so the larger path MTUs run on loopback only.
    PAIRS.append(pingpong(f"ibv_rc_pingpong.mtu_{_mtu}", "ibv_rc_pingpong",
                          ["-c", "-m", str(_mtu), "-s", "8192", "-n", "100"], 8192, 100,
                          modes=("loop", "netns") if _mtu <= NETNS_ACTIVE_MTU else ("loop",)))
PAIRS += [
    pingpong("ibv_uc_pingpong.chk", "ibv_uc_pingpong", ["-c", "-n", "100"], 4096, 100),
    # UD: a message is one packet, and the receive buffer holds the 40-byte GRH too:
    # -s <= active MTU - 40. The default 2048 fits loopback's 4096; the veth's 1024 needs 984.
    pingpong("ibv_ud_pingpong.chk", "ibv_ud_pingpong", ["-c", "-s", "2048", "-n", "100"], 2048, 100,
             netns_args=["-c", "-s", str(NETNS_ACTIVE_MTU - 40), "-n", "100"], netns_size=NETNS_ACTIVE_MTU - 40),
    pingpong("ibv_srq_pingpong.chk", "ibv_srq_pingpong", ["-c", "-n", "100"], 4096, 100),
    # XRC: each side's initiator sends into the peer's XRC SRQ through the peer's target QP;
    # "success" only after every exchange completed without an error status.
    Pair("ibv_xsrq_pingpong", "ibv_xsrq_pingpong", ["-n", "100"], XSRQ_LINES, XSRQ_LINES),
    Pair("ibv_xsrq_pingpong.events", "ibv_xsrq_pingpong", ["-e", "-n", "100"], XSRQ_LINES, XSRQ_LINES,
         modes=("loop",)),

    # perftest: RC, and UC / UD where the test allows them.
    perftest("ib_send_bw.rc", "ib_send_bw", ["-c", "RC", "-s", "65536"], 65536, BW_ITERS),
    # UC and UD: nothing retransmits, and the server waits for every message. 50 x 64 KiB (and
    # 200 x 1 KiB) fit the engine's socket receive buffer whole, so a receiver kept off the CPU
    # loses nothing; 200 x 64 KiB overflowed it under load and hung the server (RcvbufErrors).
    perftest("ib_send_bw.uc", "ib_send_bw", ["-c", "UC", "-s", "65536"], 65536, 50),
    perftest("ib_send_bw.ud", "ib_send_bw", ["-c", "UD", "-s", "1024"], 1024, BW_ITERS),
    perftest("ib_send_lat.rc", "ib_send_lat", ["-c", "RC", "-s", "2"], 2, LAT_ITERS),
    perftest("ib_send_lat.uc", "ib_send_lat", ["-c", "UC", "-s", "2"], 2, LAT_ITERS),
    perftest("ib_send_lat.ud", "ib_send_lat", ["-c", "UD", "-s", "2"], 2, LAT_ITERS),
    perftest("ib_write_bw.rc", "ib_write_bw", ["-c", "RC", "-s", "65536"], 65536, BW_ITERS),
    perftest("ib_write_bw.uc", "ib_write_bw", ["-c", "UC", "-s", "65536"], 65536, BW_ITERS),
    # 16 QPs, -n each: perftest's row counts them all.
    Pair("ib_write_bw.rc_16qp", "ib_write_bw", ["-c", "RC", "-s", "65536", "-q", "16", "-n", str(BW_ITERS)],
         perftest_row(65536, 16 * BW_ITERS), perftest_row(65536, 16 * BW_ITERS)),
    perftest("ib_write_lat.rc", "ib_write_lat", ["-c", "RC", "-s", "2"], 2, LAT_ITERS),
    perftest("ib_write_lat.uc", "ib_write_lat", ["-c", "UC", "-s", "2"], 2, LAT_ITERS),
    perftest("ib_read_bw.rc", "ib_read_bw", ["-c", "RC", "-s", "65536"], 65536, BW_ITERS),
    perftest("ib_read_lat.rc", "ib_read_lat", ["-c", "RC", "-s", "2"], 2, LAT_ITERS, server_row=False),
    perftest("ib_atomic_bw.fetch_add", "ib_atomic_bw", ["-A", "FETCH_AND_ADD"], 8, BW_ITERS),
    perftest("ib_atomic_bw.cmp_swap", "ib_atomic_bw", ["-A", "CMP_AND_SWAP"], 8, BW_ITERS),
    perftest("ib_atomic_lat.fetch_add", "ib_atomic_lat", ["-A", "FETCH_AND_ADD"], 8, LAT_ITERS, server_row=False),
    perftest("ib_atomic_lat.cmp_swap", "ib_atomic_lat", ["-A", "CMP_AND_SWAP"], 8, LAT_ITERS, server_row=False),
]

# Pairs run between two daemons in two namespaces (daemons.NAME): one of each kind of traffic.
DAEMON_NETNS_PAIRS = ["ibv_rc_pingpong.chk", "ibv_ud_pingpong.chk", "ibv_srq_pingpong.chk", "ib_write_bw.rc",
                      "ib_read_bw.rc", "ib_send_lat.rc", "ib_atomic_bw.fetch_add"]
# Between dpdk daemons on IPv6 addresses: RC, UD (whose GRH carries the IPv6 header) and bulk
# RDMA WRITE.
DPDK_IPV6_PAIRS = ["ibv_rc_pingpong.chk", "ibv_ud_pingpong.chk", "ib_write_bw.rc"]
# Through a router: perftest, whose address vectors carry hop limit 255. The ibv_*_pingpong
# examples set hop limit 1, which becomes the IPv4 TTL (annex A17.4.3), and a router drops
# them as a NIC's would be dropped (the router's InHdrErrors count them).
DPDK_ROUTED_PAIRS = ["ib_write_bw.rc", "ib_read_bw.rc", "ib_send_lat.rc"]
# Over two queue pairs: 16 RC QPs (16 flows each way: all on one queue by chance 1 in 2^15),
# and UD.
DPDK_MQ_PAIRS = ["ib_write_bw.rc_16qp", "ibv_ud_pingpong.chk"]


def mode_pairs(mode):
    """The pairs a two-host mode runs (daemons and the dpdk modes)."""
    if mode in DPDK_IPV6_MODES:
        return DPDK_IPV6_PAIRS
    if mode in DPDK_ROUTED_MODES:
        return DPDK_ROUTED_PAIRS
    return DPDK_MQ_PAIRS if mode in DPDK_MQ_MODES else DAEMON_NETNS_PAIRS

# The capture check: one RC pair across the veth while tcpdump records it. 20 exchanges of
# 4096 bytes at rc_pingpong's default path MTU of 1024: at least 20 x 2 x 4 SEND packets.
CAPTURES = {"ibv_rc_pingpong": pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", ["-c", "-n", "20"], 4096, 20)}
CAPTURE_SEND_PACKETS = {"ibv_rc_pingpong": 20 * 2 * 4}
RC_SEND_OPCODES = {"0", "1", "2", "3", "4", "5"}  # SEND First, Middle, Last(+Imm), Only(+Imm)


def test_names():
    names = []
    for mode in ("loop", "netns"):
        names += [f"{mode}.{p.name}" for p in PAIRS if mode in p.modes]
    names += [f"daemon.{p.name}" for p in PAIRS if "loop" in p.modes]
    names += [f"{mode}.{name}" for mode in ("daemons", *DPDK_PMDS) for name in mode_pairs(mode)]
    names += [f"capture.{name}" for name in CAPTURES]
    return names


def find_pair(name):
    mode, _, rest = name.partition(".")
    if mode == "capture":
        return mode, CAPTURES.get(rest)
    for p in PAIRS:
        if mode in DPDK_PMDS and rest not in mode_pairs(mode):
            continue
        if p.name == rest and {"daemon": "loop", "daemons": "netns", **{m: "netns" for m in DPDK_PMDS}}.get(mode, mode) in p.modes:
            return mode, p
    return mode, None


# ---------------------------------------------------------------------------------------------
# Running one pair.

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "), flush=True)
    return ok


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


def stop_process(p, sig=signal.SIGTERM, timeout=10):
    """Sends SIG and collects P's output; killed after TIMEOUT seconds. (stdout, stderr)."""
    p.send_signal(sig)
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()


def skip(message):
    print(f"SKIPPED: {message}", flush=True)
    sys.exit(SKIP)


def need_capture_tools(validate):
    """Exits 77 unless the capture validator, tshark and capinfos are there."""
    if not os.path.exists(validate):
        skip(f"the capture validator {validate} is absent (it lives in ../shared/tools)")
    for tool, package in (("tshark", "tshark"), ("capinfos", "wireshark-common")):
        if shutil.which(tool) is None:
            skip(f"{tool} is not installed (apt-get install {package})")


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_")}


def tool_env(**extra):
    # tcpdump and tshark never load the shim: no sanitizer runtime preloaded into them.
    env = {k: v for k, v in clean_env().items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    env.update(extra)
    return env


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # Survives exec (softrdma run execs the program): nothing outlives this script, even
    # when ctest kills it at its TIMEOUT.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Side:
    """One program run with stdout/stderr in files (no pipe can fill up and block it)."""

    def __init__(self, role, argv, workdir, tag, netns_pid=None):
        self.role = role
        self.argv = argv
        self.out_path = os.path.join(workdir, f"{tag}.{role}.out")
        self.err_path = os.path.join(workdir, f"{tag}.{role}.err")
        # stdbuf: line-buffered output, so a program killed at the timeout has shown how far it
        # got (it only adds libstdbuf.so to LD_PRELOAD, after a sanitizer runtime).
        full = ["stdbuf", "-oL", "-eL"] + argv
        if netns_pid is not None:
            full = ["nsenter", f"--net=/proc/{netns_pid}/ns/net", "--"] + full
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=clean_env(),
                                         preexec_fn=_die_with_parent)
        self.timed_out = False

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def wait(self, until):
        while self.alive() and time.monotonic() < until:
            time.sleep(0.05)
        if self.alive():
            self.timed_out = True
            self.kill()
        return self.proc.returncode

    def kill(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self):
        with open(self.out_path, errors="replace") as f:
            out = f.read()
        with open(self.err_path, errors="replace") as f:
            err = f.read()
        return out, err

    def report(self):
        out, err = self.output()
        rc = "killed at the timeout" if self.timed_out else self.proc.returncode
        return (f"--- {self.role}: {' '.join(self.argv)}\n--- {self.role} exit: {rc}\n"
                f"--- {self.role} stdout:\n{out.rstrip()}\n--- {self.role} stderr:\n{err.rstrip()}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def listens(pid, port, udp=False, owned=True):
    """Whether process PID holds a TCP socket in LISTEN (with UDP, a bound UDP socket) on PORT,
    read from its own namespace's /proc tables, so no probe connection reaches the server; with
    OWNED false, whether any process of its namespace does (a daemon that listens for it)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return False
    state = "07" if udp else "0A"  # TCP_CLOSE (an unconnected UDP socket) / TCP_LISTEN
    for table in (("udp", "udp6") if udp else ("tcp", "tcp6")):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == state and int(cols[1].rsplit(":", 1)[1], 16) == port and \
                    (cols[9] in inodes or not owned):
                return True
    return False


def udp_counters(pid="self"):
    """The kernel's UDP counters of PID's network namespace (RcvbufErrors: datagrams dropped
    because a socket's receive buffer was full)."""
    try:
        with open(f"/proc/{pid}/net/snmp") as f:
            rows = [line.split() for line in f if line.startswith("Udp:")]
        return dict(zip(rows[0][1:], map(int, rows[1][1:])))
    except (OSError, IndexError, ValueError):
        return {}


def udp_drops(before, after):
    return {k: after[k] - before.get(k, 0) for k in ("InErrors", "RcvbufErrors") if k in after}


PORT_TROUBLE = re.compile(r"listen to port|address already in use|bind|open file descriptor for socket", re.I)
CONNECT_TROUBLE = re.compile(r"couldn't connect to|unable to init the socket connection|connection refused", re.I)


def start_listening(argv_for_port, workdir, tag, deadline):
    """Starts argv_for_port(port) as the server on a free TCP port and waits until it listens
    there; a port taken meanwhile (PORT_TROUBLE) means another try on a new one. Returns
    (Side, port), or (None, None) after a failed check."""
    for attempt in range(3):
        port = free_port()
        server = Side("server", argv_for_port(port), workdir, f"{tag}.{attempt}")
        listen_until = min(deadline, time.monotonic() + LISTEN_TIMEOUT)
        while server.alive() and not listens(server.pid, port) and time.monotonic() < listen_until:
            time.sleep(0.05)
        if server.alive() and listens(server.pid, port):
            return server, port
        if server.alive():
            server.timed_out = True
            server.kill()
            check(False, f"the server listens on TCP port {port} within {LISTEN_TIMEOUT} s", server.report())
            return None, None
        out, err = server.output()
        if PORT_TROUBLE.search(out + err) and attempt < 2:
            print(f"note: the server could not use port {port}; retrying on another one")
            continue
        check(False, "the server starts and listens (it exited first)", server.report())
        return None, None
    return None, None


def run_client(start, tries, deadline, refused):
    """START(attempt) a client and wait for its end, again (TRIES runs at most) while
    REFUSED(its stdout + stderr) says it found no listener: a server may say that it listens a
    moment before it does. The last client's Side."""
    for attempt in range(tries):
        client = start(attempt)
        rc = client.wait(deadline)
        out, err = client.output()
        if rc == 0 or client.timed_out or attempt == tries - 1 or not refused(out + err):
            return client
        print(f"note: the client found no listener (try {attempt + 1}); starting it again", flush=True)
        time.sleep(0.5)
    return None


def start_iwarp_rping(softrdma, addrs, workdir, tag, count, deadline, server_opts=(), client_opts=()):
    """An rping -V -C COUNT pair on two srdmaiw0 devices (softrdma run --iwarp) at ADDRS
    (server, client): the server on a free TCP port and, once it listens there (an iWARP
    listen is a TCP listen), the client. {"server": Side, "client": Side}, both running; None
    after a failed check."""
    server_ip, client_ip = addrs

    def argv(role, ip, opts, port):
        return [softrdma, "run", "--iwarp", "--ip", ip, *opts, "--", "rping", "-s" if role == "server" else "-c",
                "-a", server_ip, "-p", str(port), "-V", "-C", str(count)]

    server, port = start_listening(lambda p: argv("server", server_ip, server_opts, p), workdir, tag, deadline)
    if server is None:
        return None
    return {"server": server, "client": Side("client", argv("client", client_ip, client_opts, port), workdir, tag)}


def run_pair(pair, mode, workdir, softrdma, tag, client_netns_pid=None, server_opts=(), client_opts=()):
    """Runs PAIR; returns (server, client) Sides after both ended, or None after a failed
    check. MODE 'loop' runs both on loopback; 'netns' runs the server here and the client
    in the namespace of CLIENT_NETNS_PID. SERVER_OPTS and CLIENT_OPTS are more `softrdma run`
    options for each side (--faults, --capture, --stats)."""
    if mode == "loop":
        server_run = [softrdma, "run", *server_opts, "--"]
        client_run = [softrdma, "run", *client_opts, "--"]
        server_host = "127.0.0.1"
    else:
        def attach(opts, addr):  # a device of its own on the host's address, or the host's daemon's
            return [] if any(o.startswith("--daemon") for o in opts) else ["--ip", addr]
        server_run = [softrdma, "run", *attach(server_opts, NETNS_ADDR[0]), *server_opts, "--"]
        client_run = [softrdma, "run", *attach(client_opts, NETNS_ADDR[1]), *client_opts, "--"]
        server_host = NETNS_ADDR[0]
    deadline = time.monotonic() + PAIR_TIMEOUT
    # UC and UD have no retransmission: a datagram the kernel drops (a full socket buffer)
    # loses a message for good, and a receiver counting messages waits forever. The counters
    # say whether that happened (on loopback they are the machine's, shared with other tests).
    namespaces = {"server": "self"}
    if client_netns_pid is not None:
        namespaces["client"] = client_netns_pid
    before = {side: udp_counters(pid) for side, pid in namespaces.items()}

    server, port = start_listening(lambda p: server_run + pair.argv(mode, p), workdir, tag, deadline)
    if server is None:
        return None

    client = None
    for attempt in range(10):
        client = Side("client", client_run + pair.argv(mode, port, server_host), workdir, f"{tag}.{attempt}",
                      netns_pid=client_netns_pid)
        rc = client.wait(deadline)
        out, err = client.output()
        if rc != 0 and not client.timed_out and CONNECT_TROUBLE.search(out + err) and server.alive() and attempt < 9:
            time.sleep(0.3)  # not reached the server's listening socket yet
            continue
        break
    server.wait(min(deadline, time.monotonic() + 20) if not client.timed_out else time.monotonic())
    for side, pid in namespaces.items():
        drops = udp_drops(before[side], udp_counters(pid))
        where = "this machine's namespace" if mode == "loop" else f"the {side}'s namespace"
        print(f"note: UDP drops during the pair in {where}: "
              + ", ".join(f"{k} +{v}" for k, v in drops.items()), flush=True)
    return server, client


def judge_pair(pair, mode, server, client):
    before = len(failures)
    check(not server.timed_out and not client.timed_out, f"both programs end within {PAIR_TIMEOUT} s")
    check(server.proc.returncode == 0, "the server exits 0")
    check(client.proc.returncode == 0, "the client exits 0")
    expect = {"server": pair.server_expect, "client": pair.client_expect}
    if mode != "loop" and pair.netns_expect is not None:
        expect = {"server": pair.netns_expect, "client": pair.netns_expect}
    for side in (server, client):
        out, err = side.output()
        for pattern in expect[side.role]:
            m = re.search(pattern + r".*$", out, re.M)
            check(m is not None, f"the {side.role} prints a line matching {pattern!r}")
            if m:
                print(f"       {m.group(0).strip()}")
        for ok, what in pair.judge(out) if pair.judge else []:
            check(ok, f"the {side.role}: {what}")
        bad = [m.group(0) for m in BAD_LINE.finditer(out + "\n" + err)]
        check(not bad, f"the {side.role} prints no Couldn't/failed/error/Unable/invalid line", "\n".join(bad[:10]))
    if len(failures) > before:
        print(server.report())
        print(client.report(), flush=True)
        return False
    return True


def need_program(program):
    path = f"/usr/bin/{program}"
    if not os.path.exists(path):
        skip(f"{path} is not installed (apt-get install {PACKAGES.get(program, 'perftest')})")


def check_loop(pair, softrdma):
    need_program(pair.program)
    with tempfile.TemporaryDirectory(prefix="softrdma-pairs-") as work:
        sides = run_pair(pair, "loop", work, softrdma, "loop")
        if sides:
            judge_pair(pair, "loop", *sides)
    return finish()


def softrdmad_path():
    softrdmad = os.environ.get("SOFTRDMAD", "")
    if not os.path.exists(softrdmad):
        skip(f"softrdmad is not at '{softrdmad}' (set SOFTRDMAD)")
    return softrdmad


# What softrdmad says when the kernel will not give net_af_xdp an XDP socket (no root, no BPF).
XDP_REFUSED = re.compile(r"Failed to (create umem|configure xdp socket)|Failed to load|xsk_socket__create", re.I)


def start_daemon(softrdmad, work, tag, extra=(), netns_pid=None):
    """softrdmad on a socket in WORK (in the namespace of NETNS_PID if given); the Side and
    the socket, or (None, None) after a failed check."""
    sock = os.path.join(work, f"{tag}.sock")
    daemon = Side(tag, [softrdmad, "--socket", sock, *extra], work, tag, netns_pid=netns_pid)
    deadline = time.monotonic() + LISTEN_TIMEOUT
    while not os.path.exists(sock) and daemon.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not os.path.exists(sock) and not daemon.alive() and "net_af_xdp" in " ".join(extra) and \
            XDP_REFUSED.search(daemon.output()[1]):
        skip(f"the kernel refuses net_af_xdp an XDP socket here: {daemon.output()[1].strip()[-400:]}")
    if not check(os.path.exists(sock), f"softrdmad listens on {sock}", daemon.report()):
        daemon.kill()
        return None, None
    return daemon, sock


def stop_daemons(daemons, passed):
    """SIGTERM to each: it must exit 0 within 10 s."""
    for daemon in daemons:
        daemon.proc.send_signal(signal.SIGTERM)
        daemon.wait(time.monotonic() + 10)
        stopped = check(not daemon.timed_out and daemon.proc.returncode == 0, f"{daemon.role} exits 0 on SIGTERM")
        if not passed or not stopped:
            print(daemon.report(), flush=True)


def check_daemon(pair, softrdma):
    """PAIR on loopback with both programs on one softrdmad, which must then shut down
    cleanly on SIGTERM."""
    need_program(pair.program)
    softrdmad = softrdmad_path()
    with tempfile.TemporaryDirectory(prefix="softrdma-daemon-") as work:
        daemon, sock = start_daemon(softrdmad, work, "softrdmad")
        if daemon is None:
            return finish()
        sides = run_pair(pair, "loop", work, softrdma, "daemon", server_opts=[f"--daemon={sock}"],
                         client_opts=[f"--daemon={sock}"])
        judged = sides is not None and judge_pair(pair, "loop", *sides)
        stop_daemons([daemon], judged)
    return finish()


def daemon_options(backend, side):
    """softrdmad's options for SIDE (0 server, 1 client) on BACKEND ("udp" or a DPDK_PMDS key)."""
    if backend == "udp":
        return ["--ip", NETNS_ADDR[side]]
    vdev = f"--vdev={DPDK_PMDS[backend]}0,iface={DATA_VETH[side]}"
    queues = ["--dpdk-queues", "2"] if backend in DPDK_MQ_MODES else []
    if queues:
        vdev += ",qpairs=2"
    addr = (DPDK_ADDR6 if backend in DPDK_IPV6_MODES else DPDK_ADDR)[side]
    if backend in DPDK_ROUTED_MODES:
        queues += ["--gateway", ROUTER_ADDR[side]]
        addr = f"{ROUTED_ADDR[side]}/24"
    return ["--backend", "dpdk", "--ip", addr, *queues, "--eal", f"{EAL_ARGS} --file-prefix=srdma{side} {vdev}"]


def check_daemons(pair, softrdma, host_netns, backend="udp"):
    """PAIR between two namespaces, each program on its own namespace's softrdmad."""
    inside_own_namespace(host_netns)
    softrdmad = softrdmad_path()
    with tempfile.TemporaryDirectory(prefix="softrdma-daemons-") as work, \
            TwoHosts(backend != "udp", routed=backend in DPDK_ROUTED_MODES) as hosts:
        server_daemon, server_sock = start_daemon(softrdmad, work, "softrdmad-A", daemon_options(backend, 0))
        client_daemon, client_sock = start_daemon(softrdmad, work, "softrdmad-B", daemon_options(backend, 1),
                                                  netns_pid=hosts.holder.pid)
        if server_daemon is None or client_daemon is None:
            for d in (server_daemon, client_daemon):
                if d is not None:
                    d.kill()
            return finish()
        sides = run_pair(pair, "netns", work, softrdma, "daemons", client_netns_pid=hosts.holder.pid,
                         server_opts=[f"--daemon={server_sock}"], client_opts=[f"--daemon={client_sock}"])
        judged = sides is not None and judge_pair(pair, "netns", *sides)
        stop_daemons([server_daemon, client_daemon], judged)
        if backend != "udp":
            ipv6 = backend in DPDK_IPV6_MODES
            resolution = "ND" if ipv6 else "ARP"
            for d in (server_daemon, client_daemon):
                # The port's own summary at exit (net/dpdk_backend.cpp): the pair's packets and
                # the address resolution of its family crossed it, none of the other family's,
                # and nothing that came in was malformed (the kernel's own IPv6 traffic on the
                # veth is "not ours").
                m = re.search(r"dpdk port 0 at exit:(.*)$", d.output()[1], re.M)
                if m:
                    print(f"       {d.role}: {m.group(0)}")
                    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}
                    roce, malformed = counts.get("rx_roce", 0), counts.get("rx_malformed", -1)
                    arp, nd = counts.get("rx_arp", -1), counts.get("rx_nd", -1)
                    ours, other = (nd, arp) if ipv6 else (arp, nd)
                check(m is not None and roce > 0 and ours > 0 and other == 0 and malformed == 0,
                      f"{d.role}: RoCE packets and {resolution} came in through {DPDK_PMDS[backend]}, none malformed",
                      m.group(0) if m else d.output()[1][-2000:])
                if backend in DPDK_ROUTED_MODES:
                    # The pair itself is the proof of the route: the peer is on another subnet,
                    # which no one on this link answers ARP for but the router.
                    check(m is not None and counts.get("tx_no_route", -1) == 0, f"{d.role}: no packet unroutable",
                          m.group(0) if m else "")
                if backend in DPDK_MQ_MODES and pair.name in ("ib_write_bw.rc_16qp",):
                    check(m is not None and counts.get("port_rx_frames_q0", 0) > 0 and
                          counts.get("port_rx_frames_q1", 0) > 0, f"{d.role}: both receive queues took frames",
                          m.group(0) if m else "")
    return finish()


# ---------------------------------------------------------------------------------------------
# Two hosts: network namespaces joined by a veth pair.
#
# The script re-runs itself under `unshare --net --map-root-user` (namespace A, the server's
# host; root there, so it may make interfaces). There it starts a holder process in a nested
# namespace B (`unshare --net`, the client's host), makes a veth pair, moves one end into B by
# the holder's PID and addresses both ends. Programs enter B with `nsenter --net=/proc/PID/ns/net`.
# Both namespaces die with the test; their traffic never reaches the machine's interfaces.

def netns_unshare():
    """The command that makes the test's namespace: a network namespace alone where this runs
    as root with CAP_SYS_ADMIN, else one inside a user namespace of its own."""
    for tool in ("unshare", "nsenter", "ip"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            skip(f"the {tool} command is missing (apt-get install {'iproute2' if tool == 'ip' else 'util-linux'})")
    for argv in (["unshare", "--net"], ["unshare", "--net", "--map-root-user"]):
        if subprocess.run(argv + ["true"], capture_output=True).returncode == 0:
            return argv
    skip("cannot create a network namespace here (needs root or unprivileged user namespaces)")


def inside_argv(argv):
    """(ARGV without the internal `--inside HOST_NETNS` of a re-run in the test's namespace,
    HOST_NETNS or None)."""
    if len(argv) > 2 and argv[1] == "--inside":
        return [argv[0]] + argv[3:], argv[2]
    return argv, None


def rerun_in_own_namespace(script, argv):
    """Runs SCRIPT again with ARGV's arguments inside a network namespace of its own
    (netns_unshare), telling it the machine's namespace to compare with; never returns."""
    inner = netns_unshare() + [sys.executable, os.path.abspath(script), "--inside",
                               os.readlink("/proc/self/ns/net")] + argv[1:]
    sys.stdout.flush()
    os.execvp(inner[0], inner)


def sh(argv, what):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if p.returncode != 0:
        skip(f"{what}: `{' '.join(argv)}` failed: {(p.stdout + p.stderr).strip()}")


class TwoHosts:
    """With DATA_LINK, a second veth pair (DATA_VETH) joins the hosts too, up but without
    addresses: the dpdk daemons' wire, which the kernel does not use."""

    def __init__(self, data_link=False, routed=False):
        self.holder = None
        self.router = None
        self.data_link = data_link
        self.routed = routed

    def __enter__(self):
        sh(["ip", "link", "set", "lo", "up"], "cannot bring up the namespace's loopback")
        self.holder = subprocess.Popen(["unshare", "--net", "sleep", "600"], stdin=subprocess.DEVNULL,
                                       preexec_fn=_die_with_parent)
        # Wait until the holder has its own namespace (unshare execs sleep after unsharing).
        mine = os.readlink("/proc/self/ns/net")
        until = time.monotonic() + 10
        while time.monotonic() < until:
            try:
                theirs = os.readlink(f"/proc/{self.holder.pid}/ns/net")
                if theirs != mine and os.readlink(f"/proc/{self.holder.pid}/exe").endswith("sleep"):
                    break
            except OSError:
                pass
            if self.holder.poll() is not None:
                skip("cannot create a nested network namespace (unshare --net inside the test's namespace)")
            time.sleep(0.02)
        else:
            skip("the nested network namespace did not appear within 10 s")
        b = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--"]
        sh(["ip", "link", "add", VETH[0], "mtu", str(VETH_MTU), "type", "veth", "peer", "name", VETH[1],
            "mtu", str(VETH_MTU)], "cannot create a veth pair")
        sh(["ip", "link", "set", VETH[1], "netns", str(self.holder.pid)], "cannot move a veth end into a namespace")
        sh(["ip", "addr", "add", f"{NETNS_ADDR[0]}/24", "dev", VETH[0]], "cannot address the veth")
        sh(["ip", "link", "set", VETH[0], "up"], "cannot bring the veth up")
        sh(b + ["ip", "link", "set", "lo", "up"], "cannot bring up the second namespace's loopback")
        sh(b + ["ip", "addr", "add", f"{NETNS_ADDR[1]}/24", "dev", VETH[1]], "cannot address the veth's peer")
        sh(b + ["ip", "link", "set", VETH[1], "up"], "cannot bring the veth's peer up")
        links = [VETH[0]]
        if self.data_link and self.routed:
            self.join_through_router(b)
            links.append(DATA_VETH[0])
        elif self.data_link:
            sh(["ip", "link", "add", DATA_VETH[0], "mtu", str(VETH_MTU), "type", "veth", "peer", "name", DATA_VETH[1],
                "mtu", str(VETH_MTU)], "cannot create the data veth pair")
            sh(["ip", "link", "set", DATA_VETH[1], "netns", str(self.holder.pid)], "cannot move the data veth's end")
            sh(["ip", "link", "set", DATA_VETH[0], "up"], "cannot bring the data veth up")
            sh(b + ["ip", "link", "set", DATA_VETH[1], "up"], "cannot bring the data veth's peer up")
            links.append(DATA_VETH[0])
        until = time.monotonic() + 10
        while time.monotonic() < until:
            up = [subprocess.run(["ip", "-o", "link", "show", link], capture_output=True, text=True).stdout
                  for link in links]
            if all("LOWER_UP" in u for u in up):
                break
            time.sleep(0.05)
        print(f"two hosts: {NETNS_ADDR[0]} on {VETH[0]} (this namespace), {NETNS_ADDR[1]} on {VETH[1]} "
              f"(namespace of pid {self.holder.pid}), MTU {VETH_MTU}", flush=True)
        return self

    def join_through_router(self, b):
        """The data links of the routed mode: DATA_VETH[0] to a third namespace that forwards
        IPv4 between ROUTER_ADDR's two subnets, and from there to DATA_VETH[1] in B."""
        self.router = subprocess.Popen(["unshare", "--net", "sleep", "600"], stdin=subprocess.DEVNULL,
                                       preexec_fn=_die_with_parent)
        until = time.monotonic() + 10
        while os.readlink(f"/proc/{self.router.pid}/ns/net") == os.readlink("/proc/self/ns/net") or \
                not os.readlink(f"/proc/{self.router.pid}/exe").endswith("sleep"):
            if time.monotonic() > until or self.router.poll() is not None:
                skip("cannot create the router's network namespace")
            time.sleep(0.02)
        r = ["nsenter", f"--net=/proc/{self.router.pid}/ns/net", "--"]
        for ours, theirs, where in ((DATA_VETH[0], ROUTER_VETH[0], None), (DATA_VETH[1], ROUTER_VETH[1], self.holder.pid)):
            sh(["ip", "link", "add", ours, "mtu", str(VETH_MTU), "type", "veth", "peer", "name", theirs,
                "mtu", str(VETH_MTU)], f"cannot create the veth pair {ours}-{theirs}")
            sh(["ip", "link", "set", theirs, "netns", str(self.router.pid)], f"cannot move {theirs} to the router")
            if where is not None:
                sh(["ip", "link", "set", ours, "netns", str(where)], f"cannot move {ours} into B")
        sh(["ip", "link", "set", DATA_VETH[0], "up"], "cannot bring the data veth up")
        sh(b + ["ip", "link", "set", DATA_VETH[1], "up"], "cannot bring the data veth's peer up")
        for link, addr in zip(ROUTER_VETH, ROUTER_ADDR):
            sh(r + ["ip", "addr", "add", f"{addr}/24", "dev", link], f"cannot address {link}")
            sh(r + ["ip", "link", "set", link, "up"], f"cannot bring {link} up")
        sh(r + ["sysctl", "-qw", "net.ipv4.ip_forward=1"], "cannot make the router namespace forward")

    def __exit__(self, *exc):
        for p in (self.holder, self.router):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def inside_own_namespace(host_netns):
    # Addresses 10.77.0.x are only ever used here: refuse to go on in the machine's namespace.
    if os.readlink("/proc/self/ns/net") == host_netns:
        print("FAIL the namespace was not created; refusing to use 10.77.0.x in the machine's namespace")
        sys.exit(1)


def check_netns(pair, softrdma, host_netns):
    inside_own_namespace(host_netns)
    with TwoHosts() as hosts, tempfile.TemporaryDirectory(prefix="softrdma-pairs-") as work:
        sides = run_pair(pair, "netns", work, softrdma, "netns", client_netns_pid=hosts.holder.pid)
        if sides:
            judge_pair(pair, "netns", *sides)
    return finish()


def check_capture(pair, softrdma, host_netns, tshark_validate, min_send_packets):
    inside_own_namespace(host_netns)
    with TwoHosts() as hosts, tempfile.TemporaryDirectory(prefix="softrdma-pairs-") as work:
        pcap = os.path.join(work, "pair.pcap")
        # -Z root: tcpdump would switch to its own user, which a user namespace does not map;
        # -U with --immediate-mode: every packet reaches the file as it comes. Immediate mode
        # gives every ring slot the snapshot length: 2048 bytes (the veth's frames are at most
        # 1514) and a 16 MiB ring, else tcpdump falls behind the pair and the kernel drops.
        dump = subprocess.Popen(["tcpdump", "-i", VETH[0], "--immediate-mode", "-U", "-Z", "root", "-n",
                                 "-s", "2048", "-B", "16384", "-w", pcap, "udp port 4791"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=tool_env(), preexec_fn=_die_with_parent)
        # tcpdump says "listening on IF" once its filter is attached.
        os.set_blocking(dump.stderr.fileno(), True)
        first = dump.stderr.readline()
        if "listening on" not in first:
            dump.kill()
            rest = dump.communicate()[1]
            if "Couldn't change to" in first and os.path.exists("/proc/self/setgroups") and \
                    open("/proc/self/setgroups").read().strip() == "deny":
                # Only root is mapped in an unprivileged user namespace, and tcpdump insists
                # on switching users (initgroups is refused there).
                skip(f"tcpdump cannot run in an unprivileged user namespace ({first.strip()}); run as root")
            check(False, f"tcpdump starts on {VETH[0]}", first + rest)
            return finish()
        # --no-gso: a GSO datagram crosses the veth whole, and tcpdump would record a message's
        # packets as one frame (the device's own --capture records them one by one).
        sides = run_pair(pair, "netns", work, softrdma, "capture", client_netns_pid=hosts.holder.pid,
                         server_opts=["--no-gso"], client_opts=["--no-gso"])
        time.sleep(0.2)
        _, dump_err = stop_process(dump, signal.SIGINT)
        print(" / ".join([first.strip()] + [line for line in dump_err.splitlines() if line]))
        if not sides:
            return finish()
        judge_pair(pair, "netns", *sides)
        dropped = re.search(r"(\d+) packets? dropped by kernel", dump_err)
        check(dropped is not None and dropped.group(1) == "0", "tcpdump saw every packet (0 dropped by kernel)",
              dump_err)

        p = subprocess.run([tshark_validate, pcap, work], capture_output=True, text=True,
                           env=tool_env(TSHARK_UDP_CHECKSUM="FALSE"), timeout=60)
        print(f"tshark-validate.sh: {p.stdout.strip()}")
        check(p.returncode == 0, "tshark-validate.sh passes the capture (TSHARK_UDP_CHECKSUM=FALSE)",
              p.stdout + p.stderr)
        m = re.search(r"roce_udp=(\d+) decoded_as_ib=(\d+)", p.stdout)
        check(m is not None and int(m.group(1)) > 0 and m.group(1) == m.group(2),
              "tshark decodes every udp/4791 packet as InfiniBand, and there are some", p.stdout)

        p = subprocess.run([softrdma, "dump", "--check", pcap], capture_output=True, text=True, env=clean_env(),
                           timeout=60)
        summary = re.search(r"^summary=.*$", p.stdout, re.M)
        print(f"softrdma dump: {summary.group(0) if summary else '(no summary)'}")
        check(p.returncode == 0, "softrdma dump --check passes the capture",
              (p.stdout[-3000:] + p.stderr) if p.returncode else "")
        roce = re.search(r" roce=(\d+) icrc_ok=(\d+) icrc_bad=(\d+)", summary.group(0) if summary else "")
        check(roce is not None and int(roce.group(1)) > 0 and roce.group(3) == "0",
              "the capture holds RoCE packets, none with a bad ICRC", summary.group(0) if summary else p.stdout[-2000:])

        # Every message crossed the veth, cut at the path MTU: SEND packets >= messages x
        # packets per message (more only with retransmissions).
        p = subprocess.run(["tshark", "-n", "-r", pcap, "-Y", "infiniband.bth", "-T", "fields",
                            "-e", "infiniband.bth.opcode"], capture_output=True, text=True, env=tool_env(), timeout=60)
        opcodes = p.stdout.split()
        sends = sum(1 for o in opcodes if o in RC_SEND_OPCODES)
        print(f"capture: {len(opcodes)} RoCE packets, {sends} of them RC SEND packets")
        check(sends >= min_send_packets, f"the capture holds every SEND packet (at least {min_send_packets})",
              f"{sends} SEND packets")
    return finish()


# ---------------------------------------------------------------------------------------------

def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(test_names()))
        return 0
    argv, host_netns = inside_argv(argv)
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, softrdma, rest = argv[1], argv[2], argv[3:]
    mode, pair = find_pair(name)
    if pair is None:
        print(f"unknown test {name}; --list shows them", file=sys.stderr)
        return 2
    if host_netns is None:
        print(f"pair {name}: {' '.join(pair.argv('loop' if mode in ('loop', 'daemon') else 'netns', 'PORT'))}", flush=True)
    try:
        if mode == "loop":
            return check_loop(pair, softrdma)
        if mode == "daemon":
            return check_daemon(pair, softrdma)
        need_program(pair.program)
        tshark_validate = rest[0] if rest else None
        if mode == "capture":
            if not tshark_validate or not os.path.exists(tshark_validate):
                skip(f"the capture validator {tshark_validate} is absent (it lives in ../shared/tools)")
            for tool, package in (("tcpdump", "tcpdump"), ("tshark", "tshark"), ("capinfos", "wireshark-common")):
                if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
                    skip(f"{tool} is not installed (apt-get install {package})")
        if host_netns is None:
            rerun_in_own_namespace(__file__, argv)
        if mode == "netns":
            return check_netns(pair, softrdma, host_netns)
        if mode == "daemons":
            return check_daemons(pair, softrdma, host_netns)
        if mode in DPDK_PMDS:
            return check_daemons(pair, softrdma, host_netns, backend=mode)
        return check_capture(pair, softrdma, host_netns, tshark_validate, CAPTURE_SEND_PACKETS[pair.name])
    except subprocess.TimeoutExpired as e:
        print(f"FAIL timed out after {e.timeout}s: {' '.join(map(str, e.cmd))}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
