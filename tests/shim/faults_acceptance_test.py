#!/usr/bin/env python3
"""Unmodified programs under `softrdma run --faults` (SOFTRDMA_FAULTS): what a CI pipeline
testing its error handling relies on.

usage: faults_acceptance_test.py TEST SOFTRDMA [TSHARK_VALIDATE]

The faults are FAULTS below on every device: 5% loss, 5% reordering and 5% duplication of what
the device sends and 1% corruption of what it receives, so each direction of the link sees
each fault at exactly its rate once, and every corruption towards a device reaches its engine
(none is lost after it was made): its ICRC-drop counter must equal its receive-side
corruption count. Each side has its own seed. Counters come from `softrdma run --stats FILE`.

TEST:
  pingpong       an ibv_rc_pingpong -c pair (-c checks the data; faults touch SENDs only, see
                 test_pingpong). Both exit 0 with their result
                 lines; per side icrc_err == faults.rx.corrupted, and loss, duplication and
                 reordering happened; the client's own capture (--capture) holds exactly as
                 many bad-ICRC frames as the client's receive corruptions, passes
                 TSHARK_VALIDATE (UDP checksums checked) once those frames are cut out with
                 editcap, and shows retransmissions (a request PSN the client sent again).
  lost_requests  loss of SEND packets only (opcode filter): each side's retransmissions are at
                 least the requests it lost.
  write_bw       ib_write_bw 64 KiB completes (perftest's default 67 ms retransmission timer:
                 a shorter one retries out under a sanitizer on a loaded 2-core machine).
  read_bw        ib_read_bw 64 KiB likewise (lost READ responses restart the READ).
  linkdown       a client whose link is down for good: ibv_rc_pingpong and ib_write_bw end with
                 the "transport retry counter exceeded" completion status (IBV_WC_RETRY_EXC_ERR,
                 12) within 15 s instead of hanging.
  suite          rdma-core's RC traffic tests (they check the data) under the same faults.
  iwarp          rping -V -C 10 pairs on srdmaiw0 (--iwarp), faults on the client's FPDUs:
                 delay=2ms completes every ping, each FPDU delayed; corrupt=10% with the server
                 asking for MPA CRCs ends the stream at the first corrupted FPDU (the server
                 counts one bad CRC and sends the Terminate, the client receives it); drop=5
                 resets the connection in place of the 5th FPDU, and both sides see it end. No
                 program hangs; the counters come from --stats.

Exit 77 when a program or tool is missing.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, run_pair, judge_pair, check, ...)
from rdmacm_pairs_test import free_loopback_pair  # noqa: E402

FAULTS = "tx.loss=5%,tx.reorder=5%:depth=4,tx.dup=5%,rx.corrupt=1%,seed={seed}"
PINGPONG_ITERS, PINGPONG_SIZE = 100, 4096
BW_ITERS, BW_SIZE = 200, 65536
LINKDOWN_LIMIT = 15  # seconds until a client with a dead link must have given up
RETRY_EXC = re.compile(r"transport retry counter exceeded|status 12\b|\(12\)", re.I)
# rdma-core's RC traffic tests, by unittest -k pattern: send, write, read, atomics, CQ events.
# "_rc_traffic" leaves out the XRC ones: 1000 one-message round trips each, where every loss
# waits out a 67 ms ACK timeout (core_tests has XRC on a lossy link).
SUITE_PATTERNS = ["_rc_traffic", "test_qp_ex_rc", "test_cq_events_rc", "test_atomic_cmp_and_swap",
                  "test_atomic_fetch_and_add"]
SUITE_MIN_PASS = 20  # all that these select


def faults(seed):
    return FAULTS.format(seed=seed)


def stats_of(path, side):
    if not pairs.check(os.path.exists(path), f"the {side} wrote its --stats file"):
        return None
    with open(path) as f:
        return json.load(f)


def check_counters(s, side):
    """The fault and ICRC counters of one side's --stats snapshot agree."""
    c, f = s["counters"], s["faults"]
    print(f"{side}: sent {c['sent_pkts']} rcvd {c['rcvd_pkts']} retransmitted {c['retransmitted_pkts']} "
          f"icrc_err {c['icrc_err']}; tx faults {f['tx']}; rx faults {f['rx']}")
    pairs.check(c["icrc_err"] == f["rx"]["corrupted"],
                f"{side}: ICRC drops ({c['icrc_err']}) == corruptions injected towards it ({f['rx']['corrupted']})")
    pairs.check(c["malformed"] == 0, f"{side}: no packet was malformed (corruption stays after the BTH)")


def run_faulted_pair(pair, softrdma, work, tag, server_opts, client_opts):
    ran = pairs.run_pair(pair, "loop", work, softrdma, tag, server_opts=server_opts, client_opts=client_opts)
    return ran is not None and pairs.judge_pair(pair, "loop", *ran)


def test_pingpong(softrdma, validate, work):
    for tool, package in (("tshark", "tshark"), ("editcap", "wireshark-common")):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            pairs.skip(f"{tool} is not installed (apt-get install {package})")
    if not validate or not os.path.exists(validate):
        pairs.skip(f"the capture validator {validate} is absent (it lives in ../shared/tools)")
    pair = pairs.pingpong("rc", "ibv_rc_pingpong", ["-c", "-n", str(PINGPONG_ITERS), "-s", str(PINGPONG_SIZE)],
                          PINGPONG_SIZE, PINGPONG_ITERS)
    stats = {side: os.path.join(work, f"{side}.json") for side in ("server", "client")}
    pcap = os.path.join(work, "client.pcap")
    # The pair's last exchange has no handshake after it: the server exits once the client
    # ACKed its last SEND and the client exits on that SEND's receive. An ACK lost or corrupted
    # there (the client's of the server's last SEND, or the server's of the client's last
    # SEND) is retransmitted for towards a QP that is gone, and ends in RETRY_EXC_ERR, as it
    # would with a NIC. So faults touch SENDs only, both ways; ACK loss is exercised by
    # write_bw/read_bw (perftest handshakes after its last completion) and core's RC tests.
    if not run_faulted_pair(pair, softrdma, work, "pp",
                            ["--faults", faults(21) + ",opcode=send", "--stats", stats["server"]],
                            ["--faults", faults(22) + ",opcode=send", "--stats", stats["client"], "--capture", pcap]):
        return
    snap = {side: stats_of(path, side) for side, path in stats.items()}
    if None in snap.values():
        return
    for side, s in snap.items():
        check_counters(s, side)
    total = {k: sum(s["faults"][d][k] for s in snap.values() for d in ("tx", "rx"))
             for k in ("lost", "duplicated", "reordered", "corrupted")}
    pairs.check(all(v > 0 for v in total.values()), f"every kind of fault happened: {total}")

    records = dump_records(softrdma, pcap)
    bad = [r["frame"] for r in records if str(r.get("icrc", "")).startswith("bad")]
    client = snap["client"]
    pairs.check(len(bad) == client["faults"]["rx"]["corrupted"],
                f"the capture's bad-ICRC frames ({len(bad)}) are the client's receive corruptions "
                f"({client['faults']['rx']['corrupted']})")
    clean = os.path.join(work, "client-without-corrupted.pcap")
    p = subprocess.run(["editcap", pcap, clean] + [str(n) for n in bad], capture_output=True, text=True,
                       env=pairs.tool_env(), timeout=60)
    if not pairs.check(p.returncode == 0, "editcap cuts the corrupted frames out", p.stderr):
        return
    p = subprocess.run([validate, clean, work], capture_output=True, text=True,
                       env=pairs.tool_env(TSHARK_UDP_CHECKSUM="TRUE"), timeout=60)
    print(f"tshark-validate.sh: {p.stdout.strip()}")
    pairs.check(p.returncode == 0, f"tshark-validate.sh passes the rest of the capture ({len(bad)} corrupted "
                "frames excepted)", p.stdout + p.stderr)
    # The client's requests (SENDs to the server): a PSN seen again is a retransmission or an
    # injected duplicate; more repeats than the client duplicated in all are retransmissions.
    client_addr = client["address"]
    seen, repeats = set(), 0
    for r in records:
        if r.get("src") == client_addr and str(r.get("op", "")).startswith("RC_SEND"):
            repeats += (r["dqp"], r["psn"]) in seen
            seen.add((r["dqp"], r["psn"]))
    pairs.check(repeats > client["faults"]["tx"]["duplicated"] and client["counters"]["retransmitted_pkts"] > 0,
                f"the capture shows retransmissions: {repeats} repeated request PSNs, "
                f"{client['faults']['tx']['duplicated']} duplicated packets, "
                f"{client['counters']['retransmitted_pkts']} retransmitted")


def dump_records(softrdma, pcap):
    p = subprocess.run([softrdma, "dump", "--json", pcap], capture_output=True, text=True, env=pairs.clean_env(),
                       timeout=60)
    records = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    pairs.check(p.returncode == 0 and len(records) > 1, "softrdma dump --json reads the capture", p.stderr[-2000:])
    return [r for r in records if "frame" in r]


def test_lost_requests(softrdma, work):
    pair = pairs.pingpong("rc", "ibv_rc_pingpong", ["-c", "-n", str(PINGPONG_ITERS)], PINGPONG_SIZE, PINGPONG_ITERS)
    lossy = "tx.opcode=send,tx.loss=10%,seed={}"
    stats = {side: os.path.join(work, f"{side}.json") for side in ("server", "client")}
    if not run_faulted_pair(pair, softrdma, work, "lr", ["--faults", lossy.format(31), "--stats", stats["server"]],
                            ["--faults", lossy.format(32), "--stats", stats["client"]]):
        return
    for side, path in stats.items():
        s = stats_of(path, side)
        if s is None:
            continue
        lost, again = s["faults"]["tx"]["lost"], s["counters"]["retransmitted_pkts"]
        pairs.check(lost > 0 and again >= lost,
                    f"{side}: lost {lost} SEND packets and retransmitted {again} packets (at least as many)")


def test_bw(softrdma, work, program):
    pair = pairs.perftest(program, program, ["-s", str(BW_SIZE)], BW_SIZE, BW_ITERS)
    stats = {side: os.path.join(work, f"{side}.json") for side in ("server", "client")}
    if not run_faulted_pair(pair, softrdma, work, "bw", ["--faults", faults(41), "--stats", stats["server"]],
                            ["--faults", faults(42), "--stats", stats["client"]]):
        return
    for side, path in stats.items():
        s = stats_of(path, side)
        if s is not None:
            check_counters(s, side)
    client = stats_of(stats["client"], "client")
    if client is not None:
        pairs.check(client["counters"]["retransmitted_pkts"] > 0, "the client retransmitted")


def test_linkdown(softrdma, work):
    for program, args in (("ibv_rc_pingpong", ["-n", "10"]), ("ib_write_bw", ["-n", "100", "-s", "4096"])):
        pairs.need_program(program)
        pair = pairs.Pair(program, program, args, [], [])
        port = pairs.free_port()
        server = pairs.Side("server", [softrdma, "run", "--"] + pair.argv("loop", port), work, f"ld-{program}")
        until = time.monotonic() + pairs.LISTEN_TIMEOUT
        while server.alive() and not pairs.listens(server.pid, port) and time.monotonic() < until:
            time.sleep(0.05)
        if not pairs.check(server.alive(), f"the {program} server listens", server.report()):
            continue
        started = time.monotonic()
        client = pairs.Side("client", [softrdma, "run", "--faults", "linkdown=0", "--"]
                            + pair.argv("loop", port, "127.0.0.1"), work, f"ld-{program}")
        rc = client.wait(started + LINKDOWN_LIMIT)
        took = time.monotonic() - started
        out, err = client.output()
        pairs.check(not client.timed_out, f"{program}: the client with its link down gives up within "
                    f"{LINKDOWN_LIMIT} s (took {took:.1f} s)", client.report())
        pairs.check(rc not in (0, None), f"{program}: the client exits non-zero ({rc})")
        pairs.check(RETRY_EXC.search(out + err) is not None,
                    f"{program}: the client reports the retry-exceeded completion status", client.report())
        server.kill()


def test_suite(softrdma):
    suite = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rdma_core_suite.py")
    argv = ["/usr/bin/python3", suite, softrdma, "--env", f"SOFTRDMA_FAULTS={faults(51)}", "--timeout", "100",
            "--min-pass", str(SUITE_MIN_PASS)]
    for pattern in SUITE_PATTERNS:
        argv += ["-k", pattern]
    p = subprocess.run(argv, capture_output=True, text=True, env=pairs.clean_env(), timeout=110)
    print(p.stdout[-6000:])
    if p.returncode == pairs.SKIP:
        pairs.skip("rdma-core's test suite is not installed")
    pairs.check(p.returncode == 0, f"rdma-core's RC traffic tests pass under faults (all {SUITE_MIN_PASS})",
                p.stderr[-3000:])


IWARP_FPDUS = 3 * 10  # the rping client's: a Read Response and two Sends a ping
IWARP_CASES = [
    # name, server options, client faults, what each side's iwarp_device must show
    ("delay", [], "delay=2ms,seed=5",
     {"client": {"faults.delayed": IWARP_FPDUS, "iwarp.terminates_received": 0},
      "server": {"iwarp.crc_err": 0, "counters.rcvd_pkts": IWARP_FPDUS}}),
    ("corrupt", ["--mpa-crc"], "corrupt=10%,seed=3",
     {"client": {"faults.corrupted": 1, "iwarp.terminates_received": 1},
      "server": {"iwarp.crc_err": 1, "iwarp.terminates_sent": 1}}),
    ("reset", [], "drop=5",
     # The engine built 5 FPDUs; the reset took the place of the 5th on the wire.
     {"client": {"faults.dropped_nth": 1, "iwarp.terminates_received": 0, "counters.sent_pkts": 5},
      "server": {"iwarp.terminates_sent": 0}}),
]


def field(d, path):
    group, name = path.split(".")
    return (d["faults"]["tx"] if group == "faults" else d[group])[name]


def test_iwarp(softrdma, work):
    pairs.need_program("rping")
    for name, server_opts, client_faults, expect in IWARP_CASES:
        files = {role: os.path.join(work, f"iwarp-{name}-{role}.json") for role in ("server", "client")}
        deadline = time.monotonic() + 30
        sides = pairs.start_iwarp_rping(softrdma, free_loopback_pair(), work, f"iwarp-{name}", 10, deadline,
                                        ["--stats", files["server"], *server_opts],
                                        ["--stats", files["client"], "--faults", client_faults])
        if sides is None:
            continue
        for role in ("client", "server"):
            sides[role].wait(deadline)
            pairs.check(not sides[role].timed_out, f"iwarp {name}: the {role} ends (no hang)", sides[role].report())
        for role in ("server", "client"):
            snap = stats_of(files[role], f"iwarp {name} {role}")
            if snap is None or not pairs.check("iwarp_device" in snap, f"iwarp {name}: {role} has iwarp_device"):
                continue
            d = snap["iwarp_device"]
            print(f"iwarp {name} {role}: iwarp {d['iwarp']}; faults {d['faults']['tx']}")
            pairs.check(d["iwarp"]["disconnects"] == 1, f"iwarp {name}: the {role} saw its connection end once")
            got = {k: field(d, k) for k in expect[role]}
            pairs.check(got == expect[role], f"iwarp {name}: the {role}'s counters are {expect[role]}", f"{got}")
        if name == "delay":
            pairs.check(sides["client"].proc.returncode == 0 and sides["server"].proc.returncode == 0,
                        "iwarp delay: both programs exit 0", sides["client"].report())


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    test, softrdma = argv[1], argv[2]
    validate = argv[3] if len(argv) > 3 else None
    pairs.need_program("ibv_rc_pingpong")
    with tempfile.TemporaryDirectory(prefix=f"softrdma-faults-{test}-") as work:
        if test == "pingpong":
            test_pingpong(softrdma, validate, work)
        elif test == "lost_requests":
            test_lost_requests(softrdma, work)
        elif test in ("write_bw", "read_bw"):
            pairs.need_program(f"ib_{test}")
            test_bw(softrdma, work, f"ib_{test}")
        elif test == "linkdown":
            test_linkdown(softrdma, work)
        elif test == "suite":
            test_suite(softrdma)
        elif test == "iwarp":
            test_iwarp(softrdma, work)
        else:
            print(f"unknown test {test!r}\n{__doc__}", file=sys.stderr)
            return 2
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
