#!/usr/bin/env python3
"""`softrdma run --capture FILE` (SOFTRDMA_CAPTURE): the device's own capture of an
ibv_rc_pingpong -c pair on loopback.

usage: device_capture_test.py SOFTRDMA TSHARK_VALIDATE

The server runs plainly, the client with --capture. The file must pass TSHARK_VALIDATE
(SOFTRDMA_SHARED_DIR/tools/tshark-validate.sh) with every checksum checked (the synthesised IPv4 header
checksum, and the UDP checksum, 0 over IPv4 as the socket sends it) and `softrdma dump
--check`, and hold exactly the SEND packets of the exchange: the client sends ITERS messages
and receives ITERS, each cut into SIZE / MTU packets; the rest are ACKs. Exit 77 when
ibv_rc_pingpong, tshark or capinfos is not installed or the validator is absent.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, listens, free_port, check, ...)

SIZE, ITERS, MTU = 4096, 20, 1024  # rc_pingpong's defaults except -n: 4 packets a message
SEND_PACKETS = 2 * ITERS * (SIZE // MTU)
RC_ACK = "RC_ACKNOWLEDGE"


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    softrdma, validate = argv[1], argv[2]
    pairs.need_program("ibv_rc_pingpong")
    pairs.need_capture_tools(validate)

    pair = pairs.pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", ["-c", "-n", str(ITERS), "-s", str(SIZE)], SIZE, ITERS)
    with tempfile.TemporaryDirectory(prefix="softrdma-capture-") as work:
        pcap = os.path.join(work, "client.pcap")
        deadline = time.monotonic() + pairs.PAIR_TIMEOUT
        server = None
        for attempt in range(3):
            port = pairs.free_port()
            server = pairs.Side("server", [softrdma, "run", "--"] + pair.argv("loop", port), work, f"s{attempt}")
            until = min(deadline, time.monotonic() + pairs.LISTEN_TIMEOUT)
            while server.alive() and not pairs.listens(server.pid, port) and time.monotonic() < until:
                time.sleep(0.05)
            if server.alive() and pairs.listens(server.pid, port):
                break
            server.kill()
            out, err = server.output()
            if pairs.PORT_TROUBLE.search(out + err) and attempt < 2:
                continue
            pairs.check(False, f"the server listens on TCP port {port}", server.report())
            return pairs.finish()
        client = pairs.Side("client", [softrdma, "run", "--capture", pcap, "--"] + pair.argv("loop", port, "127.0.0.1"),
                            work, "c")
        client.wait(deadline)
        server.wait(min(deadline, time.monotonic() + 20) if not client.timed_out else time.monotonic())
        if not pairs.judge_pair(pair, "loop", server, client):
            return pairs.finish()
        if not pairs.check(os.path.exists(pcap), f"the client wrote {pcap}"):
            return pairs.finish()

        p = subprocess.run([validate, pcap, work], capture_output=True, text=True,
                           env=pairs.tool_env(TSHARK_UDP_CHECKSUM="TRUE"), timeout=60)
        print(f"tshark-validate.sh: {p.stdout.strip()}")
        pairs.check(p.returncode == 0, "tshark-validate.sh passes the capture, UDP checksums checked too",
                    p.stdout + p.stderr)

        p = subprocess.run([softrdma, "dump", "--check", pcap], capture_output=True, text=True,
                           env=pairs.clean_env(), timeout=60)
        pairs.check(p.returncode == 0, "softrdma dump --check passes the capture", (p.stdout[-3000:] + p.stderr))

        p = subprocess.run([softrdma, "dump", "--json", pcap], capture_output=True, text=True,
                           env=pairs.clean_env(), timeout=60)
        records = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        summary = records[-1] if records else {}
        opcodes = [r.get("op") for r in records[:-1]]
        sends = sum(1 for o in opcodes if o and o.startswith("RC_SEND_"))  # First, Middle, Last(+Imm), Only(+Imm)
        acks = sum(1 for o in opcodes if o == RC_ACK)
        print(f"capture: {len(records) - 1} frames, summary {summary}; {sends} SEND packets, {acks} ACKs, "
              f"{len(opcodes) - sends - acks} others")
        pairs.check(p.returncode == 0 and len(records) > 1, "softrdma dump --json reads the capture", p.stderr)
        pairs.check(sends == SEND_PACKETS, f"the capture holds exactly {SEND_PACKETS} SEND packets", f"{sends}")
        pairs.check(acks > 0 and sends + acks == len(opcodes), "every other packet is an ACK",
                    f"{sorted(set(opcodes))}")
        pairs.check(summary.get("icrc_bad", 1) == 0 and summary.get("icrc_ok") == len(records) - 1,
                    "every frame is RoCE with a good ICRC", f"{summary}")
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
