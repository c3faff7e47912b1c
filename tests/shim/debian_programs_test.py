#!/usr/bin/env python3
"""Unmodified Debian RDMA programs on softrdma's libibverbs.so.1, through `softrdma run`.

usage: debian_programs_test.py CHECK SOFTRDMA [ARGS...]

Each CHECK is one ctest. A check whose Debian program is not installed exits 77 (ctest's
SKIP_RETURN_CODE) after saying which package provides it. Every program runs with a timeout.
The checks fork and iwarp_device take softrdmad as their ARG for their daemon half;
daemon_ports needs it. The checks ipv6 and netdev run inside ../host/in_netns.sh: a network
namespace of their own whose lo holds 127.0.0.1, ::1, fd53:7264:6d61::1 and fd53:7264:6d61::2
(in_netns.sh exits 77 where namespaces cannot be made).
"""

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
REAL_LIBIBVERBS = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
REAL_LIBRDMACM = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1"
PYTHON = "/usr/bin/python3"  # Debian's: pyverbs is not installed for a pyenv python3
RDMA_CORE_TESTS = "/usr/share/doc/rdma-core/tests"
TIMEOUT = 60

failures = []


def need(path, package):
    if not os.path.exists(path):
        print(f"SKIPPED: {path} is not installed (apt-get install {package})")
        sys.exit(SKIP)


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "))


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_")}
    env.update(extra)
    return env


def run(argv, env=None, timeout=TIMEOUT, cwd=None):
    p = subprocess.run(argv, env=env if env is not None else clean_env(), capture_output=True, text=True,
                       timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def no_loader_noise(stderr, what):
    # Without a version script every run would print this (verbs-abi.md §1).
    check("no version information" not in stderr, f"{what}: no 'no version information' from the loader", stderr)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


def check_exports(shim, real=REAL_LIBIBVERBS, package="libibverbs1"):
    """SHIM's export table equals REAL's (the installed rdma-core library of the same soname)."""
    need(real, package)
    soname = os.path.basename(real)
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "verbs-shim", "abi_exports.py")
    rc, out, err = run([sys.executable, tool, "diff", shim, real])
    print(out + err)
    check(rc == 0, "export table (names, versions, default/compat, kinds) equals rdma-core's")
    rc, out, _ = run(["readelf", "-d", shim])
    check(soname in re.findall(r"Library soname: \[(.*)\]", out), f"soname is {soname}")
    check("BIND_NOW" in out, "the shim itself is linked BIND_NOW")
    needed = re.findall(r"Shared library: \[(.*)\]", out)
    check(not any(n.startswith(("libstdc++", "libgcc_s")) for n in needed),
          f"no C++ runtime imposed on programs (NEEDED: {', '.join(needed)})")
    if soname == "librdmacm.so.1":
        # It calls the verbs through libibverbs' public API, as rdma-core's does, and finds
        # that library as programs do: no RUNPATH of its own.
        check("libibverbs.so.1" in needed, "NEEDED libibverbs.so.1")
        check("RUNPATH" not in out and "RPATH" not in out, "no RUNPATH/RPATH")
    return finish()


def check_ibv_devices(softrdma):
    need("/usr/bin/ibv_devices", "ibverbs-utils")
    rc, out, err = run([softrdma, "run", "--", "ibv_devices"])
    print(out + err)
    check(rc == 0, "ibv_devices exits 0")
    # The GUID of the first free 127.0.0.N (another test's device may hold .1).
    check(re.search(r"^\s+srdma0\s+02007ffffe0000[0-9a-f]{2}$", out, re.M) is not None, "ibv_devices lists srdma0 with its GUID")
    check(err == "", "nothing on stderr", err)
    no_loader_noise(err, "ibv_devices")
    return finish()


def check_ibv_devinfo(softrdma):
    need("/usr/bin/ibv_devinfo", "ibverbs-utils")
    rc, out, err = run([softrdma, "run", "--", "ibv_devinfo", "-v"])
    print(out + err)
    check(rc == 0, "ibv_devinfo -v exits 0")
    for pattern, what in [
        (r"^hca_id:\s+srdma0$", "hca_id srdma0"),
        (r"^\s+transport:\s+InfiniBand \(0\)$", "transport: InfiniBand"),
        (r"^\s+fw_ver:\s+softrdma 0\.1\.0$", "fw_ver softrdma 0.1.0"),
        # The first free 127.0.0.N (N is 1 unless another test's device holds .1).
        (r"^\s+node_guid:\s+0200:7fff:fe00:00[0-9a-f]{2}$", "node_guid from 127.0.0.N"),
        (r"^\s+state:\s+PORT_ACTIVE \(4\)$", "PORT_ACTIVE"),
        (r"^\s+active_mtu:\s+(1024 \(3\)|4096 \(5\))$", "active_mtu 1024 or 4096"),
        (r"^\s+link_layer:\s+Ethernet$", "link_layer: Ethernet"),
        (r"^\s+gid_tbl_len:\s+16$", "gid_tbl_len 16"),
        (r"^\s+GID\[\s*0\]:\s+::ffff:127\.0\.0\.\d+, RoCE v2$", "GID[0] ::ffff:127.0.0.N, RoCE v2"),
        (r"^\s+max_qp:\s+4096$", "max_qp 4096"),
        (r"^\s+atomic_cap:\s+ATOMIC_HCA", "atomic_cap ATOMIC_HCA"),
        # The groups the udp backend can join (core::MulticastLimits).
        (r"^\s+max_mcast_grp:\s+64$", "max_mcast_grp 64"),
        (r"^\s+max_mcast_qp_attach:\s+64$", "max_mcast_qp_attach 64"),
        (r"^\s+max_total_mcast_qp_attach:\s+4096$", "max_total_mcast_qp_attach 4096"),
    ]:
        check(re.search(pattern, out, re.M) is not None, f"ibv_devinfo -v shows {what}")
    check(err == "", "nothing on stderr", err)
    no_loader_noise(err, "ibv_devinfo")

    # 127.0.0.0/8 is all loopback, so any address in it can be bound here.
    rc, out, err = run([softrdma, "run", "--ip", "127.11.12.13", "--", "ibv_devinfo", "-v"])
    check(rc == 0 and re.search(r"GID\[\s*0\]:\s+::ffff:127\.11\.12\.13, RoCE v2", out) is not None
          and "0200:7fff:fe0b:0c0d" in out, "--ip 127.11.12.13 moves GID 0 and the node GUID", out + err)
    # An address no interface holds: the device cannot bind it, and says so in one line.
    rc, out, err = run([softrdma, "run", "--ip", "10.11.12.13", "--", "ibv_devinfo"])
    check(rc != 0 and "softrdma: cannot bind 10.11.12.13:4791" in err and len(err.strip().splitlines()) <= 2,
          "--ip 10.11.12.13 (not local): one line saying the address cannot be bound", out + err)
    return finish()


PYVERBS_LIST = "import pyverbs.device as d; print([x.name.decode() for x in d.get_device_list()])"
PYVERBS_PROVIDERS = """
import re
import pyverbs.device as d
import pyverbs.providers.mlx5.mlx5dv
import pyverbs.providers.efa.efadv
maps = open('/proc/self/maps').read()
for name in ('libibverbs.so', 'librdmacm.so', 'libmlx5.so', 'libefa.so'):
    print(name, sorted(set(re.findall(r'\\S*' + re.escape(name) + r'\\S*', maps))))
"""


def check_pyverbs(softrdma, shim_dir):
    need(PYTHON, "python3")
    rc, _, _ = run([PYTHON, "-c", "import pyverbs"])
    if rc != 0:
        print("SKIPPED: pyverbs is not installed for /usr/bin/python3 (apt-get install python3-pyverbs)")
        return SKIP
    rc, out, err = run([softrdma, "run", "--", PYTHON, "-c", PYVERBS_LIST])
    print(out + err)
    check(rc == 0 and out == "['srdma0']\n", "pyverbs get_device_list() is ['srdma0']", out + err)
    no_loader_noise(err, "pyverbs")

    # pyverbs pulls in librdmacm (softrdma's, from the same folder), and the rdma-core tests
    # import the mlx5 and efa modules, which load libmlx5/libefa: all of them must bind
    # against the shim.
    rc, out, err = run([softrdma, "run", "--", PYTHON, "-c", PYVERBS_PROVIDERS])
    print(out + err)
    check(rc == 0, "pyverbs' mlx5 and efa modules import under the shim", err)
    ours = os.path.realpath(os.path.join(shim_dir, "libibverbs.so.1"))
    libs = dict(re.findall(r"^(\S+) (\[.*\])$", out, re.M))
    check(libs.get("libibverbs.so") == repr([ours]), "the only libibverbs mapped is softrdma's", out)
    our_rdmacm = os.path.realpath(os.path.join(shim_dir, "librdmacm.so.1"))
    if os.path.exists(our_rdmacm):
        check(libs.get("librdmacm.so") == repr([our_rdmacm]), "the only librdmacm mapped is softrdma's", out)
    for name in ("librdmacm.so", "libmlx5.so", "libefa.so"):
        check(libs.get(name, "[]") != "[]", f"{name} loaded against the shim", out)
    no_loader_noise(err, "pyverbs providers")
    return finish()


# The iWARP device's objects through pyverbs: what it has (PD, CQ, MR, an RC QP in INIT) and
# what it refuses as siw does (UD QPs and AHs: EOPNOTSUPP; RTS without a connection: EINVAL).
PYVERBS_IWARP = r"""
import errno
import pyverbs.enums as e
from pyverbs.device import Context, get_device_list
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
kinds = {d.name.decode(): (d.node_type, d.transport_type) for d in get_device_list()}
print("kinds", kinds["srdma0"] == (e.IBV_NODE_CA, e.IBV_TRANSPORT_IB),
      kinds["srdmaiw0"] == (e.IBV_NODE_RNIC, e.IBV_TRANSPORT_IWARP))
ctx = Context(name="srdmaiw0")
print("gid", ctx.query_gid(1, 0))
pd = PD(ctx)
cq = CQ(ctx, 16)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
def make(kind):
    return QP(pd, QPInitAttr(qp_type=kind, scq=cq, rcq=cq, cap=QPCap(4, 4, 1, 1)))
qp = make(e.IBV_QPT_RC)
attr = QPAttr(qp_state=e.IBV_QPS_INIT)
attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
print("rc", qp.qp_state == e.IBV_QPS_INIT)
try:
    make(e.IBV_QPT_UD)
    print("ud created")
except PyverbsRDMAError as x:
    print("ud", x.error_code == errno.EOPNOTSUPP)
"""


def check_iwarp_device(softrdma, softrdmad):
    need("/usr/bin/ibv_devices", "ibverbs-utils")
    iwarp = clean_env(SOFTRDMA_IWARP="1")
    rc, out, err = run([softrdma, "run", "--", "ibv_devices"], env=iwarp)
    print(out + err)
    check(rc == 0 and err == "", "SOFTRDMA_IWARP=1 ibv_devices exits 0, nothing on stderr", err)
    check(re.search(r"^\s+srdma0\s+02007ffffe0000[0-9a-f]{2}\n\s+srdmaiw0\s+06007ffffe0000[0-9a-f]{2}$", out, re.M)
          is not None, "ibv_devices lists srdma0, then srdmaiw0 with its own GUID", out)
    rc, out, err = run([softrdma, "run", "--", "ibv_devices"])
    check(rc == 0 and "srdmaiw0" not in out, "without SOFTRDMA_IWARP, no srdmaiw0", out + err)

    need("/usr/bin/ibv_devinfo", "ibverbs-utils")
    rc, out, err = run([softrdma, "run", "--", "ibv_devinfo", "-v", "-d", "srdmaiw0"], env=iwarp)
    print(out + err)
    check(rc == 0 and err == "", "ibv_devinfo -v -d srdmaiw0 exits 0, nothing on stderr", err)
    for pattern, what in [
        (r"^hca_id:\s+srdmaiw0$", "hca_id srdmaiw0"),
        (r"^\s+transport:\s+iWARP \(1\)$", "transport: iWARP"),
        (r"^\s+node_guid:\s+0600:7fff:fe00:00[0-9a-f]{2}$", "node_guid from its MAC 06:00:7f:00:00:N"),
        (r"^\s+atomic_cap:\s+ATOMIC_NONE \(0\)$", "atomic_cap ATOMIC_NONE"),
        (r"^\s+max_ah:\s+0$", "max_ah 0"),
        (r"^\s+max_mcast_grp:\s+0$", "max_mcast_grp 0"),
        (r"^\s+state:\s+PORT_ACTIVE \(4\)$", "PORT_ACTIVE"),
        (r"^\s+link_layer:\s+Ethernet$", "link_layer: Ethernet"),
        (r"^\s+gid_tbl_len:\s+1$", "gid_tbl_len 1"),
    ]:
        check(re.search(pattern, out, re.M) is not None, f"ibv_devinfo -v -d srdmaiw0 shows {what}")

    rc, _, _ = run([PYTHON, "-c", "import pyverbs"])
    if rc == 0:
        rc, out, err = run([softrdma, "run", "--", PYTHON, "-c", PYVERBS_IWARP], env=iwarp)
        print(out + err)
        check(rc == 0, "pyverbs on srdmaiw0 exits 0", err)
        check("kinds True True" in out, "node and transport types: CA/IB for srdma0, RNIC/iWARP for srdmaiw0", out)
        check(re.search(r"^gid 0600:7f00:00[0-9a-f]{2}:0000:0000:0000:0000:0000$", out, re.M) is not None,
              "GID 0 is the device's MAC, zero-padded, as siw's", out)
        check("rc True" in out, "an RC QP reaches INIT", out)
        check("ud True" in out, "a UD QP is refused with EOPNOTSUPP", out)

    with daemon_on(softrdmad, "127.83.96.1") as sock:
        rc, out, err = run([softrdma, "run", f"--daemon={sock}", "--", "ibv_devices"], env=iwarp)
        check(rc == 0 and "srdma0" in out and "srdmaiw0" not in out and
              err.strip() == "softrdma: no iWARP device: softrdmad serves no iWARP device (softrdmad --iwarp): "
                             f"cannot reach softrdmad at {sock}.iwarp: No such file or directory",
              "through a softrdmad without --iwarp: srdma0 alone, and one line saying why", out + err)
    with daemon_on(softrdmad, "127.83.96.2", "--iwarp") as sock:
        rc, out, err = run([softrdma, "run", f"--daemon={sock}", "--", "ibv_devinfo", "-d", "srdmaiw0"], env=iwarp)
        print(out + err)
        check(rc == 0 and err == "" and re.search(r"^\s+transport:\s+iWARP \(1\)$", out, re.M) is not None,
              "through softrdmad --iwarp: srdmaiw0, transport iWARP", out + err)
        rc, out, err = run([softrdma, "run", f"--daemon={sock}", "--", "ibv_devices"])
        check(rc == 0 and "srdmaiw0" not in out, "through softrdmad --iwarp without SOFTRDMA_IWARP: no srdmaiw0",
              out + err)
    return finish()


# A parent opens the device, then forks; the child opens it and registers 64 MiB it allocated
# after the fork (memory the parent never had), creates an RC QP, and reports its GID. The
# parent then still works. Prints "PARENT_GID CHILD_GID CHILD_STATUS PARENT_OK".
PYVERBS_FORK = r"""
import os
import pyverbs.device as d, pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPInitAttr, QPCap

def use_device():
    ctx = d.Context(name='srdma0')
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 64 << 20, e.IBV_ACCESS_LOCAL_WRITE)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(4, 4, 1, 1)))
    return str(ctx.query_gid(1, 0)), (ctx, pd, cq, mr, qp)

parent_gid, kept = use_device()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        gid, _ = use_device()
        os.write(w, gid.encode())
        os._exit(0)
    except Exception as ex:
        os.write(w, ("error:" + str(ex).replace(" ", "_")).encode())
        os._exit(1)
_, status = os.waitpid(pid, 0)
child = os.read(r, 400).decode()
again, _ = use_device()
print(parent_gid, child, os.waitstatus_to_exitcode(status), again == parent_gid)
"""


@contextlib.contextmanager
def daemon_on(softrdmad, address, *options):
    """A softrdmad on ADDRESS, with OPTIONS, for the block: yields the socket to attach to."""
    with tempfile.TemporaryDirectory(prefix="softrdma-daemon-") as work:
        sock = os.path.join(work, "d.sock")
        daemon = subprocess.Popen([softrdmad, "--ip", address, "--socket", sock, *options],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            for _ in range(250):
                if os.path.exists(sock):
                    break
                time.sleep(0.02)
            yield sock
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)


def check_fork(softrdma, softrdmad=None):
    need(PYTHON, "python3")
    rc, out, err = run([softrdma, "run", "--", PYTHON, "-c", PYVERBS_FORK])
    print(out + err)
    fields = out.split()
    check(rc == 0 and len(fields) == 4 and fields[2] == "0" and fields[3] == "True",
          "embedded: a forked child uses a device of its own, and the parent keeps its", out + err)
    check(len(fields) == 4 and fields[0] != fields[1], "embedded: the child's device has another address", out)
    if softrdmad:
        with daemon_on(softrdmad, "127.77.61.1") as sock:
            rc, out, err = run([softrdma, "run", f"--daemon={sock}", "--", PYTHON, "-c", PYVERBS_FORK])
            print(out + err)
            fields = out.split()
            check(rc == 0 and fields[2:] == ["0", "True"] and fields[0] == fields[1],
                  "daemon: a forked child attaches to the daemon itself and reaches its own memory", out + err)
    return finish()


def check_daemon_ports(softrdma, softrdmad):
    """Two rping servers on one softrdmad, each listening on port 0: each process chooses its
    port itself, from the same first one, and the second must move on to a free one."""
    need("/usr/bin/rping", "rdmacm-utils")
    address = "127.77.63.1"
    with daemon_on(softrdmad, address) as sock:
        argv = [softrdma, "run", f"--daemon={sock}", "--", "rping", "-s", "-a", address, "-p", "0"]
        servers = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env())
                   for _ in range(2)]
        time.sleep(1.5)  # rping fails at once when its bind or listen does
        alive = [p.poll() is None for p in servers]
        for p in servers:
            p.terminate()
        outputs = [p.communicate(timeout=10)[0] for p in servers]
        for i, (up, out) in enumerate(zip(alive, outputs)):
            check(up, f"rping server {i + 1} listens on a port of its own (still running after 1.5 s)", out)
    return finish()


# rdma-core's own device tests (tests/test_device.py, DeviceTest): listing, opening and
# querying. Each pattern is a unittest -k substring; test_query_device matches _ex too.
DEVICE_TESTS = ["test_dev_list", "test_open_dev", "test_query_device", "test_phys_port_cnt_ex", "test_query_port",
                "test_query_gid", "test_query_pkey"]
EXPECTED_DEVICE_TESTS = 13


def check_rdma_core_device_tests(softrdma):
    need(PYTHON, "python3")
    need(RDMA_CORE_TESTS, "python3-pyverbs")
    with tempfile.TemporaryDirectory(prefix="softrdma-rdma-core-tests-") as work:
        tests = os.path.join(work, "tests")
        shutil.copytree(RDMA_CORE_TESTS, tests)
        for name in os.listdir(tests):  # Debian gzips the larger files
            if name.endswith(".gz"):
                subprocess.run(["gunzip", "-f", os.path.join(tests, name)], check=True)
        argv = [softrdma, "run", "--", PYTHON, "tests/run_tests.py", "-v"]
        for pattern in DEVICE_TESTS:
            argv += ["-k", pattern]
        rc, out, err = run(argv, cwd=work, timeout=180)
    # unittest -v: "test_x (tests.mod.Class.test_x)", the docstring's first line, "... ok".
    results = re.findall(r"^(test_\w+) \(([\w.]+)\)(?:\n[^\n]*)? \.\.\. (ok|FAIL|ERROR|skipped.*)$", err, re.M)
    for name, where, verdict in results:
        print(f"  {verdict:8.8s} {where}")
    summary = re.search(r"^Ran (\d+) tests?.*$", err, re.M)
    print(summary.group(0) if summary else err[-3000:])
    passed = [r for r in results if r[2] == "ok"]
    bad = [r for r in results if r[2] in ("FAIL", "ERROR")]
    check(rc == 0, "run_tests.py exits 0", err[-3000:])
    check(not bad, "no rdma-core device test fails or errors", "\n".join(f"{r[1]}: {r[2]}" for r in bad))
    check(len(passed) == EXPECTED_DEVICE_TESTS,
          f"all {EXPECTED_DEVICE_TESTS} rdma-core device tests pass (got {len(passed)} of {len(results)})")
    return finish()


def one_line_error(argv, want_rc, want_text, what, env=None):
    rc, out, err = run(argv, env=env)
    ok = rc == want_rc and want_text in err and err.count("\n") == 1 and err.startswith("softrdma ")
    check(ok, f"{what}: exit {want_rc} and one line naming the problem", f"rc={rc} stderr={err!r} stdout={out!r}")


def check_run_errors(softrdma, cc):
    one_line_error([softrdma, "run", "--", "softrdma-no-such-program"], 127, "command not found", "program not found")
    one_line_error([softrdma, "run"], 2, "missing PROGRAM", "no program")
    one_line_error([softrdma, "run", "--ip", "10.0.0", "--", "true"], 2, "--ip '10.0.0' is not an IPv4 or IPv6 address",
                   "bad --ip")
    one_line_error([softrdma, "run", "--", "true"], 2, "SOFTRDMA_IP='not-an-ip'", "bad SOFTRDMA_IP",
                   env=clean_env(SOFTRDMA_IP="not-an-ip"))
    rc, out, err = run([softrdma, "run", "--", "ibv_devices"], env=clean_env(SOFTRDMA_UDP_GSO="2"))
    check("softrdma: SOFTRDMA_UDP_GSO='2': expected 0 or 1; no RDMA device\n" in err and "srdma0" not in out,
          "bad SOFTRDMA_UDP_GSO: one line naming it, and no device", f"rc={rc} stderr={err!r} stdout={out!r}")
    # No device is an empty list with its count set, as rdma-core gives: perftest reads the count
    # even when the list is NULL, and -n made it crash on the garbage (SIGSEGV) before.
    rc, out, err = run([softrdma, "run", "--", "ib_send_lat", "-n", "5000"], env=clean_env(SOFTRDMA_UDP_GSO="2"))
    check(rc == 1 and "Did not detect devices" in err, "no device: perftest says so and exits 1",
          f"rc={rc} stderr={err!r} stdout={out!r}")
    one_line_error([softrdma, "run", "--mpa-crc", "--", "true"], 2, "--mpa-crc is an option of the iWARP device",
                   "--mpa-crc without --iwarp")
    one_line_error([softrdma, "run", "--daemon=/nonexistent.sock", "--iwarp", "--mpa-crc", "--", "true"], 2,
                   "--mpa-crc is softrdmad's option", "--mpa-crc with --daemon")
    rc, out, err = run([softrdma, "run", "--iwarp", "--", "ibv_devices"], env=clean_env(SOFTRDMA_MPA_CRC="2"))
    check("softrdma: no iWARP device: SOFTRDMA_MPA_CRC='2': expected 0 or 1\n" in err and "srdma0" in out
          and "srdmaiw0" not in out, "bad SOFTRDMA_MPA_CRC: one line naming it, no iWARP device, srdma0 still there",
          f"rc={rc} stderr={err!r} stdout={out!r}")
    one_line_error([softrdma, "devices", "--ip", "1.2.3.4.5"], 2, "not an IPv4 or IPv6 address", "devices: bad --ip")
    one_line_error([softrdma, "run", "--ip", "fe80::1", "--", "true"], 2, "--ip 'fe80::1' is a link-local IPv6 address",
                   "link-local --ip")
    one_line_error([softrdma, "run", "--ip", "ff02::1", "--", "true"], 2, "is not a unicast IPv6 address",
                   "multicast --ip")
    one_line_error([softrdma, "run", "--netdev", "softrdma-nope", "--", "true"], 2,
                   "--netdev 'softrdma-nope': no such network interface", "unknown --netdev")
    one_line_error([softrdma, "run", "--netdev"], 2, "--netdev needs an interface name", "--netdev without a name")
    one_line_error([softrdma, "run", "--ip", "127.0.0.1", "--netdev", "lo", "--", "true"], 2,
                   "--ip and --netdev are both set", "--ip with --netdev")
    one_line_error([softrdma, "devices"], 2, "SOFTRDMA_IP and SOFTRDMA_NETDEV are both set", "both variables",
                   env=clean_env(SOFTRDMA_IP="127.0.0.1", SOFTRDMA_NETDEV="lo"))
    one_line_error([softrdma, "devices", "--netdev", "softrdma-nope"], 2, "no such network interface",
                   "devices: unknown --netdev")
    with tempfile.TemporaryDirectory() as empty:
        one_line_error([softrdma, "run", "--", "true"], 1, "libibverbs.so.1 was not found", "library missing",
                       env=clean_env(SOFTRDMA_LIB_DIR=empty))
        if os.path.exists(REAL_LIBIBVERBS):
            one_line_error([softrdma, "run", "--", "true"], 1, "not softrdma's", "rdma-core's library is refused",
                           env=clean_env(SOFTRDMA_LIB_DIR=os.path.dirname(REAL_LIBIBVERBS)))
        static_programs = []
        if os.path.exists("/sbin/ldconfig"):
            static_programs.append("/sbin/ldconfig")  # static-pie on Debian
        src = os.path.join(empty, "hello.c")
        with open(src, "w") as f:
            f.write("int main(void) { return 0; }\n")
        exe = os.path.join(empty, "static_hello")
        if cc and subprocess.run([cc, "-static", src, "-o", exe], capture_output=True).returncode == 0:
            static_programs.append(exe)
        else:
            print("note: no static C library to build a static test program; checking /sbin/ldconfig only")
        for prog in static_programs:
            one_line_error([softrdma, "run", "--", prog], 126, "not dynamically linked", f"static program {prog}")

    # The program replaces softrdma: its exit status is the program's, and it sees the
    # environment softrdma set up.
    rc, _, _ = run([softrdma, "run", "--", "sh", "-c", "exit 7"])
    check(rc == 7, "the program's exit status passes through")
    rc, out, _ = run([softrdma, "run", "--ip", "10.0.0.9", "--", "sh", "-c", 'echo "$LD_LIBRARY_PATH|$SOFTRDMA_IP"'],
                     env=clean_env(LD_LIBRARY_PATH="/opt/keep"))
    first, _, rest = out.strip().partition(":")
    check(os.path.exists(os.path.join(first, "libibverbs.so.1")) and rest == "/opt/keep|10.0.0.9",
          "LD_LIBRARY_PATH starts with the shim's folder and keeps the old value; --ip sets SOFTRDMA_IP", out)
    # A flag replaces both inherited address variables.
    show = 'echo "$SOFTRDMA_IP|${SOFTRDMA_NETDEV-unset}"'
    rc, out, err = run([softrdma, "run", "--ip", "fd00::9", "--", "sh", "-c", show], env=clean_env(SOFTRDMA_NETDEV="lo"))
    check(rc == 0 and out == "fd00::9|unset\n", "--ip fd00::9 sets SOFTRDMA_IP and drops an inherited SOFTRDMA_NETDEV",
          out + err)
    rc, out, err = run([softrdma, "run", "--netdev", "lo", "--", "sh", "-c", show], env=clean_env(SOFTRDMA_IP="10.0.0.9"))
    check(rc == 0 and out == "|lo\n", "--netdev lo sets SOFTRDMA_NETDEV and drops an inherited SOFTRDMA_IP", out + err)
    for cmd in (["run", "--help"], ["devices", "--help"]):
        rc, out, _ = run([softrdma] + cmd)
        check(rc == 0 and out.startswith("usage: softrdma " + cmd[0]), f"softrdma {' '.join(cmd)}")
    return finish()


def check_devices(softrdma):
    rc, out, err = run([softrdma, "devices"])
    print(out + err)
    check(rc == 0, "softrdma devices exits 0", err)
    for pattern, what in [
        (r"^srdma0 \(softrdma's\)$", "the device name and kind"),
        (r"^\s+node GUID:\s+0200:7fff:fe00:00[0-9a-f]{2}$", "node GUID"),
        (r"^\s+port 1:\s+PORT_ACTIVE, link_layer Ethernet, active_mtu (1024|4096)", "port state, link layer, MTU"),
        (r"^\s+GID\[0\]:\s+::ffff:127\.0\.0\.\d+, RoCE v2$", "GID 0"),
        (r"^\s+bound address:\s+127\.0\.0\.\d+, UDP port 4791", "the first free 127.0.0.N"),
    ]:
        check(re.search(pattern, out, re.M) is not None, f"softrdma devices shows {what}")
    rc, out, err = run([softrdma, "devices", "--ip", "127.1.2.3"])
    check(rc == 0 and "0200:7fff:fe01:0203" in out and "bound address:  127.1.2.3," in out,
          "softrdma devices --ip 127.1.2.3", out + err)
    return finish()


# A pyverbs program under softrdma run: the names it lists, one per line, then every mapped file
# that is rdma-core's (its libibverbs or a provider under libibverbs/), then "end".
LIST_AND_MAPS = r"""
import pyverbs.device as d
for dev in d.get_device_list():
    print(dev.name.decode())
with open("/proc/self/maps") as maps:
    files = {line.split()[-1] for line in maps if line.rstrip().endswith(".so") or ".so." in line}
for f in sorted(files):
    if f.startswith(("/usr/lib", "/lib")) and ("/libibverbs" in f):
        print("mapped " + f)
print("end")
"""


def check_real_devices_absent(softrdma):
    """Without a kernel RDMA device, every placement of the machine's devices lists srdma0 alone
    and loads nothing of rdma-core's; a bad placement is one line."""
    kernel = [e for e in os.listdir("/sys/class/infiniband_verbs") if e.startswith("uverbs")] \
        if os.path.isdir("/sys/class/infiniband_verbs") else []
    if kernel:
        print(f"SKIP: this machine has kernel RDMA devices ({', '.join(kernel)}); tests/interop/passthrough_guests.sh covers them")
        return 77
    need("/usr/bin/python3", "python3-pyverbs")
    for where in ["first", "after", "hide", None]:
        argv = [softrdma, "run"] + (["--real-devices", where] if where else []) + ["--", "/usr/bin/python3", "-c", LIST_AND_MAPS]
        rc, out, err = run(argv)
        what = f"--real-devices {where}" if where else "no --real-devices"
        check(rc == 0 and out.splitlines() == ["srdma0", "end"], f"{what}: srdma0 alone, rdma-core's library not loaded",
              out + err)
        check(err == "", f"{what}: nothing on stderr", err)
    rc, out, err = run([softrdma, "run", "--real-devices", "sideways", "--", "ibv_devices"])
    check(rc == 2 and err == "softrdma run: --real-devices takes first, after or hide, not 'sideways'\n",
          "--real-devices sideways: exit 2 and one line", err)
    rc, out, err = run([softrdma, "run", "--", "/usr/bin/python3", "-c", LIST_AND_MAPS],
                       env=clean_env(SOFTRDMA_REAL_DEVICES="sideways"))
    check(rc == 0 and out.splitlines() == ["srdma0", "end"] and err.count("\n") == 1 and "is not first, after or hide" in err,
          "SOFTRDMA_REAL_DEVICES=sideways: srdma0 listed and one line saying the machine's devices are hidden", out + err)
    return finish()


# ---------------------------------------------------------------------------------------------
# Inside in_netns.sh: IPv6 addresses and --netdev.

NETNS_V6 = ("fd53:7264:6d61::1", "fd53:7264:6d61::2")  # on the namespace's lo (in_netns.sh)
PINGPONG_LINES = [r"^\d+ bytes in \d+\.\d+ seconds = ", r"^\d+ iters in \d+\.\d+ seconds = "]
BAD_LINE = re.compile(r"^.*(couldn't|failed|\berror\b|unable to|invalid data).*$", re.I | re.M)


def need_netns():
    """The checks below change interfaces: only inside the namespace in_netns.sh makes."""
    rc, out, _ = run(["ip", "-6", "addr", "show", "dev", "lo"])
    if rc != 0 or NETNS_V6[0] not in out:
        print(f"SKIPPED: {NETNS_V6[0]} is not on lo: run this check through tests/host/in_netns.sh")
        sys.exit(SKIP)


def listening(port):
    """Whether a TCP socket of this namespace listens on PORT."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(softrdma, program, server_ip, client_ip, args):
    """PROGRAM as server on SERVER_IP and client on CLIENT_IP (`softrdma run --ip`); the client
    starts once the server listens. Returns ((rc, out, err) of the server, same of the client)."""
    port = free_port()
    common = [program, "-d", "srdma0", "-g", "0", "-p", str(port)] + args
    server = subprocess.Popen([softrdma, "run", "--ip", server_ip, "--"] + common, env=clean_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until = time.monotonic() + 20
        while server.poll() is None and not listening(port) and time.monotonic() < until:
            time.sleep(0.05)
        # The examples' server listens on the first passive address getaddrinfo gives, 0.0.0.0,
        # so the out-of-band exchange of QPNs and GIDs goes through 127.0.0.1; the RDMA traffic
        # goes between the GIDs.
        client = run([softrdma, "run", "--ip", client_ip, "--"] + common + ["127.0.0.1"])
        out, err = server.communicate(timeout=TIMEOUT)
        return (server.returncode, out, err), client
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def check_pair(softrdma, program, args, what):
    server, client = run_pair(softrdma, program, NETNS_V6[0], NETNS_V6[1], args)
    for (rc, out, err), role, peer in ((server, "server", NETNS_V6[1]), (client, "client", NETNS_V6[0])):
        report = f"{role}: exit {rc}\n{out}{err}"
        check(rc == 0, f"{what}: the {role} exits 0", report)
        check(re.search(rf"remote address: .*GID {re.escape(peer)}$", out, re.M) is not None,
              f"{what}: the {role}'s peer GID is {peer}", report)
        for pattern in PINGPONG_LINES:
            check(re.search(pattern, out, re.M) is not None, f"{what}: the {role} prints {pattern!r}", report)
        check(BAD_LINE.search(out + err) is None, f"{what}: the {role} reports no error", report)


def check_ipv6(softrdma):
    need("/usr/bin/ibv_devinfo", "ibverbs-utils")
    need_netns()
    rc, out, err = run([softrdma, "run", "--ip", NETNS_V6[0], "--", "ibv_devinfo", "-v"])
    print(out + err)
    check(rc == 0 and err == "", "ibv_devinfo -v on fd53:7264:6d61::1 exits 0, nothing on stderr", err)
    for pattern, what in [
        (r"^\s+GID\[\s*0\]:\s+fd53:7264:6d61::1, RoCE v2$", "GID[0] fd53:7264:6d61::1, RoCE v2"),
        (r"^\s+node_guid:\s+0200:00ff:fe00:0001$", "node_guid from the low 48 bits"),
        (r"^\s+active_mtu:\s+4096 \(5\)$", "active_mtu 4096 (lo)"),
        (r"^\s+state:\s+PORT_ACTIVE \(4\)$", "PORT_ACTIVE"),
    ]:
        check(re.search(pattern, out, re.M) is not None, f"ibv_devinfo -v shows {what}")
    check(re.search(r"GID\[\s*1\]", out) is None, "the GID table holds exactly the bound address")
    rc, out, err = run([softrdma, "devices", "--ip", NETNS_V6[1]])
    check(rc == 0 and f"bound address:  {NETNS_V6[1]}, UDP port 4791 (RoCEv2)" in out
          and "node GUID:      0200:00ff:fe00:0002" in out, "softrdma devices --ip fd53:7264:6d61::2", out + err)
    rc, out, err = run([softrdma, "devices"], env=clean_env(SOFTRDMA_IP="::ffff:127.0.0.5"))
    check(rc == 0 and "GID[0]:         ::ffff:127.0.0.5, RoCE v2" in out and "bound address:  127.0.0.5," in out,
          "SOFTRDMA_IP=::ffff:127.0.0.5 is the IPv4 address 127.0.0.5", out + err)
    rc, out, err = run([softrdma, "run", "--ip", "fd53:7264:6d61::99", "--", "ibv_devinfo"])
    check(rc != 0 and "softrdma: cannot bind [fd53:7264:6d61::99]:4791" in err and len(err.strip().splitlines()) <= 2,
          "an IPv6 address no interface holds: one line saying it cannot be bound", out + err)

    need("/usr/bin/ibv_rc_pingpong", "ibverbs-utils")
    check_pair(softrdma, "ibv_rc_pingpong", ["-c", "-n", "100"], "ibv_rc_pingpong -c over IPv6")
    check_pair(softrdma, "ibv_ud_pingpong", ["-c", "-s", "1024", "-n", "100"], "ibv_ud_pingpong -c over IPv6")
    return finish()


def make_veth(names, mtu):
    """A veth pair in this namespace, both ends up; False (with a note) where it cannot be made."""
    rc, out, err = run(["ip", "link", "add", names[0], "type", "veth", "peer", "name", names[1]])
    if rc != 0:
        print(f"note: cannot make a veth pair ({(out + err).strip()}); the IPv6-only interface is not checked")
        return False
    for cmd in (["ip", "link", "set", names[0], "mtu", str(mtu), "up"], ["ip", "link", "set", names[1], "up"]):
        subprocess.run(cmd, check=True)
    return True


def check_netdev(softrdma):
    need("/usr/bin/ibv_devinfo", "ibverbs-utils")
    need_netns()
    # lo's first IPv4 address is 127.0.0.1, whatever IPv6 addresses it also holds.
    rc, out, err = run([softrdma, "run", "--netdev", "lo", "--", "ibv_devinfo", "-v"])
    print(out + err)
    check(rc == 0 and re.search(r"GID\[\s*0\]:\s+::ffff:127\.0\.0\.1, RoCE v2$", out, re.M) is not None
          and err == "", "--netdev lo: GID[0] ::ffff:127.0.0.1", out + err)
    rc, out, err = run([softrdma, "devices"], env=clean_env(SOFTRDMA_NETDEV="lo"))
    check(rc == 0 and "bound address:  127.0.0.1, UDP port 4791" in out, "SOFTRDMA_NETDEV=lo: bound to 127.0.0.1",
          out + err)

    # An interface with only IPv6 addresses: its global one, not the link-local one the kernel
    # adds. MTU 4180 carries 4096-byte RoCEv2 packets over IPv4 (+72) but not over IPv6 (+92).
    veth = ("srdma6a", "srdma6b")
    if make_veth(veth, 4180):
        subprocess.run(["ip", "-6", "addr", "add", "fd53:7264:6d61:1::5/64", "dev", veth[0], "nodad"], check=True)
        rc, out, err = run([softrdma, "devices", "--netdev", veth[0]])
        print(out + err)
        check(rc == 0 and "bound address:  fd53:7264:6d61:1::5, UDP port 4791" in out
              and "GID[0]:         fd53:7264:6d61:1::5, RoCE v2" in out,
              f"--netdev {veth[0]}: its global IPv6 address", out + err)
        check("active_mtu 2048 (max 4096)" in out, "active MTU 2048 on a 4180-byte interface over IPv6", out)
        rc, out, err = run([softrdma, "devices", "--ip", "fd53:7264:6d61:1::5"])
        check(rc == 0 and "active_mtu 2048" in out, "--ip of that address: the same interface and MTU", out + err)
        one_line_error([softrdma, "devices", "--netdev", veth[1]], 2,
                       f"--netdev '{veth[1]}': the interface has no IPv4 or global IPv6 address",
                       "an interface with only a link-local address")
        one_line_error([softrdma, "run", "--", "true"], 2, f"SOFTRDMA_NETDEV='{veth[1]}': the interface has no",
                       "the same through SOFTRDMA_NETDEV", env=clean_env(SOFTRDMA_NETDEV=veth[1]))
    return finish()


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, softrdma, rest = argv[1], argv[2], argv[3:]
    try:
        if name == "exports":
            return check_exports(rest[0] if rest else softrdma)
        if name == "rdmacm_exports":
            return check_exports(rest[0] if rest else softrdma, REAL_LIBRDMACM, "librdmacm1")
        if name == "ibv_devices":
            return check_ibv_devices(softrdma)
        if name == "ibv_devinfo":
            return check_ibv_devinfo(softrdma)
        if name == "iwarp_device":
            return check_iwarp_device(softrdma, rest[0])
        if name == "pyverbs":
            return check_pyverbs(softrdma, rest[0])
        if name == "rdma_core_device_tests":
            return check_rdma_core_device_tests(softrdma)
        if name == "run_errors":
            return check_run_errors(softrdma, rest[0] if rest else None)
        if name == "devices":
            return check_devices(softrdma)
        if name == "real_devices_absent":
            return check_real_devices_absent(softrdma)
        if name == "ipv6":
            return check_ipv6(softrdma)
        if name == "netdev":
            return check_netdev(softrdma)
        if name == "fork":
            return check_fork(softrdma, rest[0] if rest else None)
        if name == "daemon_ports":
            return check_daemon_ports(softrdma, rest[0])
    except subprocess.TimeoutExpired as e:
        print(f"FAIL timed out after {e.timeout}s: {' '.join(map(str, e.cmd))}")
        return 1
    print(f"unknown check {name}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
