#!/usr/bin/env python3
"""`softrdma stats`: the live counters of running programs, read from their stats endpoints.

usage: stats_live_test.py SOFTRDMA

Every program runs with XDG_RUNTIME_DIR set to a fresh folder, so its endpoint is
$XDG_RUNTIME_DIR/softrdma/PID.sock and no other test's programs are seen.

1. An ibv_rc_pingpong server waiting for its client: the runtime directory is made with mode
   0700; `stats --json` lists exactly that pid, program and srdma0, with one RC QP in INIT and
   no peer; the table names it too; `--pid` of another process finds nothing (exit 1). Its
   client then runs 5 exchanges; both exit 0 and each removed its own endpoint: `stats` says no
   device is running (exit 1).
2. A long pair (both QPs in RTS, each naming the other's QPN): two reads 0.3 s apart show
   sent_pkts growing on both; `--watch 0.2 --json` prints a report per round. After SIGKILL
   (no exit handlers) the endpoints are stale; `stats` removes both and reports no device.
   A socket that accepts and never answers is removed when its process is gone, named when not.
3. The runtime directory: a symbolic link (through SOFTRDMA_RUNTIME_DIR) and, when this runs
   as root, a directory owned by another user are refused with exit 2; usage errors exit 2.
Exit 77 when ibv_rc_pingpong is not installed.
"""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, listens, free_port, check, ...)

SOFTRDMA = None
RUNTIME = None  # XDG_RUNTIME_DIR/softrdma


def stats(*args, env_extra=None):
    env = pairs.clean_env()
    env.update(env_extra or {})
    p = subprocess.run([SOFTRDMA, "stats", *args], capture_output=True, text=True, env=env, timeout=30)
    return p.returncode, p.stdout, p.stderr


def reports(*args):
    rc, out, err = stats("--json", *args)
    try:
        return rc, [json.loads(line) for line in out.splitlines()], err
    except ValueError as e:
        pairs.check(False, "softrdma stats --json prints JSON lines", f"{e}\n{out}")
        return rc, [], err


def endpoints():
    return sorted(n for n in os.listdir(RUNTIME) if n.endswith(".sock")) if os.path.isdir(RUNTIME) else []


def start_server(args, work, tag):
    """An ibv_rc_pingpong server under softrdma run, listening; (Side, port) or (None, None)."""
    return pairs.start_listening(
        lambda port: [SOFTRDMA, "run", "--", "ibv_rc_pingpong", "-d", "srdma0", "-g", "0", "-p", str(port)] + args,
        work, tag, time.monotonic() + pairs.PAIR_TIMEOUT)


def client(args, port, work, tag):
    argv = [SOFTRDMA, "run", "--", "ibv_rc_pingpong", "-d", "srdma0", "-g", "0", "-p", str(port)] + args + ["127.0.0.1"]
    return pairs.Side("client", argv, work, tag)


def waiting_server_then_normal_exit(work):
    server, port = start_server(["-n", "5"], work, "a")
    if server is None:
        return
    mode = stat.S_IMODE(os.stat(RUNTIME).st_mode)
    pairs.check(mode == 0o700, f"the runtime directory {RUNTIME} is made with mode 0700", oct(mode))
    pairs.check(endpoints() == [f"{server.pid}.sock"], "the waiting server has its endpoint PID.sock", str(endpoints()))

    rc, found, err = reports()
    pairs.check(rc == 0 and len(found) == 1, "stats --json: one process, exit 0", f"exit {rc}: {found} {err}")
    if found:
        r = found[0]
        pairs.check(r.get("pid") == server.pid and r.get("program") == "ibv_rc_pingpong" and r.get("device") == "srdma0",
                    f"it is the server: pid {server.pid}, ibv_rc_pingpong, srdma0", json.dumps(r)[:300])
        qps = r.get("qps", [])
        pairs.check(len(qps) == 1 and qps[0].get("type") == "RC" and qps[0].get("state") == "INIT"
                    and qps[0].get("dest_qpn") == 0 and qps[0].get("sent_pkts") == 0,
                    "one RC QP in INIT, no peer yet, nothing sent", json.dumps(qps))
    address = found[0].get("address") if found else "?"  # 127.0.0.1 unless another device holds it
    rc, out, err = stats("--pid", str(server.pid))
    pairs.check(rc == 0 and f"PID {server.pid}  ibv_rc_pingpong  srdma0  {address}" in out
                and any(line.split()[1:3] == ["RC", "INIT"] for line in out.splitlines() if line.startswith("  0x")),
                "the table names the process and its QP row 'RC INIT'", out + err)
    rc, out, err = stats("--pid", str(os.getpid()))
    pairs.check(rc == 1 and f"process {os.getpid()} runs no softrdma device" in err and not out,
                "--pid of a process without a device: exit 1 and one line", f"exit {rc}: {out}{err}")

    c = client(["-n", "5"], port, work, "a")
    c.wait(time.monotonic() + pairs.PAIR_TIMEOUT)
    server.wait(time.monotonic() + 20)
    pairs.check(c.proc.returncode == 0 and server.proc.returncode == 0, "the pair exits 0",
                server.report() + "\n" + c.report())
    pairs.check(endpoints() == [], "each program removed its endpoint at exit", str(endpoints()))
    rc, out, err = stats()
    pairs.check(rc == 1 and "no softrdma device is running" in err and not out,
                "then stats: 'no softrdma device is running', exit 1", f"exit {rc}: {out}{err}")


def by_pid(found):
    return {r.get("pid"): r for r in found}


def long_pair_then_kill(work):
    server, port = start_server(["-n", "100000000"], work, "b")
    if server is None:
        return
    c = client(["-n", "100000000"], port, work, "b")
    sides = (server, c)
    try:
        first = {}
        until = time.monotonic() + 20
        while time.monotonic() < until:
            _, found, _ = reports()
            first = by_pid(found)
            # RTS comes before the first packet: the server answers only once the client's SEND arrives.
            if len(first) == 2 and all(len(r["qps"]) == 1 and r["qps"][0]["state"] == "RTS"
                                       and r["counters"]["sent_pkts"] > 0 for r in first.values()):
                break
            time.sleep(0.1)
        ok = pairs.check(set(first) == {server.pid, c.pid} and all(r["qps"][0]["state"] == "RTS" for r in first.values()),
                         "both programs are listed with their QP in RTS", json.dumps(list(first.values()))[:2000])
        if not ok:
            return
        s_qp, c_qp = first[server.pid]["qps"][0], first[c.pid]["qps"][0]
        pairs.check(s_qp["dest_qpn"] == c_qp["qpn"] and c_qp["dest_qpn"] == s_qp["qpn"],
                    "each QP names the other as its peer", f"{s_qp} / {c_qp}")
        time.sleep(0.3)
        _, found, _ = reports()
        second = by_pid(found)
        for side in sides:
            a = first[side.pid]["counters"]["sent_pkts"]
            b = second.get(side.pid, {}).get("counters", {}).get("sent_pkts", -1)
            pairs.check(b > a > 0, f"the {side.role}'s sent_pkts grows while it runs ({a} then {b})")
            q = second.get(side.pid, {}).get("qps", [{}])[0]
            pairs.check(q.get("sent_pkts", 0) > 0 and q.get("sent_pkts") <= second[side.pid]["counters"]["sent_pkts"],
                        f"the {side.role}'s QP counts its own packets, within the device's sum", json.dumps(q))

        env = pairs.clean_env()
        watch = subprocess.Popen([SOFTRDMA, "stats", "--json", "--watch", "0.2"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(1.1)
        watch.send_signal(signal.SIGINT)
        out, _ = watch.communicate(timeout=10)
        rounds = [json.loads(line) for line in out.splitlines()]
        pairs.check(all(sum(r["pid"] == s.pid for r in rounds) >= 2 for s in sides),
                    "--watch 0.2 --json prints both processes every round", f"{len(rounds)} lines")
    finally:
        for side in sides:
            if side.alive():
                side.proc.send_signal(signal.SIGKILL)
                side.proc.wait()
    pairs.check(sorted(endpoints()) == sorted([f"{server.pid}.sock", f"{c.pid}.sock"]),
                "after SIGKILL the endpoints are left behind", str(endpoints()))
    rc, out, err = stats()
    pairs.check(rc == 1 and "no softrdma device is running" in err, "stats sees no device running", f"exit {rc}: {err}")
    pairs.check(endpoints() == [], "and removed the stale endpoints", str(endpoints()))


def silent_endpoints():
    """Sockets that accept and never answer: one named after a process that is gone (as a forked
    child's inherited descriptor leaves it) is removed; one of a live process is reported."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    listeners = []
    for pid in (gone.pid, os.getpid()):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(os.path.join(RUNTIME, f"{pid}.sock"))
        sock.listen(4)
        listeners.append(sock)
    try:
        rc, out, err = stats()
        pairs.check(rc == 1 and endpoints() == [f"{os.getpid()}.sock"],
                    "a silent endpoint of a process that is gone is removed, a live one's is kept",
                    f"exit {rc}: {endpoints()}\n{err}")
        pairs.check(f"process {os.getpid()}: cannot read its counters" in err and "timed out" in err,
                    "the live one is named: its counters cannot be read (timed out)", err)
    finally:
        for sock in listeners:
            sock.close()
        for name in endpoints():
            os.unlink(os.path.join(RUNTIME, name))


def refusals(work):
    link = os.path.join(work, "link")
    os.symlink(RUNTIME, link)
    rc, out, err = stats(env_extra={"SOFTRDMA_RUNTIME_DIR": link})
    pairs.check(rc == 2 and "is not a directory" in err and err.count("\n") == 1,
                "a runtime directory that is a symbolic link: refused, exit 2, one line", f"exit {rc}: {err}")
    if os.geteuid() == 0:
        foreign = os.path.join(work, "foreign")
        os.mkdir(foreign, 0o700)
        os.chown(foreign, 65534, 65534)
        rc, out, err = stats(env_extra={"SOFTRDMA_RUNTIME_DIR": foreign})
        pairs.check(rc == 2 and "belongs to user 65534" in err,
                    "a runtime directory of another user: refused, exit 2", f"exit {rc}: {err}")
    else:
        print("note: not root: the other-user directory case needs chown")
    for args, what in ((["--pid", "x"], "a bad --pid"), (["--watch", "0"], "a bad --watch"), (["--bogus"], "an unknown option")):
        rc, out, err = stats(*args)
        pairs.check(rc == 2 and err.startswith("softrdma stats: ") and err.count("\n") == 1,
                    f"{what}: exit 2 and one line", f"exit {rc}: {err}")
    rc, out, err = stats("--help")
    pairs.check(rc == 0 and "usage: softrdma stats" in out and "Exit status" in out, "--help")


def main(argv):
    global SOFTRDMA, RUNTIME
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    SOFTRDMA = os.path.abspath(argv[1])
    pairs.need_program("ibv_rc_pingpong")
    with tempfile.TemporaryDirectory(prefix="softrdma-stats-live-") as work:
        os.environ["XDG_RUNTIME_DIR"] = os.path.join(work, "xdg")
        os.mkdir(os.environ["XDG_RUNTIME_DIR"], 0o700)
        RUNTIME = os.path.join(os.environ["XDG_RUNTIME_DIR"], "softrdma")
        waiting_server_then_normal_exit(work)
        long_pair_then_kill(work)
        silent_endpoints()
        refusals(work)
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
