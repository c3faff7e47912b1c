#!/usr/bin/env python3
"""Open MPI (Debian's openmpi-bin, 4.1) over UCX on srdma0: `mpirun -np 2` of mpi_check.c, a
ping-pong that checks every byte at four sizes and an allreduce that checks its sum.

usage: mpi_test.py CASE SOFTRDMA MPI_CHECK
       mpi_test.py --list

CASE is MODE.TLS: TLS is the UCX_TLS forced on UCX (rc_v: rc_verbs, with ud_verbs only for
wire-up; ud_v: ud_verbs), with UCX_NET_DEVICES=srdma0:1 and no shared-memory transport, so that
UCX has no way between the ranks but srdma0. MODE is
  loop    each rank on its own srdma0 (softrdma run), on 127.0.0.N;
  daemon  both ranks on one softrdmad ($SOFTRDMAD), as the processes of one host share its NIC;
  netns   rank 0 in one network namespace, rank 1 entered into a second one joined by a veth
          (program_pairs_test.py's two hosts). mpirun runs in the first; its PMIx server, which
          its ranks reach over TCP, listens on the veth instead of loopback, which the second
          namespace does not share.
mpirun forces its point-to-point layer to UCX (--mca pml ucx), and each rank runs under
`softrdma run`. A case passes when mpirun exits 0, rank 0 prints a checked line for each size
and the allreduce, and srdma0's counters (each rank's --stats file, or the daemon's) show the
messages' packets. Exit 0 pass, 1 fail, 77 (ctest's SKIP_RETURN_CODE) when Open MPI is not
installed or namespaces cannot be made.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shim"))
import program_pairs_test as pairs  # noqa: E402  (check, TwoHosts, start_daemon, ...)

ITERATIONS = 20  # round trips per size, each byte checked both ways
SIZES = (8, 4096, 65536, 1 << 20)
# Round trips of every size, each at least one packet each way, and the allreduce's.
MIN_PACKETS = 2 * ITERATIONS * len(SIZES)
TIMEOUT = 100


def case_names():
    # Both transports on loopback; one each through a daemon and across namespaces, where the
    # path under UCX, not UCX's transport, is what differs.
    return ["loop.rc_v", "loop.ud_v", "daemon.rc_v", "netns.ud_v"]


def rank_command(softrdma, mode, work, daemon_sock=None, netns_pid=None):
    """The shell command each rank runs: softrdma run, per MODE, around mpi_check."""
    stats = os.path.join(work, "rank$OMPI_COMM_WORLD_RANK.json")
    if mode == "daemon":
        return f"exec {shlex.quote(softrdma)} run --daemon={shlex.quote(daemon_sock)} -- \"$@\""
    if mode == "loop":
        return f"exec {shlex.quote(softrdma)} run --stats {stats} -- \"$@\""
    # netns: rank 0 on this namespace's end of the veth, rank 1 entered into the other's.
    ip0, ip1 = pairs.NETNS_ADDR
    enter = f"nsenter --net=/proc/{netns_pid}/ns/net --"
    return (f"if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then ip={ip0}; enter=; else ip={ip1}; enter='{enter}'; fi; "
            f"exec $enter {shlex.quote(softrdma)} run --ip $ip --stats {stats} -- \"$@\"")


def mpirun_argv(tls, command, mpi_check):
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    # --bind-to none: softrdma's progress thread may run beside its rank on the other core.
    return ["mpirun", *root, "--oversubscribe", "--bind-to", "none", "-np", "2",
            "--mca", "pml", "ucx", "--mca", "btl", "self",
            "-x", f"UCX_TLS={tls},self", "-x", "UCX_NET_DEVICES=srdma0:1",
            "sh", "-c", command, "rank", mpi_check, str(ITERATIONS)]


def packets(stats_json):
    try:
        c = json.loads(stats_json)["counters"]
        return c["sent_pkts"] + c["rcvd_pkts"]
    except (ValueError, KeyError):
        return None


def run_case(softrdma, mpi_check, mode, tls, work, daemon=None, netns_pid=None):
    command = rank_command(softrdma, mode, work, daemon[1] if daemon else None, netns_pid)
    mpirun = pairs.Side("mpirun", mpirun_argv(tls, command, mpi_check), work, "mpi")
    mpirun.wait(time.monotonic() + TIMEOUT)
    out, _ = mpirun.output()
    pairs.check(not mpirun.timed_out and mpirun.proc.returncode == 0, "mpirun exits 0", mpirun.report())
    for size in SIZES:
        pairs.check(re.search(rf"^mpi_check: {ITERATIONS} round trips of {size} bytes checked", out, re.M) is not None,
                    f"{ITERATIONS} round trips of {size} bytes come back intact", out)
    pairs.check("mpi_check: allreduce of 1024 int64 over 2 ranks checked" in out, "the allreduce sums right", out)
    if daemon:
        p = subprocess.run([softrdma, "stats", "--json", "--pid", str(daemon[0].pid)], capture_output=True,
                           text=True, timeout=30, env=pairs.clean_env())
        counted = {"softrdmad": p.stdout}
    else:
        counted = {}
        for rank in (0, 1):
            path = os.path.join(work, f"rank{rank}.json")
            counted[f"rank {rank}"] = open(path).read() if os.path.exists(path) else ""
    for who, stats_json in counted.items():
        n = packets(stats_json)
        pairs.check(n is not None and n >= MIN_PACKETS, f"{who}'s srdma0 counted at least {MIN_PACKETS} packets ({n})",
                    stats_json[:2000])


def check(softrdma, mpi_check, mode, tls, host_netns):
    with tempfile.TemporaryDirectory(prefix="softrdma-mpi-") as work:
        if mode == "loop":
            run_case(softrdma, mpi_check, mode, tls, work)
        elif mode == "daemon":
            daemon, sock = pairs.start_daemon(pairs.softrdmad_path(), work, "softrdmad")
            if daemon is not None:
                try:
                    run_case(softrdma, mpi_check, mode, tls, work, daemon=(daemon, sock))
                finally:
                    pairs.stop_daemons([daemon], not pairs.failures)
        else:
            pairs.inside_own_namespace(host_netns)
            os.environ.update(PMIX_MCA_ptl_tcp_remote_connections="1",
                              PMIX_MCA_ptl_tcp_if_include=f"{pairs.NETNS_ADDR[0]}/24")
            with pairs.TwoHosts() as hosts:
                run_case(softrdma, mpi_check, mode, tls, work, netns_pid=hosts.holder.pid)
    return pairs.finish()


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(case_names()))
        return 0
    argv, host_netns = pairs.inside_argv(argv)
    if len(argv) != 4 or argv[1] not in case_names():
        print(__doc__, file=sys.stderr)
        return 2
    name, softrdma, mpi_check = argv[1], os.path.abspath(argv[2]), os.path.abspath(argv[3])
    if subprocess.run(["sh", "-c", "command -v mpirun"], capture_output=True).returncode != 0:
        pairs.skip("mpirun is not installed (apt-get install openmpi-bin)")
    mode, tls = name.split(".")
    if mode == "netns" and host_netns is None:
        pairs.rerun_in_own_namespace(__file__, argv)
    return check(softrdma, mpi_check, mode, tls, host_netns)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
