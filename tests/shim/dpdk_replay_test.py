#!/usr/bin/env python3
"""Real captures replayed into softrdmad's dpdk backend through net_pcap: the frames that real
NICs and Linux rxe sent reach the engine as they would off a wire, and the engine judges their
ICRCs over the IPv4 header they really carried.

usage: dpdk_replay_test.py SOFTRDMAD SOFTRDMA MANIFEST.tsv

For each RoCEv2 capture in the manifest (SOFTRDMA_SHARED_DIR/captures/MANIFEST.tsv) whose ICRC verdict
is known, the busiest receiver in it (destination MAC and IPv4 address) becomes the daemon:
`--ip` is its address and `--dpdk-mac` its MAC (net_pcap cannot take a MAC, so the port is
made promiscuous), and net_pcap's rx_pcap feeds it the unmodified file. tshark, not our
code, says what to expect:
- the port: every frame of the file in; the link keeps exactly the UDP/4791 IPv4 frames for
  that MAC and address with a good header checksum, and none is malformed;
- the engine: as many ICRC failures as the manifest's verdict gives those frames (a capture
  whose every ICRC is invalid: every packet refused), every other packet dropped as addressed
  to a QP that does not exist (the daemon has no client) or as a transport it does not parse, or
  taken by QP1's connection manager (CM MADs in the capture), and no
  IPv4 ID guessed: the dpdk backend hands the engine the real one, which a UDP socket cannot
  (rxe's IDs are not zero; through the udp backend these packets count icrc_ipv4_id_solved).
"""

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_pairs_test import EAL_ARGS, check, clean_env, finish, skip, stop_process, tool_env  # noqa: E402

REPLAY_TIMEOUT = 15  # seconds for a daemon to take in a whole file


def tshark_frames(path):
    """(frame number, eth.dst, ip.dst, UDP/4791, IPv4 checksum good, fragment) per frame."""
    fields = ["frame.number", "eth.dst", "ip.dst", "udp.dstport", "ip.checksum.status", "ip.flags.mf",
              "ip.frag_offset"]
    argv = ["tshark", "-r", path, "-n", "-o", "ip.check_checksum:TRUE", "-T", "fields", "-E", "occurrence=f"]
    for f in fields:
        argv += ["-e", f]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=tool_env())
    if p.returncode != 0:
        return None
    frames = []
    for line in p.stdout.splitlines():
        number, mac, ip, dport, status, mf, frag = (line.split("\t") + [""] * 7)[:7]
        frames.append({"number": int(number), "mac": mac, "ip": ip, "roce": dport == "4791" and ip != "",
                       "checksum_good": status in ("1", "2"),  # 2: unverified (tshark could not check)
                       "fragment": mf == "1" or frag not in ("", "0")})
    return frames


def bad_icrc_frames(verdict, ours):
    if verdict == "all-valid":
        return set()
    if verdict == "all-invalid":
        return {f["number"] for f in ours}
    return {int(n) for n in verdict.split(":", 1)[1].split(",")}  # invalid-frames:N,M


def daemon_stats(softrdma, env):
    p = subprocess.run([softrdma, "stats", "--json"], capture_output=True, text=True, timeout=10, env=env)
    for line in p.stdout.splitlines():
        report = json.loads(line)
        if report.get("program") == "softrdmad":
            return report
    return None


def replay(softrdmad, softrdma, path, verdict, work):
    name = os.path.basename(path)
    frames = tshark_frames(path)
    if not check(frames is not None, f"{name}: tshark reads it"):
        return
    receivers = Counter((f["mac"], f["ip"]) for f in frames if f["roce"])
    if not receivers:
        print(f"skip {name}: no RoCEv2 over IPv4 in it", flush=True)
        return
    (mac, ip), _ = receivers.most_common(1)[0]
    to_us = [f for f in frames if f["roce"] and f["mac"] == mac and f["ip"] == ip]
    ours = [f for f in to_us if f["checksum_good"] and not f["fragment"]]
    bad = bad_icrc_frames(verdict, ours)
    want_bad = sum(1 for f in ours if f["number"] in bad)

    env = dict(clean_env(), SOFTRDMA_RUNTIME_DIR=os.path.join(work, "run"))  # the daemon's stats endpoint
    os.makedirs(env["SOFTRDMA_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    eal = f"{EAL_ARGS} --file-prefix=srdmareplay --vdev=net_pcap0,rx_pcap={path},tx_pcap={os.path.join(work, 'tx.pcap')}"
    argv = [softrdmad, "--socket", os.path.join(work, "d.sock"), "--backend", "dpdk", "--ip", ip, "--dpdk-mac", mac,
            "--eal", eal]
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    report = None
    until = time.monotonic() + REPLAY_TIMEOUT
    while daemon.poll() is None and time.monotonic() < until:
        report = daemon_stats(softrdma, env)
        if report and report.get("port", {}).get("port_rx_frames") == len(frames):
            break
        time.sleep(0.1)
    _, err = stop_process(daemon)
    where = f"{name} as {ip} ({mac})"
    check(daemon.returncode == 0, f"{where}: the daemon exits 0 on SIGTERM", err[-1500:])
    if not check(report is not None and "port" in report, f"{where}: the daemon reports its port", err[-1500:]):
        return
    port, engine = report["port"], report["counters"]
    check(port["port_rx_frames"] == len(frames), f"{where}: the port took in all {len(frames)} frames",
          json.dumps(port))
    check(port["rx_roce"] == len(ours) and port["rx_malformed"] == 0,
          f"{where}: the link keeps the {len(ours)} RoCEv2 frames for us, none malformed", json.dumps(port))
    if verdict == "all-invalid":
        # Their ICRC fields are not valid, and they carry RD/DC headers the engine does not
        # parse (IbPacket: malformed before the ICRC is checked): none may get further.
        check(engine["icrc_err"] + engine["malformed"] == len(ours) and engine["unknown_qp"] == 0,
              f"{where}: all {len(ours)} packets refused (bad ICRC or a transport we do not serve)",
              json.dumps(engine))
        return
    check(engine["icrc_err"] == want_bad, f"{where}: {want_bad} ICRC failures, as the manifest says",
          json.dumps(engine))
    # Packets for QP1 go to the connection manager instead: CM MADs, a malformed one, or a
    # GMP without the GSI's Q_Key (dropped).
    cm = report["cm"]
    reached = engine["unknown_qp"] + engine["malformed"] + engine["dropped"] + cm["mads_received"] + cm["malformed"]
    check(reached == len(ours) - want_bad and engine["icrc_ipv4_id_solved"] == 0,
          f"{where}: every good packet reaches QP lookup (or QP1's CM) with its real IPv4 ID",
          json.dumps(engine) + " " + json.dumps(cm))


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    softrdmad, softrdma, manifest = argv[1:]
    if not os.path.exists(manifest):
        skip(f"no capture manifest at {manifest}")
    with open(manifest, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    wanted = [r for r in rows if r["format"] in ("rocev2", "mixed") and r["icrc_expect"] != "truncated"]
    check(len(wanted) >= 10, f"the manifest lists RoCEv2 captures with ICRC verdicts ({len(wanted)})")
    base = os.path.dirname(manifest)
    for row in wanted:
        with tempfile.TemporaryDirectory(prefix="srdma-replay-") as work:
            replay(softrdmad, softrdma, os.path.join(base, row["file"]), row["icrc_expect"], work)
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
