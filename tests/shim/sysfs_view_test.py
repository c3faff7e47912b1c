#!/usr/bin/env python3
"""The sysfs view `softrdma run` gives programs: srdma0 under /sys/class/infiniband and its node
under /dev/infiniband, seen by unmodified programs and their children (python3, ls, cat, sh)
through libsoftrdma_sysfs.so.

usage: sysfs_view_test.py CASE SOFTRDMA [SOFTRDMAD] [CC]
       sysfs_view_test.py --list

One ctest per CASE (--list prints them). Exit 0 pass, 1 fail, 77 (ctest's SKIP_RETURN_CODE)
when something the case needs is not installed. Test traffic stays on loopback: the devices
take 127.0.0.N or 127.77.50.x.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
PYTHON = "/usr/bin/python3"  # Debian's: pyverbs is installed for it only
RDMA_CORE_TESTS = "/usr/share/doc/rdma-core/tests"
DEV = "/sys/class/infiniband/srdma0"
TIMEOUT = 60

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + str(detail).replace("\n", "\n     "))
    return ok


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_") and k != "SYSFS_PATH"}
    env.update(extra)
    return env


def run(argv, env=None, cwd=None):
    p = subprocess.run(argv, env=env if env is not None else clean_env(), capture_output=True, text=True,
                       timeout=TIMEOUT, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def under(softrdma, options, program, env=None, cwd=None):
    """PROGRAM (a list) under `softrdma run OPTIONS --`."""
    return run([softrdma, "run", *options, "--", *program], env=env, cwd=cwd)


def real_entries(folder, own):
    """The machine's own entries of FOLDER (a kernel's rxe0, uverbs0), which the view links to beside
    softrdma's OWN names unless SOFTRDMA_REAL_DEVICES=hide."""
    return sorted(set(os.listdir(folder)) - {own}) if os.path.isdir(folder) else []


def devinfo_line(out, field):
    for line in out.splitlines():
        parts = line.split(":", 1)
        if parts[0].strip() == field:
            return parts[1].strip()
    return None


def check_files(softrdma, options, expected, what):
    """Each file of EXPECTED (relative to srdma0's directory) read by cat under the run."""
    for name, want in expected.items():
        rc, out, err = under(softrdma, options, ["cat", f"{DEV}/{name}"])
        check(rc == 0 and out == want + "\n" and err == "", f"{what}: cat {name} prints {want!r}", f"rc={rc} {out!r} {err!r}")


def check_agrees_with_devinfo(softrdma, options, what):
    """The tree's node GUID and GID 0 are what the device itself reports (ibv_devinfo -v)."""
    if shutil.which("ibv_devinfo") is None:
        print("note: ibv_devinfo is not installed (ibverbs-utils): the agreement with the device is not checked")
        return
    script = f"cat {DEV}/node_guid {DEV}/ports/1/gids/0 && ibv_devinfo -v"
    rc, out, err = under(softrdma, options, ["sh", "-c", script])
    lines = out.splitlines()
    check(rc == 0 and len(lines) > 2, f"{what}: cat and ibv_devinfo -v run", f"rc={rc}\n{out}{err}")
    if rc != 0 or len(lines) <= 2:
        return
    check(lines[0] == devinfo_line(out, "node_guid"), f"{what}: node_guid is ibv_devinfo's", out)
    gid = lines[1].replace(":", "")
    shown = [line for line in lines if "GID[  0]" in line]
    check(len(gid) == 32 and shown != [], f"{what}: ibv_devinfo shows GID 0", out)
    if shown:
        import ipaddress
        text = shown[0].split("]:", 1)[1].split(",")[0].strip()
        check(ipaddress.IPv6Address(text).packed.hex() == gid, f"{what}: gids/0 is ibv_devinfo's GID[0] ({text})", out)


def case_exists(softrdma, _softrdmad, _cc):
    code = "import os; print(os.path.exists('/sys/class/infiniband/srdma0/device/net/'))"
    rc, out, err = under(softrdma, [], [PYTHON, "-c", code])
    check(rc == 0 and out == "True\n" and err == "", "python3: os.path.exists(device/net/) is True", f"{out!r} {err!r}")
    if not os.path.exists("/sys/class/infiniband"):
        rc, out, _ = run([PYTHON, "-c", code])
        check(out == "False\n", "without softrdma run it is False (no kernel RDMA stack here)", out)


def case_ls(softrdma, _softrdmad, _cc):
    rc, out, err = under(softrdma, [], ["ls", f"{DEV}/device/net/"])
    check(rc == 0 and out == "lo\n" and err == "", "ls device/net/ prints lo", f"rc={rc} {out!r} {err!r}")
    rc, out, err = under(softrdma, [], ["ls", "/sys/class/infiniband"])
    want = sorted(["srdma0"] + real_entries("/sys/class/infiniband", "srdma0"))
    check(rc == 0 and sorted(out.split()) == want, f"ls /sys/class/infiniband prints {' '.join(want)}",
          f"rc={rc} {out!r} {err!r}")
    rc, out, err = under(softrdma, ["--real-devices", "hide"], ["ls", "/sys/class/infiniband"])
    check(rc == 0 and out == "srdma0\n", "--real-devices hide: ls /sys/class/infiniband prints srdma0 alone",
          f"rc={rc} {out!r} {err!r}")
    rc, out, err = under(softrdma, [], ["ls", "-l", f"{DEV}/ports/1"])
    check(rc == 0 and "link_layer" in out and err == "", "ls -l ports/1 (stat and extended attributes)", f"rc={rc} {out}{err}")


def case_dev_node(softrdma, _softrdmad, _cc):
    code = ("import os, stat; p = '/dev/infiniband/uverbs_srdma0'; "
            "print(stat.S_ISCHR(os.stat(p).st_mode), os.access(p, os.R_OK | os.W_OK))")
    rc, out, err = under(softrdma, [], [PYTHON, "-c", code])
    check(rc == 0 and out == "True True\n" and err == "",
          "python3: /dev/infiniband/uverbs_srdma0 is a character device it may read and write", f"{out!r} {err!r}")
    rc, out, err = under(softrdma, [], ["ls", "/dev/infiniband"])
    want = sorted(["uverbs_srdma0"] + real_entries("/dev/infiniband", "uverbs_srdma0"))
    check(rc == 0 and sorted(out.split()) == want, f"ls /dev/infiniband prints {' '.join(want)}",
          f"rc={rc} {out!r} {err!r}")
    if not os.path.exists("/dev/infiniband"):
        rc, out, _ = run([PYTHON, "-c", "import os; print(os.path.exists('/dev/infiniband'))"])
        check(out == "False\n", "without softrdma run there is no /dev/infiniband (no kernel RDMA stack here)", out)


def case_cat(softrdma, _softrdmad, _cc):
    check_files(softrdma, [], {"ports/1/gid_attrs/ndevs/0": "lo", "ports/1/gid_attrs/types/0": "RoCE v2",
                               "node_type": "1: CA", "ports/1/state": "4: ACTIVE", "ports/1/link_layer": "Ethernet",
                               "device/numa_node": "-1", "fw_ver": "softrdma 0.1.0"}, "default")
    # The embedded device picks its 127.0.0.N when it starts, after the tree is written.
    rc, out, err = under(softrdma, [], ["cat", f"{DEV}/node_guid"])
    check(rc == 1 and "No such file or directory" in err, "default: no node_guid (not known before exec)", err)


def case_ip(softrdma, _softrdmad, _cc):
    options = ["--ip", "127.77.50.1"]
    check_files(softrdma, options, {"ports/1/gid_attrs/ndevs/0": "lo", "node_guid": "0200:7fff:fe4d:3201",
                                    "ports/1/gids/0": "0000:0000:0000:0000:0000:ffff:7f4d:3201"}, "--ip 127.77.50.1")
    rc, out, err = under(softrdma, options, ["ls", f"{DEV}/device/net/"])
    check(rc == 0 and out == "lo\n", "--ip 127.77.50.1: ls device/net/ prints lo", f"{out!r} {err!r}")
    check_agrees_with_devinfo(softrdma, options, "--ip 127.77.50.1")


def case_netdev(softrdma, _softrdmad, _cc):
    options = ["--netdev", "lo"]
    check_files(softrdma, options, {"ports/1/gid_attrs/ndevs/0": "lo"}, "--netdev lo")
    rc, out, err = under(softrdma, options, ["ls", f"{DEV}/device/net/"])
    check(rc == 0 and out == "lo\n", "--netdev lo: ls device/net/ prints lo", f"{out!r} {err!r}")
    # The device would bind lo's 127.0.0.1, which a concurrent test may hold: the GUID is
    # checked against the address instead (02:00:a.b.c.d as an EUI-64, as the README says).
    if shutil.which("ip") is None:
        print("note: ip (iproute2) is not installed: the node GUID is not checked")
        return
    addresses = json.loads(run(["ip", "-j", "-4", "addr", "show", "lo"])[1])[0]["addr_info"]
    a, b, c, d = (int(x) for x in addresses[0]["local"].split("."))
    check_files(softrdma, options, {"node_guid": f"0200:{a:02x}ff:fe{b:02x}:{c:02x}{d:02x}"},
                f"--netdev lo ({addresses[0]['local']})")


USER_PRELOAD = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
DIR *opendir(const char *path) {
  fprintf(stderr, "user opendir: %s\n", path);
  DIR *(*next)(const char *) = (DIR *(*)(const char *))dlsym(RTLD_NEXT, "opendir");
  return next(path);
}
"""


def case_user_preload(softrdma, _softrdmad, cc):
    if not cc or shutil.which(cc) is None:
        skip(f"no C compiler ('{cc}')")
    with tempfile.TemporaryDirectory(prefix="softrdma-sysfs-preload-") as work:
        src, lib = os.path.join(work, "user.c"), os.path.join(work, "libuser.so")
        with open(src, "w") as f:
            f.write(USER_PRELOAD)
        subprocess.run([cc, "-shared", "-fPIC", "-o", lib, src, "-ldl"], check=True)
        before = os.environ.get("LD_PRELOAD", "")  # a sanitizer build's runtime stays first
        user = f"{before}:{lib}" if before else lib
        rc, out, err = under(softrdma, [], ["sh", "-c", f'printf "%s\\n" "$LD_PRELOAD"; ls {DEV}/device/net/'],
                             env=clean_env(LD_PRELOAD=user))
        lines = out.splitlines()
        check(rc == 0 and len(lines) == 2 and lines[0].startswith(user + ":") and
              lines[0].endswith("/libsoftrdma_sysfs.so"),
              "LD_PRELOAD keeps the user's libraries first and appends libsoftrdma_sysfs.so", out + err)
        check(lines[1:] == ["lo"], "ls device/net/ prints lo with the user's library in front", out + err)
        check(f"user opendir: {DEV}/device/net/" in err, "the user's opendir ran first, on the path as given", err)


# A binary built before glibc 2.33, when stat() was an inline wrapper of __xstat: it binds the
# compat symbols, which the .symver directives reproduce with today's headers.
OLD_BINARY = r"""
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
int __xstat(int, const char *, struct stat *);
int __lxstat(int, const char *, struct stat *);
int __fxstatat(int, int, const char *, struct stat *, int);
__asm__(".symver __xstat,__xstat@GLIBC_2.2.5");
__asm__(".symver __lxstat,__lxstat@GLIBC_2.2.5");
__asm__(".symver __fxstatat,__fxstatat@GLIBC_2.4");
int main(void) {
  struct stat st;
  const char *path = "/sys/class/infiniband/srdma0/device/net";
  printf("%d %d %d\n", __xstat(1, path, &st), __lxstat(1, path, &st), __fxstatat(1, AT_FDCWD, path, &st, 0));
  return 0;
}
"""


def case_old_binary(softrdma, _softrdmad, cc):
    if not cc or shutil.which(cc) is None:
        skip(f"no C compiler ('{cc}')")
    with tempfile.TemporaryDirectory(prefix="softrdma-sysfs-old-") as work:
        src, program = os.path.join(work, "old.c"), os.path.join(work, "old")
        with open(src, "w") as f:
            f.write(OLD_BINARY)
        subprocess.run([cc, "-o", program, src], check=True)
        rc, out, err = under(softrdma, [], [program])
        check(rc == 0 and out == "0 0 0\n", "__xstat, __lxstat and __fxstatat of device/net succeed", f"{out!r} {err!r}")
        if not os.path.exists("/sys/class/infiniband"):
            rc, out, err = run([program])
            check(out == "-1 -1 -1\n", "and fail without softrdma run (no kernel RDMA stack here)", out)


OUTSIDE = """
import json, os
r = {"relative": open("sys/class/infiniband/marker").read()}
fd = os.open(".", os.O_RDONLY)
r["dir_fd"] = os.read(os.open("sys/class/infiniband/marker", os.O_RDONLY, dir_fd=fd), 100).decode()
for p in ["/sys/class/net/lo", "/etc/hostname", "/usr/bin/python3", "/sys/class/infinibandx", "/sys/class",
          "/" + "x" * 5000]:
    try:
        st = os.stat(p)
        r[p] = [st.st_dev, st.st_ino, st.st_mode]
    except OSError as e:
        r[p] = e.errno
print(json.dumps(r))
"""


def case_outside(softrdma, _softrdmad, _cc):
    with tempfile.TemporaryDirectory(prefix="softrdma-sysfs-outside-") as work:
        os.makedirs(os.path.join(work, "sys/class/infiniband"))
        with open(os.path.join(work, "sys/class/infiniband/marker"), "w") as f:
            f.write("relative\n")
        rc, inside, err = under(softrdma, [], [PYTHON, "-c", OUTSIDE], cwd=work)
        check(rc == 0, "the probe runs under softrdma run", err)
        rc, plain, err2 = run([PYTHON, "-c", OUTSIDE], cwd=work)
        check(rc == 0, "the probe runs without it", err2)
        if not inside or not plain:
            return
        inside, plain = json.loads(inside), json.loads(plain)
        check(inside["relative"] == inside["dir_fd"] == "relative\n",
              "relative and directory-fd-relative sys/class/infiniband paths are the working directory's", inside)
        for path, value in plain.items():
            if path in ("relative", "dir_fd"):
                continue
            check(inside[path] == value, f"{path[:40]}: the same as without softrdma run ({value})", inside[path])


MISSING = """
import errno, os
DEV = "/sys/class/infiniband/srdma0"
def err(f):
    try:
        f()
        return 0
    except OSError as e:
        return e.errno
print(err(lambda: open(DEV + "/nope")), err(lambda: os.stat(DEV + "/ports/1/nope")),
      err(lambda: os.listdir("/sys/class/infiniband/srdma1")), err(lambda: os.stat("/sys/class/infiniband_verbs")),
      err(lambda: os.stat("/sys/class/infiniband/" + "a" * 5000)),
      err(lambda: os.stat("/sys/class/infiniband/" + ("a" * 200 + "/") * 20 + "a" * 40)),
      err(lambda: os.stat("/sys/class/infiniband/" + "x/../" * 2000 + "srdma0")))
"""


def case_missing(softrdma, _softrdmad, _cc):
    rc, out, err = under(softrdma, [], ["cat", f"{DEV}/nope"])
    check(rc == 1 and f"{DEV}/nope: No such file or directory" in err, "cat of a missing file: ENOENT", f"rc={rc} {err!r}")
    # Hidden, the machine's devices leave no /sys/class/infiniband_verbs in the view.
    rc, out, err = under(softrdma, ["--real-devices", "hide"], [PYTHON, "-c", MISSING])
    want = [errno.ENOENT] * 4 + [errno.ENAMETOOLONG] * 2 + [0]
    got = [int(x) for x in out.split()] if rc == 0 else []
    check(got[:4] == want[:4], "missing file, port file, device, class: ENOENT", out + err)
    # 4082 bytes: short enough for the kernel, too long once moved under the tree's root.
    check(got[4:6] == want[4:6], "paths under the prefix too long once mapped (5000, 4082 bytes): ENAMETOOLONG",
          out + err)
    check(got[6:] == want[6:], "a path of 10 KB whose '..' bring it back to srdma0: found", out + err)


PROBE_BASE = """
import sys
work = sys.argv[1]
sys.path[:0] = [work + "/tests", work]
sys.argv = sys.argv[:1]
from args_parser import parser
parser.parse_args()
from tests.base import RDMATestCase
class Probe(RDMATestCase):
    def test_probe(self):
        pass
probe = Probe("test_probe")
probe.setUp()
print(probe.dev_name, probe.ip_addr)
"""


def case_rdma_core(softrdma, _softrdmad, _cc):
    if not os.path.exists(RDMA_CORE_TESTS):
        skip(f"{RDMA_CORE_TESTS} is not installed (apt-get install python3-pyverbs)")
    if shutil.which("ip") is None:
        skip("ip (iproute2) is not installed: rdma-core's tests run `ip -j addr show`")
    with tempfile.TemporaryDirectory(prefix="softrdma-sysfs-rdma-core-") as work:
        tests = os.path.join(work, "tests")
        shutil.copytree(RDMA_CORE_TESTS, tests)
        for name in os.listdir(tests):  # Debian gzips the larger files
            if name.endswith(".gz"):
                subprocess.run(["gunzip", "-f", os.path.join(tests, name)], check=True)
        rc, out, err = under(softrdma, [], [PYTHON, "-c", PROBE_BASE, work])
    check(rc == 0 and out == "srdma0 127.0.0.1\n",
          "rdma-core's RDMATestCase._get_ip_mac finds srdma0's interface lo and its address 127.0.0.1",
          f"rc={rc} {out!r}\n{err[-2000:]}")


def case_daemon(softrdma, softrdmad, _cc):
    if not softrdmad or not os.path.exists(softrdmad):
        skip(f"softrdmad is not at '{softrdmad}'")
    with tempfile.TemporaryDirectory(prefix="softrdma-sysfs-daemon-") as work:
        sock = os.path.join(work, "d.sock")
        env = clean_env(SOFTRDMA_RUNTIME_DIR=os.path.join(work, "run"))
        os.mkdir(env["SOFTRDMA_RUNTIME_DIR"], 0o700)
        daemon = subprocess.Popen([softrdmad, "--ip", "127.77.50.2", "--socket", sock], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(sock) and daemon.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if not check(os.path.exists(sock), "softrdmad listens"):
                return
            options = [f"--daemon={sock}"]
            for name, want in {"ports/1/gid_attrs/ndevs/0": "lo", "node_guid": "0200:7fff:fe4d:3202",
                               "ports/1/gids/0": "0000:0000:0000:0000:0000:ffff:7f4d:3202"}.items():
                rc, out, err = under(softrdma, options, ["cat", f"{DEV}/{name}"], env=env)
                check(rc == 0 and out == want + "\n", f"--daemon: cat {name} prints {want!r} (the daemon's address)",
                      f"rc={rc} {out!r} {err!r}")
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                out, _ = daemon.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                out, _ = daemon.communicate()
            check(daemon.returncode == 0, "softrdmad exits 0 on SIGTERM", out)


def case_real_devices(softrdma, _softrdmad, _cc):
    devices = real_entries("/sys/class/infiniband", "srdma0")
    if not devices:
        skip("no kernel RDMA device here (/sys/class/infiniband)")
    for device in devices:
        path = f"/sys/class/infiniband/{device}/node_type"
        rc, out, err = under(softrdma, [], ["cat", path])
        check(rc == 0 and out == run(["cat", path])[1], f"{device}: cat node_type reads the kernel's file",
              f"rc={rc} {out!r} {err!r}")
    for folder in ["/sys/class/infiniband_verbs", "/dev/infiniband"]:
        rc, out, err = under(softrdma, [], ["ls", folder])
        check(rc == 0 and set(real_entries(folder, "")) <= set(out.split()), f"ls {folder} shows the kernel's entries",
              f"rc={rc} {out!r} {err!r}")


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


def main(argv):
    if argv[1:] == ["--list"]:
        print("\n".join(CASES))
        return 0
    if len(argv) < 3 or argv[1] not in CASES:
        print(__doc__, file=sys.stderr)
        return 2
    if not os.path.exists(PYTHON):
        skip(f"{PYTHON} is not installed")
    softrdmad = argv[3] if len(argv) > 3 else ""
    cc = argv[4] if len(argv) > 4 else ""
    CASES[argv[1]](os.path.abspath(argv[2]), softrdmad, cc)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
