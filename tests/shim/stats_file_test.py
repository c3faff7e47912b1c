#!/usr/bin/env python3
"""The exit snapshot: `softrdma run --stats FILE` / SOFTRDMA_STATS_FILE.

usage: stats_file_test.py SOFTRDMA

1. An unmodified ibv_rc_pingpong -c pair on loopback, both sides with --stats and the client
   also with --capture: each file is one JSON object naming its process, with every counter
   group; what one side sent the other received (engine and socket counters alike); each side
   sent at least its ITERS messages of SIZE / MTU packets; nothing was dropped or malformed;
   the client's capture counters equal its socket's packets both ways (the snapshot is written
   after the capture's own exit flush).
2. SOFTRDMA_STATS_FILE with ibv_devinfo (a device that starts and never makes a QP): a relative
   name is written in the starting folder, with zero packets and no QPs, and no temporary
   file is left beside it; an unwritable name gives one 'softrdma: stats file' line on stderr
   and changes nothing else.
3. An rping -V -C RPING_COUNT pair on two srdmaiw0 devices (--iwarp), both with --stats: each
   file also holds "iwarp_device", where the client initiated one connection and the server
   accepted it, each saw it end once, no Terminate and no bad CRC, and the FPDUs are rping's
   exactly (the client sends a Read Response and two Sends a ping, the server a Read Request,
   a Write and two Sends), each side's received as the other sent them, and the TCP bytes too.
Exit 77 when ibv_rc_pingpong or ibv_devinfo is not installed (rping: its part is skipped).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, listens, free_port, check, ...)
from rdmacm_pairs_test import free_loopback_pair  # noqa: E402

SIZE, ITERS, MTU = 4096, 50, 1024  # rc_pingpong's defaults except -n: 4 packets a message
GROUPS = {
    "counters": ["sent_pkts", "sent_bytes", "rcvd_pkts", "rcvd_bytes", "retransmitted_pkts", "local_ack_timeout_err",
                 "rcvd_seq_err", "out_of_seq_request", "duplicate_request", "rcvd_rnr_err", "send_rnr_err",
                 "retry_exceeded_err", "rnr_retry_exceeded_err", "icrc_err", "icrc_ipv4_id_solved", "malformed", "unknown_qp",
                 "dropped", "mcast_rcvd", "mcast_dropped"],
    "udp": ["tx_packets", "tx_bytes", "tx_errors", "tx_no_route", "rx_packets", "rx_bytes", "rx_truncated",
            "rx_errors", "rx_kernel_drops", "tx_gso_datagrams", "rx_gro_datagrams", "loopback_packets", "last_tx_errno"],
    "capture": ["frames_written", "frames_dropped"],
}
FAULT_FIELDS = ["passed", "lost", "duplicated", "corrupted", "reordered", "delayed"]


def load(path, what):
    """The JSON object in PATH, or None after a failed check."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        pairs.check(False, f"{what}: {path} exists", str(e))
        return None
    try:
        obj = json.loads(text)
    except ValueError as e:
        pairs.check(False, f"{what}: {path} is JSON", f"{e}: {text[:500]!r}")
        return None
    pairs.check(isinstance(obj, dict) and text.count("\n") == 1, f"{what}: {path} is one JSON object on one line")
    return obj


def check_shape(obj, what, pid, program):
    pairs.check(obj.get("format") == 1 and obj.get("pid") == pid and obj.get("program") == program
                and obj.get("device") == "srdma0" and str(obj.get("address", "")).startswith("127."),
                f"{what}: format 1, pid {pid}, program {program}, srdma0 on a 127.x address",
                json.dumps({k: obj.get(k) for k in ("format", "pid", "program", "device", "address")}))
    missing = [f"{group}.{name}" for group, names in GROUPS.items() for name in names
               if not isinstance(obj.get(group, {}).get(name), int)]
    missing += [f"faults.{d}.{name}" for d in ("tx", "rx") for name in FAULT_FIELDS
                if not isinstance(obj.get("faults", {}).get(d, {}).get(name), int)]
    pairs.check(not missing, f"{what}: every counter is there as an integer", ", ".join(missing))
    pairs.check(isinstance(obj.get("qps"), list), f"{what}: a list of live QPs")


def pair_snapshots(softrdma, work):
    pair = pairs.pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", ["-c", "-n", str(ITERS), "-s", str(SIZE)], SIZE, ITERS)
    files = {"server": os.path.join(work, "server.json"), "client": os.path.join(work, "client.json")}
    pcap = os.path.join(work, "client.pcap")
    deadline = time.monotonic() + pairs.PAIR_TIMEOUT
    server, port = pairs.start_listening(
        lambda p: [softrdma, "run", "--stats", files["server"], "--"] + pair.argv("loop", p), work, "s", deadline)
    if server is None:
        return
    client = pairs.Side("client", [softrdma, "run", "--stats", files["client"], "--capture", pcap, "--"]
                        + pair.argv("loop", port, "127.0.0.1"), work, "c")
    client.wait(deadline)
    server.wait(min(deadline, time.monotonic() + 20) if not client.timed_out else time.monotonic())
    if not pairs.judge_pair(pair, "loop", server, client):
        return
    snap = {}
    for side in (server, client):
        obj = load(files[side.role], side.role)
        if obj is None:
            return
        check_shape(obj, side.role, side.pid, "ibv_rc_pingpong")
        snap[side.role] = obj
        print(f"{side.role}: counters {obj['counters']}\n{side.role}: udp {obj['udp']}, capture {obj['capture']}")
    s, c = snap["server"], snap["client"]
    data_packets = ITERS * SIZE // MTU
    for a, b in (("server", "client"), ("client", "server")):
        sa, sb = snap[a], snap[b]
        pairs.check(sa["counters"]["sent_pkts"] >= data_packets,
                    f"the {a} sent at least its {data_packets} SEND packets", str(sa["counters"]["sent_pkts"]))
        pairs.check(sa["counters"]["sent_pkts"] == sb["counters"]["rcvd_pkts"]
                    and sa["counters"]["sent_bytes"] == sb["counters"]["rcvd_bytes"],
                    f"what the {a}'s engine sent, the {b}'s received (packets and bytes)",
                    f"{sa['counters']['sent_pkts']}/{sa['counters']['sent_bytes']} vs "
                    f"{sb['counters']['rcvd_pkts']}/{sb['counters']['rcvd_bytes']}")
        pairs.check(sa["udp"]["tx_packets"] == sa["counters"]["sent_pkts"]
                    and sa["udp"]["tx_packets"] == sb["udp"]["rx_packets"],
                    f"the {a}'s socket sent what its engine sent, and the {b}'s socket received it",
                    f"{sa['udp']} / {sb['udp']}")
        bad = {k: v for k, v in sa["counters"].items()
               if k in ("icrc_err", "malformed", "unknown_qp", "dropped", "retry_exceeded_err") and v}
        pairs.check(not bad, f"the {a} dropped nothing and no retry was exceeded", str(bad))
    pairs.check(c["capture"]["frames_written"] == c["udp"]["tx_packets"] + c["udp"]["rx_packets"]
                and c["capture"]["frames_dropped"] == 0,
                "the client's capture counters are final: every packet sent and received, written",
                f"{c['capture']} vs {c['udp']}")
    pairs.check(s["capture"]["frames_written"] == 0, "the server, without a capture, wrote no frames")
    pairs.check(not [k for k in os.listdir(work) if ".tmp." in k], "no temporary file is left", str(os.listdir(work)))


RPING_COUNT = 10
RPING_FPDUS = {"client": 3 * RPING_COUNT, "server": 4 * RPING_COUNT}


def iwarp_snapshots(softrdma, work):
    if shutil.which("rping") is None:
        print("SKIPPED (iWARP part): rping is not installed (apt-get install rdmacm-utils)")
        return
    files = {role: os.path.join(work, f"iwarp-{role}.json") for role in ("server", "client")}
    deadline = time.monotonic() + pairs.PAIR_TIMEOUT
    server_ip, client_ip = free_loopback_pair()
    sides = pairs.start_iwarp_rping(softrdma, (server_ip, client_ip), work, "iwarp", RPING_COUNT, deadline,
                                    ["--stats", files["server"]], ["--stats", files["client"]])
    if sides is None:
        return
    for role in ("client", "server"):
        sides[role].wait(deadline)
        if not pairs.check(sides[role].proc.returncode == 0, f"iWARP rping {role} exits 0", sides[role].report()):
            return
    snap = {}
    for role in ("server", "client"):
        obj = load(files[role], f"iWARP {role}")
        if obj is None or not pairs.check(isinstance(obj.get("iwarp_device"), dict),
                                          f"iWARP {role}: the file holds iwarp_device", json.dumps(obj)[:2000]):
            return
        snap[role] = obj["iwarp_device"]
        print(f"iWARP {role}: {json.dumps(snap[role])}")
    s, c = snap["server"], snap["client"]
    pairs.check(c["device"] == "srdmaiw0" and c["address"] == client_ip and s["address"] == server_ip,
                "iwarp_device names srdmaiw0 and its address", f"{c['device']} {c['address']} {s['address']}")
    pairs.check(c["iwarp"]["connections_initiated"] == 1 and c["iwarp"]["connections_accepted"] == 0
                and s["iwarp"]["connections_accepted"] == 1 and s["iwarp"]["connections_initiated"] == 0,
                "the client initiated one connection, the server accepted it", f"{c['iwarp']} / {s['iwarp']}")
    for role, d in snap.items():
        errors = {k: d["iwarp"][k] for k in ("terminates_sent", "terminates_received", "crc_err", "connect_errors")}
        pairs.check(d["iwarp"]["disconnects"] == 1 and not any(errors.values()),
                    f"the {role} saw it end once, with no Terminate and no bad CRC", f"{d['iwarp']}")
        pairs.check(d["counters"]["sent_pkts"] == RPING_FPDUS[role],
                    f"the {role} sent rping's {RPING_FPDUS[role]} FPDUs", f"{d['counters']['sent_pkts']}")
    for a, b in (("server", "client"), ("client", "server")):
        sa, sb = snap[a], snap[b]
        pairs.check(sa["counters"]["sent_pkts"] == sb["counters"]["rcvd_pkts"]
                    and sa["counters"]["sent_bytes"] == sb["counters"]["rcvd_bytes"]
                    and sa["iwarp"]["tcp_bytes_sent"] == sb["iwarp"]["tcp_bytes_received"]
                    and sa["iwarp"]["tcp_bytes_sent"] > sa["counters"]["sent_bytes"],
                    f"what the {a} sent, the {b} received: FPDUs, their bytes, and TCP's (with MPA's frames)",
                    f"{sa} / {sb}")


def devinfo(softrdma, work, stats_file):
    """Runs ibv_devinfo under softrdma with SOFTRDMA_STATS_FILE; returns (pid, exit, stdout, stderr)."""
    env = pairs.clean_env()
    env["SOFTRDMA_STATS_FILE"] = stats_file
    proc = subprocess.Popen([softrdma, "run", "--", "ibv_devinfo"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=30)
    return proc.pid, proc.returncode, out, err


def devinfo_snapshots(softrdma, work):
    pid, rc, out, err = devinfo(softrdma, work, "devinfo.json")  # relative: in the program's folder
    pairs.check(rc == 0 and "srdma0" in out, "ibv_devinfo sees srdma0", out + err)
    obj = load(os.path.join(work, "devinfo.json"), "ibv_devinfo")
    if obj is not None:
        check_shape(obj, "ibv_devinfo", pid, "ibv_devinfo")
        pairs.check(obj["counters"]["sent_pkts"] == 0 and obj["udp"]["rx_packets"] == 0 and obj["qps"] == [],
                    "ibv_devinfo: no packets and no QPs", json.dumps(obj))

    _, rc, out, err = devinfo(softrdma, work, os.path.join(work, "no-such-folder", "x.json"))
    errors = [line for line in err.splitlines() if line.startswith("softrdma: stats file ")]
    pairs.check(rc == 0 and "srdma0" in out and len(errors) == 1 and "No such file or directory" in errors[0],
                "an unwritable stats file: one 'softrdma: stats file' line, the program unaffected",
                f"exit {rc}\n{err}")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    softrdma = os.path.abspath(argv[1])
    pairs.need_program("ibv_rc_pingpong")
    pairs.need_program("ibv_devinfo")
    with tempfile.TemporaryDirectory(prefix="softrdma-stats-") as work:
        pair_snapshots(softrdma, work)
        devinfo_snapshots(softrdma, work)
        iwarp_snapshots(softrdma, work)
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
