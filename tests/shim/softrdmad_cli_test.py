#!/usr/bin/env python3
"""softrdmad's command line: options, the config file, usage errors, a live socket refused,
a stale one replaced, a clean exit on SIGTERM and SIGINT, and the daemon's device as
`softrdma devices --daemon` and `softrdma stats` show it.

usage: softrdmad_cli_test.py SOFTRDMAD SOFTRDMA

Each daemon gets its own address in 127.84.0.0/24 and a socket in a temporary directory.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_pairs_test import check, finish, stop_process  # noqa: E402


def run(argv, timeout=10):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def start(argv, sock):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until = time.monotonic() + 10
    while not os.path.exists(sock) and p.poll() is None and time.monotonic() < until:
        time.sleep(0.02)
    return p


def stop(p, sig=signal.SIGTERM):
    """(exit status, stderr); None when it had to be killed."""
    _, err = stop_process(p, sig)
    return (None if p.returncode == -signal.SIGKILL else p.returncode), err


def main(argv):
    softrdmad, softrdma = argv[1], argv[2]
    h = run([softrdmad, "--help"])
    check(h.returncode == 0 and "usage: softrdmad" in h.stdout and "--config FILE" in h.stdout, "--help prints the usage, exit 0")
    v = run([softrdmad, "--version"])
    check(v.returncode == 0 and re.fullmatch(r"softrdmad \d+\.\d+\.\d+\n", v.stdout), "--version prints the version, exit 0")
    for bad, says in ((["--bogus"], "unknown option '--bogus'"), (["--ip"], "--ip needs a value"),
                      (["stray"], "unexpected argument 'stray'"), (["--shutdown-grace", "soon"], "milliseconds"),
                      (["--faults", "loss=lots"], "--faults 'loss=lots'"), (["--group", "no-such-group-xyz"], "no group"),
                      (["--group", "4294967295"], "no group"),  # gid -1 means "no change" to chown
                      (["--backend", "dpdk"], "--backend dpdk needs --ip"), (["--backend", "tcp"], "udp or dpdk"),
                      (["--eal", "-l 0"], "need --backend dpdk"),
                      (["--backend", "dpdk", "--ip", "10.0.0"], "not an IPv4 or IPv6 address"),
                      (["--backend", "dpdk", "--ip", "127.84.0.3", "--dpdk-port", "x"], "--dpdk-port takes"),
                      (["--backend", "dpdk", "--ip", "127.84.0.3", "--poll-interval", "0"], "--poll-interval takes"),
                      (["--backend", "dpdk", "--ip", "127.84.0.3", "--dpdk-mac", "01:00:5e:00:00:01"], "unicast MAC"),
                      (["--backend", "dpdk", "--ip", "127.84.0.3", "--dpdk-mac", "02:00:00:00:00"], "unicast MAC"),
                      (["--backend", "dpdk", "--ip", "127.84.0.3", "--dpdk-queues", "0"], "--dpdk-queues takes"),
                      (["--dpdk-mac", "02:00:00:00:00:01"], "need --backend dpdk"),
                      (["--gateway", "127.84.0.254"], "need --backend dpdk"),
                      (["--ip", "127.84.0.3/8"], "prefix with --backend dpdk only"),
                      (["--backend", "dpdk", "--ip", "10.77.9.1", "--gateway", "10.77.9.254"], "needs --ip ADDRESS/PREFIX"),
                      (["--backend", "dpdk", "--ip", "10.77.9.1/x"], "number of bits")):
        r = run([softrdmad] + bad)
        check(r.returncode == 2 and says in r.stderr, f"{' '.join(bad)}: exit 2 and says {says!r}", r.stderr)
    # Refused by the backend before EAL starts: the device cannot start (exit 1).
    for bad, says in ((["--ip", "10.77.9.1/24", "--gateway", "10.77.10.1"], "is not on the link"),
                      (["--ip", "10.77.9.1/33"], "is longer than"),
                      (["--ip", "10.77.9.1/24", "--gateway", "fd77::1"], "is not of")):
        r = run([softrdmad, "--socket", "/nonexistent/d.sock", "--backend", "dpdk"] + bad)
        check(r.returncode == 1 and says in r.stderr, f"{' '.join(bad)}: exit 1 and says {says!r}", r.stderr)

    with tempfile.TemporaryDirectory(prefix="softrdmad-cli-") as work:
        os.environ["SOFTRDMA_RUNTIME_DIR"] = os.path.join(work, "runtime")  # the daemons' stats endpoints
        sock = os.path.join(work, "d.sock")
        config = os.path.join(work, "d.conf")
        with open(config, "w") as f:
            f.write(f"# a comment\nip = 127.84.0.7\nsocket = {sock}   # trailing comment\nno-gso = true\n")
        p = start([softrdmad, "--config", config], sock)
        check(os.path.exists(sock), "the config file's socket is listened on")
        d = run([softrdma, "run", f"--daemon={sock}", "--", "ibv_devinfo", "-v"])
        check(d.returncode == 0 and "::ffff:127.84.0.7" in d.stdout, "a client sees the config file's address as GID 0",
              d.stdout[-2000:] + d.stderr)
        d = run([softrdma, "devices", f"--daemon={sock}"])
        check(d.returncode == 0 and "srdma0" in d.stdout and "bound address:  127.84.0.7" in d.stdout,
              "softrdma devices --daemon shows the daemon's device and address", d.stdout + d.stderr)
        st = run([softrdma, "stats", "--json", "--pid", str(p.pid)])
        reports = [json.loads(line) for line in st.stdout.splitlines() if line.strip()]
        check(st.returncode == 0 and len(reports) == 1 and reports[0]["program"] == "softrdmad" and
              reports[0]["address"] == "127.84.0.7" and "loopback_packets" in reports[0]["udp"] and
              "port" not in reports[0],
              "softrdma stats shows the daemon's device (no port counters: the udp backend)", st.stdout + st.stderr)
        # The daemon's DMA counters move with a client's traffic.
        pingpong = [softrdma, "run", f"--daemon={sock}", "--", "ibv_rc_pingpong", "-g", "0", "-n", "20", "-p", "18531"]
        server = subprocess.Popen(pingpong, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
        client = run(pingpong + ["127.84.0.7"], timeout=30)
        server_out = server.communicate(timeout=30)[0]
        st = run([softrdma, "stats", "--json", "--pid", str(p.pid)])
        dma = json.loads(st.stdout).get("dma", {}) if st.returncode == 0 else {}
        check(client.returncode == 0 and server.returncode == 0 and dma.get("read_calls", 0) > 0 and
              dma.get("write_calls", 0) > 0 and dma.get("lost_write_bytes") == 0,
              "softrdma stats shows the daemon's process_vm_* calls after a pingpong, no write lost",
              f"{dma}\n{client.stdout[-800:]}{client.stderr[-800:]}{server_out[-800:]}")
        d = run([softrdma, "devices", f"--daemon={sock}", "--ip", "127.84.0.1"])
        check(d.returncode == 2 and "--daemon takes no address" in d.stderr, "devices: --daemon with --ip is refused",
              d.stderr)
        again = run([softrdmad, "--socket", sock, "--ip", "127.84.0.8"])
        check(again.returncode == 1 and "another softrdmad is serving" in again.stderr, "a live socket is refused",
              again.stderr)
        rc, err = stop(p)
        check(rc == 0 and "shutting down" in err, "SIGTERM: exit 0", err)
        check(not os.path.exists(sock), "the socket file is removed at exit")

        # A stale socket file (no one listening) is replaced; the command line beats the file.
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stale.bind(sock)
        stale.close()
        p = start([softrdmad, "--config", config, "--ip", "127.84.0.9"], sock)
        d = run([softrdma, "run", f"--daemon={sock}", "--", "ibv_devinfo", "-v"])
        check(d.returncode == 0 and "::ffff:127.84.0.9" in d.stdout, "a stale socket is replaced; --ip overrides the file",
              d.stderr)
        rc, err = stop(p, signal.SIGINT)
        check(rc == 0, "SIGINT: exit 0", err)

        with open(config, "w") as f:
            f.write("ip 127.84.0.7\n")
        r = run([softrdmad, "--config", config])
        check(r.returncode == 2 and "expected 'name = value'" in r.stderr, "a config line without '=' is a usage error",
              r.stderr)
        with open(config, "w") as f:
            f.write("colour = blue\n")
        r = run([softrdmad, "--config", config])
        check(r.returncode == 2 and "unknown setting 'colour'" in r.stderr, "an unknown setting is a usage error", r.stderr)

    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
