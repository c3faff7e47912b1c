#!/usr/bin/env python3
"""`softrdma run --iwarp --capture FILE`: srdmaiw0's own capture of an rping -V pair on
loopback.

usage: iwarp_capture_test.py SOFTRDMA TSHARK_VALIDATE

Both sides run on srdmaiw0 (embedded), the client with --capture; twice: as they are (no MPA
CRCs, as nobody asks), and with the server asking for CRCs (--mpa-crc), when every FPDU both
ways must carry a good one. The file must pass
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


def exchange(softrdma, validate, work, tag, server_extra=()):
    """One captured rping pair (the server with SERVER_EXTRA options); the capture's records."""
    pcap = os.path.join(work, f"{tag}.pcap")
    deadline = time.monotonic() + TIMEOUT
    sides = pairs.start_iwarp_rping(softrdma, free_loopback_pair(), work, tag, COUNT, deadline, server_extra,
                                    ["--capture", pcap])
    if sides is None:
        return []
    server, client = sides["server"], sides["client"]
    client.wait(deadline)
    server.wait(min(deadline, time.monotonic() + 20))
    for side in (server, client):
        pairs.check(side.proc.returncode == 0, f"{tag}: the {side.role} exits 0", side.report())
    if not pairs.check(os.path.exists(pcap), f"{tag}: the client wrote {pcap}"):
        return []

    p = subprocess.run([validate, pcap, work], capture_output=True, text=True,
                       env=pairs.tool_env(TSHARK_TCP_CHECKSUM="TRUE"), timeout=60)
    print(f"tshark-validate.sh: {p.stdout.strip()}")
    pairs.check(p.returncode == 0, f"{tag}: tshark-validate.sh passes the capture, TCP checksums checked",
                p.stdout + p.stderr)
    p = subprocess.run([softrdma, "dump", "--check", pcap], capture_output=True, text=True,
                       env=pairs.clean_env(), timeout=60)
    pairs.check(p.returncode == 0, f"{tag}: softrdma dump --check passes the capture", p.stdout[-3000:] + p.stderr)

    p = subprocess.run([softrdma, "dump", "--json", pcap], capture_output=True, text=True,
                       env=pairs.clean_env(), timeout=60)
    records = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    iwarp = [r for r in records if r.get("encap") == "iwarp"]
    counts = {op: sum(1 for r in iwarp if r.get("op") == op) for op in EXPECTED}
    print(f"{tag}: {len(records)} records, {len(iwarp)} iWARP: {counts}")
    pairs.check(counts == EXPECTED, f"{tag}: the capture holds rping's exchange exactly: {EXPECTED}", f"{counts}")
    pairs.check(len(iwarp) == sum(EXPECTED.values()), f"{tag}: and no other iWARP frame",
                f"{sorted({r.get('op') for r in iwarp})}")
    return iwarp


def crcs(records):
    """The MPA CRC verdicts of the FPDUs (the MPA Request and Reply have none)."""
    return sorted({r.get("mpa_crc") for r in records if not r.get("op", "").startswith("MPA_")})


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    softrdma, validate = argv[1], argv[2]
    pairs.need_program("rping")
    pairs.need_capture_tools(validate)
    with tempfile.TemporaryDirectory(prefix="softrdma-iwarp-capture-") as work:
        plain = exchange(softrdma, validate, work, "plain")
        pairs.check(bool(plain) and crcs(plain) == ["off"], "plain: no MPA CRCs (nobody asked)", f"{crcs(plain)}")
        asked = exchange(softrdma, validate, work, "crc", ["--mpa-crc"])
        pairs.check(bool(asked) and crcs(asked) == ["ok"],
                    "crc: the server asked (--mpa-crc), and every FPDU both ways carries a good CRC",
                    f"{crcs(asked)}")
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
