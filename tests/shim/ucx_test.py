#!/usr/bin/env python3
"""UCX (Debian's ucx-utils, 1.13) on srdma0: what ucx_info finds, and ucx_perftest pairs.

usage: ucx_test.py CASE SOFTRDMA
       ucx_test.py --list

CASE is one of --list's:
  info                 `softrdma run -- ucx_info -d` lists memory domain srdma0 with the
                       rc_verbs and ud_verbs transports on srdma0:1.
  MODE.ucp.TEST.TLS    a ucx_perftest UCP pair (tag_lat, tag_bw, ucp_put_bw, ucp_get, ucp_fadd)
                       with UCX_TLS forced to rc_v (rc_verbs, with ud_verbs only for wire-up) or
                       ud_v, and UCX_NET_DEVICES to srdma0:1.
  MODE.uct.TEST        a UCT pair (am_lat, put_bw, get) with -x rc_verbs -d srdma0:1.
MODE is loop (both on 127.0.0.1), daemon (both on one softrdmad, $SOFTRDMAD) or netns (two
network namespaces joined by a veth, as in program_pairs_test.py).

A pair passes when both sides exit 0 within the timeout, the client prints its "Final:" row with
the iterations asked for, and srdma0's counters (each side's `softrdma run --stats`, or the
daemon's `softrdma stats`) show at least that many packets (ucx_perftest cannot check the data
it moves). Exit 0 pass, 1 fail,
77 (ctest's SKIP_RETURN_CODE) when ucx-utils is not installed or namespaces cannot be made.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, start_listening, TwoHosts, check, ...)

DEVICE = "srdma0:1"
ITERS, WARMUP = 500, 50
PAIR_TIMEOUT = 90
# UCP tests and their message sizes: 64 KiB goes by rendezvous (RDMA READ on rc_verbs).
UCP_TESTS = {"tag_lat": 8, "tag_bw": 65536, "ucp_put_bw": 65536, "ucp_get": 65536, "ucp_fadd": 8}
UCP_TLS = ("rc_v", "ud_v")
# UCT tests: zero-copy for the RDMA ones (a get has no short form).
UCT_TESTS = {"am_lat": [], "put_bw": ["-s", "65536", "-D", "zcopy"], "get": ["-s", "65536", "-D", "zcopy"]}
# Across the namespaces, and on a daemon: one UCP test per transport and one UCT test.
FEW_CASES = ("ucp.tag_bw.rc_v", "ucp.ucp_get.rc_v", "ucp.tag_lat.ud_v", "uct.put_bw")


def case_names():
    ucp = [f"ucp.{test}.{tls}" for tls in UCP_TLS for test in UCP_TESTS]
    uct = [f"uct.{test}" for test in UCT_TESTS]
    return (["info"] + [f"loop.{c}" for c in ucp + uct] + [f"daemon.{c}" for c in FEW_CASES] +
            [f"netns.{c}" for c in FEW_CASES])


def perftest_argv(case):
    """ucx_perftest's options for CASE (without MODE), and the environment it needs."""
    kind, test, *rest = case.split(".")
    if kind == "ucp":
        return (["-t", test, "-s", str(UCP_TESTS[test])],
                {"UCX_TLS": f"{rest[0]},self", "UCX_NET_DEVICES": DEVICE})
    return ["-t", test, "-x", "rc_verbs", "-d", DEVICE] + UCT_TESTS[test], {}


def check_info(softrdma):
    p = subprocess.run([softrdma, "run", "--", "ucx_info", "-d"], capture_output=True, text=True,
                       timeout=60, env=pairs.clean_env())
    # ucx_info -d: "# Memory domain: NAME", then per transport "#      Transport: TL" and
    # "#         Device: DEV".
    domains = re.split(r"^# Memory domain: ", p.stdout, flags=re.M)
    ours = [d for d in domains if d.startswith("srdma0\n")]
    pairs.check(p.returncode == 0 and len(ours) == 1, "ucx_info -d lists memory domain srdma0",
                p.stdout[-2000:] + p.stderr[-2000:])
    if ours:
        found = set(re.findall(r"^#\s+Transport: (\S+)\n#\s+Device: (\S+)$", ours[0], re.M))
        for tl in ("rc_verbs", "ud_verbs"):
            pairs.check((tl, DEVICE) in found, f"srdma0's domain has transport {tl} on {DEVICE}", ours[0])
    return pairs.finish()


def counted_packets(stats_json):
    try:
        counters = json.loads(stats_json)["counters"]
        return counters["sent_pkts"] + counters["rcvd_pkts"]
    except (ValueError, KeyError):
        return None


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def daemon_stats(softrdma, daemon):
    p = subprocess.run([softrdma, "stats", "--json", "--pid", str(daemon.pid)], capture_output=True, text=True,
                       timeout=30, env=pairs.clean_env())
    return p.stdout


def run_pair(softrdma, case, work, server_ip="127.0.0.1", client_netns_pid=None, ips=(None, None), daemon=None):
    """One ucx_perftest pair; with DAEMON (its Side and socket) both sides use that softrdmad."""
    options, env = perftest_argv(case)
    options += ["-n", str(ITERS), "-w", str(WARMUP)]
    os.environ.update(env)  # Side passes this process's environment on, SOFTRDMA_* removed
    stats = {role: os.path.join(work, f"{role}.stats.json") for role in ("server", "client")}

    def run(role, ip):
        if daemon is not None:
            return [softrdma, "run", f"--daemon={daemon[1]}", "--", "ucx_perftest"]
        return [softrdma, "run", *(["--ip", ip] if ip else []), "--stats", stats[role], "--", "ucx_perftest"]

    deadline = time.monotonic() + PAIR_TIMEOUT
    server, port = pairs.start_listening(lambda p: run("server", ips[0]) + options + ["-p", str(p)], work, "ucx",
                                         deadline)
    if server is None:
        return
    client = pairs.Side("client", run("client", ips[1]) + [server_ip] + options + ["-p", str(port)], work, "ucx",
                        netns_pid=client_netns_pid)
    client.wait(deadline)
    server.wait(deadline)
    for side in (server, client):
        pairs.check(not side.timed_out and side.proc.returncode == 0, f"ucx_perftest's {side.role} exits 0",
                    side.report())
    out, _ = client.output()
    pairs.check(re.search(rf"^Final:\s+{ITERS}\s", out, re.M) is not None,
                f"the client prints its Final row of {ITERS} iterations", client.report())
    counted = {"softrdmad": daemon_stats(softrdma, daemon[0])} if daemon else \
        {role: read_file(path) for role, path in stats.items()}
    for who, stats_json in counted.items():
        packets = counted_packets(stats_json)
        pairs.check(packets is not None and packets >= ITERS,
                    f"the {who}'s srdma0 counted at least {ITERS} packets ({packets})", stats_json[:2000])


def check_daemon(softrdma, case):
    with tempfile.TemporaryDirectory(prefix="softrdma-ucx-") as work:
        daemon, sock = pairs.start_daemon(pairs.softrdmad_path(), work, "softrdmad")
        if daemon is None:
            return pairs.finish()
        try:
            run_pair(softrdma, case, work, daemon=(daemon, sock))
        finally:
            pairs.stop_daemons([daemon], not pairs.failures)
        return pairs.finish()


def check_netns(softrdma, case, host_netns):
    pairs.inside_own_namespace(host_netns)
    with pairs.TwoHosts() as hosts, tempfile.TemporaryDirectory(prefix="softrdma-ucx-") as work:
        run_pair(softrdma, case, work, pairs.NETNS_ADDR[0], hosts.holder.pid, pairs.NETNS_ADDR)
    return pairs.finish()


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(case_names()))
        return 0
    argv, host_netns = pairs.inside_argv(argv)
    if len(argv) != 3 or argv[1] not in case_names():
        print(__doc__, file=sys.stderr)
        return 2
    name, softrdma = argv[1], os.path.abspath(argv[2])
    for program in ("ucx_info", "ucx_perftest"):
        pairs.need_program(program)
    if name == "info":
        return check_info(softrdma)
    mode, case = name.split(".", 1)
    if mode == "loop":
        with tempfile.TemporaryDirectory(prefix="softrdma-ucx-") as work:
            run_pair(softrdma, case, work)
        return pairs.finish()
    if mode == "daemon":
        return check_daemon(softrdma, case)
    if host_netns is None:
        pairs.rerun_in_own_namespace(__file__, argv)
    return check_netns(softrdma, case, host_netns)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
