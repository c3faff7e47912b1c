#!/usr/bin/env python3
"""softrdmad when a process dies mid-transfer: unmodified programs on one daemon, killed with
SIGKILL while data flows.

usage: daemon_crash_test.py CASE SOFTRDMA SOFTRDMAD

CASE is one of:
  client  kill -9 the client of an ib_write_bw pair mid-transfer: the daemon lives on, serves a
          new ibv_rc_pingpong pair, and exits 0 on SIGTERM (the dead client's QPs, CQs and MRs
          were freed when its connection closed).
  daemon  kill -9 the daemon under a busy-polling ib_write_bw pair and an event-driven
          ibv_rc_pingpong -e pair: all four programs exit, with a failure status, within
          10 s (IBV_EVENT_DEVICE_FATAL, woken completion channels and EIO from every verb),
          never hang.

Traffic stays on 127.0.0.0/8. Exit 77 (ctest's SKIP_RETURN_CODE) when perftest or
ibverbs-utils is not installed.
"""

import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, start_listening, check, ...)

EXIT_LIMIT = 10  # seconds for programs to notice a dead daemon


def start_daemon(softrdmad, work):
    sock = os.path.join(work, "softrdmad.sock")
    daemon = pairs.Side("daemon", [softrdmad, "--socket", sock], work, "daemon")
    deadline = time.monotonic() + pairs.LISTEN_TIMEOUT
    while not os.path.exists(sock) and daemon.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not pairs.check(os.path.exists(sock), f"softrdmad listens on {sock}", daemon.report()):
        sys.exit(pairs.finish())
    return daemon, sock


def start_pair(softrdma, sock, work, tag, argv):
    """Server and client of `argv` on the daemon; returns (server, client) once both run."""
    run = [softrdma, "run", f"--daemon={sock}", "--"]
    server, port = pairs.start_listening(lambda p: run + argv + ["-p", str(p)], work, tag, time.monotonic() + 30)
    if server is None:
        sys.exit(pairs.finish())
    client = pairs.Side("client", run + argv + ["-p", str(port), "127.0.0.1"], work, tag)
    return server, client


def wait_connected(sides, seconds):
    """Waits until every side has printed its peer's address: a program still setting up its
    QP waits on its TCP exchange, not on a verb, and would never see the daemon die."""
    until = time.monotonic() + seconds
    for side in sides:
        while side.alive() and "remote address" not in side.output()[0] and time.monotonic() < until:
            time.sleep(0.05)
        pairs.check("remote address" in side.output()[0],
                    f"{' '.join(side.argv[4:6])} {side.role} exchanged addresses with its peer", side.report())


def wait_all(sides, seconds):
    until = time.monotonic() + seconds
    for side in sides:
        side.wait(until)


def case_client(softrdma, softrdmad, work):
    daemon, sock = start_daemon(softrdmad, work)
    server, client = start_pair(softrdma, sock, work, "bw", ["ib_write_bw", "-s", "65536", "-D", "20"])
    wait_connected([server, client], 30)
    time.sleep(1)  # well into the 20 s of traffic
    pairs.check(client.alive(), "the ib_write_bw client is mid-transfer 1 s after connecting", client.report())
    client.proc.send_signal(signal.SIGKILL)
    client.proc.wait()
    wait_all([server], EXIT_LIMIT)  # its peer gone, the server ends (its status does not matter)
    pairs.check(daemon.alive(), "softrdmad lives on after a client's SIGKILL", daemon.report())
    server2, client2 = start_pair(softrdma, sock, work, "after", ["ibv_rc_pingpong", "-g", "0", "-c", "-n", "200"])
    wait_all([client2, server2], 60)
    for side in (server2, client2):
        out, _ = side.output()
        pairs.check(side.proc.returncode == 0 and "200 iters in" in out,
                    f"a new ibv_rc_pingpong {side.role} on the same daemon completes", side.report())
    daemon.proc.send_signal(signal.SIGTERM)
    daemon.wait(time.monotonic() + 10)
    pairs.check(not daemon.timed_out and daemon.proc.returncode == 0, "softrdmad exits 0 on SIGTERM", daemon.report())


def case_daemon(softrdma, softrdmad, work):
    daemon, sock = start_daemon(softrdmad, work)
    bw = start_pair(softrdma, sock, work, "bw", ["ib_write_bw", "-s", "65536", "-D", "30"])
    events = start_pair(softrdma, sock, work, "ev", ["ibv_rc_pingpong", "-g", "0", "-e", "-n", "100000000"])
    programs = [*bw, *events]
    wait_connected(programs, 30)
    time.sleep(1)  # data flowing on both pairs
    for side in programs:
        pairs.check(side.alive(), f"{' '.join(side.argv[4:6])} {side.role} is still running 1 s after connecting", side.report())
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    start = time.monotonic()
    wait_all(programs, EXIT_LIMIT)
    took = time.monotonic() - start
    for side in programs:
        name = f"{side.argv[4]} {side.role}"
        pairs.check(not side.timed_out, f"the {name} exits within {EXIT_LIMIT} s of the daemon's death",
                    side.report())
        pairs.check(side.timed_out or side.proc.returncode != 0, f"the {name} reports failure", side.report())
    print(f"       all four exited {took:.2f} s after the SIGKILL")


def main(argv):
    if len(argv) != 4 or argv[1] not in ("client", "daemon"):
        print(__doc__, file=sys.stderr)
        return 2
    case, softrdma, softrdmad = argv[1:]
    for program in ("ib_write_bw", "ibv_rc_pingpong"):
        pairs.need_program(program)
    with tempfile.TemporaryDirectory(prefix="softrdma-crash-") as work:
        (case_client if case == "client" else case_daemon)(softrdma, softrdmad, work)
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
