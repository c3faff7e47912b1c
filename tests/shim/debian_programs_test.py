#!/usr/bin/env python3
"""Unmodified Debian RDMA programs on softrdma's libibverbs.so.1, through `softrdma run`.

usage: debian_programs_test.py CHECK SOFTRDMA [ARGS...]

Each CHECK is one ctest. A check whose Debian program is not installed exits 77 (ctest's
SKIP_RETURN_CODE) after saying which package provides it. Every program runs with a timeout.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
REAL_LIBIBVERBS = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
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


def check_exports(shim):
    need(REAL_LIBIBVERBS, "libibverbs1")
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "verbs-shim", "abi_exports.py")
    rc, out, err = run([sys.executable, tool, "diff", shim, REAL_LIBIBVERBS])
    print(out + err)
    check(rc == 0, "export table (names, versions, default/compat, kinds) equals rdma-core's")
    rc, out, _ = run(["readelf", "-d", shim])
    check("libibverbs.so.1" in re.findall(r"Library soname: \[(.*)\]", out), "soname is libibverbs.so.1")
    check("BIND_NOW" in out, "the shim itself is linked BIND_NOW")
    needed = re.findall(r"Shared library: \[(.*)\]", out)
    check(not any(n.startswith(("libstdc++", "libgcc_s")) for n in needed),
          f"no C++ runtime imposed on programs (NEEDED: {', '.join(needed)})")
    return finish()


def check_ibv_devices(softrdma):
    need("/usr/bin/ibv_devices", "ibverbs-utils")
    rc, out, err = run([softrdma, "run", "--", "ibv_devices"])
    print(out + err)
    check(rc == 0, "ibv_devices exits 0")
    check(re.search(r"^\s+srdma0\s+02007ffffe000001$", out, re.M) is not None, "ibv_devices lists srdma0 with its GUID")
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

    # pyverbs pulls in the real librdmacm, and the rdma-core tests import the mlx5 and efa
    # modules, which load libmlx5/libefa: all of them must bind against the shim.
    rc, out, err = run([softrdma, "run", "--", PYTHON, "-c", PYVERBS_PROVIDERS])
    print(out + err)
    check(rc == 0, "pyverbs' mlx5 and efa modules import under the shim", err)
    ours = os.path.realpath(os.path.join(shim_dir, "libibverbs.so.1"))
    libs = dict(re.findall(r"^(\S+) (\[.*\])$", out, re.M))
    check(libs.get("libibverbs.so") == repr([ours]), "the only libibverbs mapped is softrdma's", out)
    for name in ("librdmacm.so", "libmlx5.so", "libefa.so"):
        check(libs.get(name, "[]") != "[]", f"{name} loaded against the shim", out)
    no_loader_noise(err, "pyverbs providers")
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
    one_line_error([softrdma, "run", "--ip", "10.0.0", "--", "true"], 2, "not an IPv4 address", "bad --ip")
    one_line_error([softrdma, "run", "--", "true"], 2, "SOFTRDMA_IP='not-an-ip'", "bad SOFTRDMA_IP",
                   env=clean_env(SOFTRDMA_IP="not-an-ip"))
    one_line_error([softrdma, "devices", "--ip", "1.2.3.4.5"], 2, "not an IPv4 address", "devices: bad --ip")
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
    for cmd in (["run", "--help"], ["devices", "--help"]):
        rc, out, _ = run([softrdma] + cmd)
        check(rc == 0 and out.startswith("usage: softrdma " + cmd[0]), f"softrdma {' '.join(cmd)}")
    return finish()


def check_devices(softrdma):
    rc, out, err = run([softrdma, "devices"])
    print(out + err)
    check(rc == 0, "softrdma devices exits 0", err)
    for pattern, what in [
        (r"^srdma0$", "the device name"),
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


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, softrdma, rest = argv[1], argv[2], argv[3:]
    try:
        if name == "exports":
            return check_exports(rest[0] if rest else softrdma)
        if name == "ibv_devices":
            return check_ibv_devices(softrdma)
        if name == "ibv_devinfo":
            return check_ibv_devinfo(softrdma)
        if name == "pyverbs":
            return check_pyverbs(softrdma, rest[0])
        if name == "rdma_core_device_tests":
            return check_rdma_core_device_tests(softrdma)
        if name == "run_errors":
            return check_run_errors(softrdma, rest[0] if rest else None)
        if name == "devices":
            return check_devices(softrdma)
    except subprocess.TimeoutExpired as e:
        print(f"FAIL timed out after {e.timeout}s: {' '.join(map(str, e.cmd))}")
        return 1
    print(f"unknown check {name}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
