#!/usr/bin/env python3
"""`softrdma run --iwarp --capture FILE`: srdmaiw0's own capture of an rping -V pair on
loopback.

usage: iwarp_capture_test.py SOFTRDMA TSHARK_VALIDATE

Both sides run on srdmaiw0 (embedded), the client with --capture. The file must pass
TSHARK_VALIDATE with IP and TCP checksums checked, and `softrdma dump --check`, and hold
exactly the exchange rping makes: the MPA request and reply, then for each of COUNT pings the
server's RDMA Read Request and RDMA Write, the client's Read Response, and four Sends (two each
way), every FPDU whole in its TCP segment (no frame tshark finds malformed). Exit 77 when rping,
tshark or capinfos is not installed or the validator is absent.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402
from rdmacm_pairs_test import free_loopback_pair  # noqa: E402

COUNT = 10
EXPECTED = {"MPA_REQUEST": 1, "MPA_REPLY": 1, "READ_REQUEST": COUNT, "WRITE": COUNT, "READ_RESPONSE": COUNT,
            "SEND": 4 * COUNT}
TIMEOUT = 60


def rping_side(softrdma, role, ip, server_ip, port, work, extra=()):
    argv = [softrdma, "run", "--iwarp", "--ip", ip, *extra, "--", "rping", "-s" if role == "server" else "-c",
            "-a", server_ip, "-p", str(port), "-V", "-C", str(COUNT)]
    return pairs.Side(role, argv, work, "rping")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    softrdma, validate = argv[1], argv[2]
    pairs.need_program("rping")
    pairs.need_capture_tools(validate)
    server_ip, client_ip = free_loopback_pair()
    port = pairs.free_port()
    with tempfile.TemporaryDirectory(prefix="softrdma-iwarp-capture-") as work:
        pcap = os.path.join(work, "client.pcap")
        deadline = time.monotonic() + TIMEOUT
        server = rping_side(softrdma, "server", server_ip, server_ip, port, work)
        while server.alive() and not pairs.listens(server.pid, port) and time.monotonic() < deadline:
            time.sleep(0.05)
        listening = server.alive() and pairs.listens(server.pid, port)
        if not pairs.check(listening, f"the server listens on TCP port {port}", server.report()):
            server.kill()
            return pairs.finish()
        client = rping_side(softrdma, "client", client_ip, server_ip, port, work, ["--capture", pcap])
        client.wait(deadline)
        server.wait(min(deadline, time.monotonic() + 20))
        for side in (server, client):
            pairs.check(side.proc.returncode == 0, f"the {side.role} exits 0", side.report())
        if not pairs.check(os.path.exists(pcap), f"the client wrote {pcap}"):
            return pairs.finish()

        p = subprocess.run([validate, pcap, work], capture_output=True, text=True,
                           env=pairs.tool_env(TSHARK_TCP_CHECKSUM="TRUE"), timeout=60)
        print(f"tshark-validate.sh: {p.stdout.strip()}")
        pairs.check(p.returncode == 0, "tshark-validate.sh passes the capture, TCP checksums checked",
                    p.stdout + p.stderr)

        p = subprocess.run([softrdma, "dump", "--check", pcap], capture_output=True, text=True,
                           env=pairs.clean_env(), timeout=60)
        pairs.check(p.returncode == 0, "softrdma dump --check passes the capture", p.stdout[-3000:] + p.stderr)

        p = subprocess.run([softrdma, "dump", "--json", pcap], capture_output=True, text=True,
                           env=pairs.clean_env(), timeout=60)
        records = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        iwarp = [r for r in records if r.get("encap") == "iwarp"]
        counts = {op: sum(1 for r in iwarp if r.get("op") == op) for op in EXPECTED}
        print(f"capture: {len(records)} records, {len(iwarp)} iWARP: {counts}")
        pairs.check(counts == EXPECTED, f"the capture holds rping's exchange exactly: {EXPECTED}", f"{counts}")
        pairs.check(len(iwarp) == sum(EXPECTED.values()), "and no other iWARP frame",
                    f"{sorted({r.get('op') for r in iwarp})}")
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
