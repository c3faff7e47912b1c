#!/usr/bin/python3
"""`softrdma dump --json` prints one JSON object per packet and a summary, with the fields a
person reads in the text form. usage: dump_json_test.py SOFTRDMA_BINARY TEST_DATA_DIR"""
import json
import subprocess
import sys

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
print("dump --json: 10 packets and the summary decode; fields match tshark's")
