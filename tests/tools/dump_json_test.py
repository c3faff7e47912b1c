#!/usr/bin/python3
"""`softrdma dump --json` prints one JSON object per packet and a summary, with the fields a
person reads in the text form; CM MADs (packets to QP1) are named with their identifiers, and
`--check` flags a copy whose REQ has a wrong class version.
usage: dump_json_test.py SOFTRDMA_BINARY TEST_DATA_DIR"""
import json
import os
import subprocess
import sys
import tempfile

softrdma, data = sys.argv[1], sys.argv[2]
out = subprocess.run([softrdma, "dump", "--json", f"{data}/rxe-atomic-cas.pcap"], capture_output=True, text=True, check=True)
lines = [json.loads(line) for line in out.stdout.splitlines()]
packets, summary = lines[:-1], lines[-1]

assert len(packets) == 10, len(packets)
assert summary["packets"] == 10 and summary["roce"] == 10 and summary["icrc_ok"] == 10, summary
first = packets[0]
assert first["frame"] == 1 and first["op"] == "RC_COMPARE_SWAP", first
assert first["dqp"] == 0x1C and first["psn"] == 3257426, first
assert first["va"] == 0x000055851BB29000 and first["rkey"] == 0xD9C, first
assert first["icrc"] == "ok" and first["ackreq"] is True, first
ack = packets[2]
assert ack["op"] == "RC_ATOMIC_ACKNOWLEDGE" and ack["aeth"] == "ACK/credits:31" and ack["msn"] == 1, ack
assert ack["orig"] == 5127106829878049394, ack

text = subprocess.run([softrdma, "dump", f"{data}/rxe-atomic-cas.pcap"], capture_output=True, text=True, check=True).stdout
assert "op=RC_COMPARE_SWAP dqp=0x00001c psn=3257426 ackreq" in text, text.splitlines()[0]

# rxe-rping.pcap: rping's connection, REQ/REP/RTU then DREQ/DREP, values as tshark shows them.
rping = f"{data}/rxe-rping.pcap"
out = subprocess.run([softrdma, "dump", "--json", rping], capture_output=True, text=True, check=True)
lines = [json.loads(line) for line in out.stdout.splitlines()]
packets, summary = lines[:-1], lines[-1]
assert summary["packets"] == 41 and summary["roce"] == 41 and summary["malformed"] == 0, summary
cm = [p for p in packets if "cm" in p]
assert [p["cm"] for p in cm] == ["REQ", "REP", "RTU", "DREQ", "DREP"], cm
assert [p["frame"] for p in cm] == [1, 2, 3, 40, 41], cm
req = cm[0]
assert req["method"] == "Send" and req["tid"] == 0x000000022A462BCA, req
assert req["lcid"] == 0xCA2B462A and req["svc"] == 0x0000000001061C06, req
assert req["svc_ps"] == "TCP" and req["svc_port"] == 7174, req
assert req["cm_qpn"] == 0x1C and req["cm_psn"] == 0x5813AB, req
assert req["ipcm_src"] == "10.99.0.3:52554" and req["ipcm_dst"] == "10.99.0.2:7174", req
rep = cm[1]
assert rep["lcid"] == 0x0740E515 and rep["rcid"] == 0xCA2B462A and rep["cm_qpn"] == 0x1E and rep["cm_psn"] == 0xBEEFDF, rep
assert cm[3]["cm_qpn"] == 0x1E, cm[3]

text = subprocess.run([softrdma, "dump", "--check", rping], capture_output=True, text=True)
assert text.returncode == 0, text.stdout + text.stderr
assert sum(" cm=" in line for line in text.stdout.splitlines()) == 5, text.stdout
assert ("len=256 cm=REQ method=Send tid=0x000000022a462bca lcid=0xca2b462a svc=0x0000000001061c06 svc_ps=TCP "
        "svc_port=7174 cm_qpn=0x00001c cm_psn=0x5813ab ipcm_src=10.99.0.3:52554 ipcm_dst=10.99.0.2:7174 icrc=ok") in text.stdout

host = subprocess.run([softrdma, "dump", "--json", f"{data}/host-probe.pcap"], capture_output=True, text=True, check=True)
rej = json.loads(host.stdout.splitlines()[2])
assert rej["cm"] == "REJ" and rej["rcid"] == 0xCB2B462A and rej["rejected"] == "REQ", rej
assert rej["reason"] == 8 and rej["reason_name"] == "INVALID_SERVICE_ID", rej

# The same capture with the REQ's CM class version (MAD byte 2) set to 1: pcap header (24),
# record header (16), Ethernet+IPv4+UDP+BTH+DETH (62), MAD byte 2.
with open(rping, "rb") as f:
    corrupted = bytearray(f.read())
assert corrupted[24 + 16 + 62 : 24 + 16 + 62 + 3] == b"\x01\x07\x02"
corrupted[24 + 16 + 62 + 2] = 1
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "rping-bad-class-version.pcap")
    with open(path, "wb") as f:
        f.write(corrupted)
    bad = subprocess.run([softrdma, "dump", "--check", path], capture_output=True, text=True)
assert bad.returncode == 1, bad.stdout + bad.stderr
first, last = bad.stdout.splitlines()[0], bad.stdout.splitlines()[-1]
assert first == "frame=1 time=0.000000 kind=malformed error=bad_version", first
assert " malformed=1 malformed_bad_version=1" in last, last
print("dump --json: 10 packets and the summary decode; fields match tshark's; rping's 5 CM MADs named; "
      "a bad class version flagged")
