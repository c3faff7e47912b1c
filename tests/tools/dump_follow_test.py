#!/usr/bin/python3
"""`softrdma dump --follow QPN` as a person runs it: the conversation of one QP of a clean rxe
capture, in text and JSON, with no flag; and the one-line errors of its options.
usage: dump_follow_test.py SOFTRDMA_BINARY TEST_DATA_DIR"""
import json
import subprocess
import sys

softrdma, data = sys.argv[1], sys.argv[2]
capture = f"{data}/rxe-rdmaops.pcap"


def dump(*args):
    return subprocess.run([softrdma, "dump", *args], capture_output=True, text=True)


text = dump("--follow", "0x1d", capture)
assert text.returncode == 0, text.stderr
lines = text.stdout.splitlines()
assert lines[0] == "follow=10.99.0.2 qp=0x00001d peer=10.99.0.3 peer_qp=0x00001b", lines[0]
packets, summaries = lines[1:-2], lines[-2:]
assert len(packets) == 23, len(packets)
assert sum(" dir=in " in p for p in packets) == 13 and sum(" dir=out " in p for p in packets) == 10, packets
# Frame numbers are the file's, so a line can be found again in the plain dump.
assert packets[0].startswith("frame=4 time=0.042017 dir=in ") and "op=RC_SEND_FIRST dqp=0x00001d" in packets[0], packets[0]
for flag in ("gap=", "read_gap=", "retransmission", "late", "duplicate", "nak=", "bad_icrc"):
    assert not any(flag in p for p in packets), flag
assert summaries[0].startswith("summary=in packets=13 gaps=0 missing_psns=0 "), summaries[0]
assert summaries[1].startswith("summary=out packets=10 gaps=0 "), summaries[1]

js = dump("--json", "--follow", "29", capture)  # QP 0x1d in decimal
assert js.returncode == 0, js.stderr
objects = [json.loads(line) for line in js.stdout.splitlines()]
head, rows, sums = objects[0], objects[1:-2], objects[-2:]
assert head == {"follow": "10.99.0.2", "qp": 0x1D, "peer": "10.99.0.3", "peer_qp": 0x1B}, head
assert len(rows) == 23
read_response = next(r for r in rows if r["op"] == "RC_RDMA_READ_RESPONSE_LAST")
assert read_response["dir"] == "out" and read_response["psn"] == 16072298, read_response
assert read_response["retransmission"] is False and read_response["duplicate"] is False, read_response
assert "gap" not in read_response and "nak" not in read_response, read_response
assert sums[0]["summary"] == "in" and sums[0]["packets"] == 13 and sums[0]["naks_rnr"] == 0, sums[0]
assert all(v == 0 for k, v in sums[1].items() if k not in ("summary", "packets")), sums[1]

for args, message in [
    (("--follow", "0x1d", "--peer", "7", capture), f"softrdma dump: {capture}: QP 0x00001d has no peer QP 0x000007"),
    (("--follow", "5", capture), f"softrdma dump: {capture}: no RoCE packet to or from QP 0x000005"),
    (("--follow", "0x1000000", capture), "softrdma dump: --follow needs a QPN (decimal or 0x hex, below 0x1000000), got '0x1000000'"),
    (("--peer", "3", capture), "softrdma dump: --peer needs --follow"),
]:
    r = dump(*args)
    assert r.returncode == 2 and r.stderr.strip() == message and r.stdout == "", (args, r.returncode, r.stderr)

assert "--follow QPN" in dump("--help").stdout
print("dump --follow: 23 packets of QP 0x1d, no flag on a clean rxe run; text, JSON and errors as documented")
