#!/usr/bin/env python3
"""Who may use softrdmad: the socket's group (--group) and the daemon's reach into its
clients' memory (process_vm_readv), with the daemon and its clients run as unprivileged users.

usage: daemon_access_test.py CASE SOFTRDMAD SOFTRDMA SHIM_DIR

CASE is one of:
  group     softrdmad --group GID (a numeric gid that names no group: none is created on the
            system) run as uid 65533, a member of GID, with CAP_SYS_PTRACE as an ambient
            capability, as packaging/softrdmad.service.in runs it. Its socket must be
            mode 0660 and GID's; a member of GID of another uid (65534) sees the device and
            runs an ibv_rc_pingpong pair on it; a user outside GID (uid 65532) gets "cannot reach
            softrdmad ...: Permission denied" and no device, at once (no hang). The same daemon
            without --group (0600) refuses the member that way. A daemon that is not a member of
            GID cannot give it the socket (exit 1, the reason said). A daemon without
            CAP_SYS_PTRACE admits the member, but ibv_reg_mr fails with EACCES there and the
            daemon logs that the client is another user.
  dumpable  softrdmad as uid 65534 without capabilities, and pyverbs clients of the same uid:
            ibv_reg_mr works while the client is dumpable, fails with EACCES (and the daemon
            logs that the client is not dumpable) after prctl(PR_SET_DUMPABLE, 0), and works
            again after prctl(PR_SET_DUMPABLE, 1), in one process on one connection; a client
            that is not dumpable from the start fails the same way. softrdmad as root
            (CAP_SYS_PTRACE) registers the memory of a client that is not dumpable.
  pidns     softrdmad in a PID namespace of its own (unshare --pid), as in a container without
            --pid host, and a client outside it, which SO_PEERCRED names as pid 0: the client is
            refused at once with "cannot see this process: it runs in another PID namespace" and
            no device, and the daemon logs why, rather than failing the client's first
            ibv_reg_mr.

Not tested: Yama. This kernel has none (/proc/sys/kernel/yama is absent), so the path where
the shim names the daemon with prctl(PR_SET_PTRACER) and ptrace_scope 1 then lets a daemon of
the same user in cannot be exercised. (PR_SET_PTRACER does not help a client that is not
dumpable, Yama or not: the kernel asks for CAP_SYS_PTRACE before it asks Yama.)

The binaries, the shim library and the client script are copied into a temporary directory
that every uid can read: the build tree's path may not be traversable by uid 65534 (a home
directory, a 0700 workspace), and `softrdma run` then finds the copied library through
SOFTRDMA_LIB_DIR.

Needs root (setpriv switches users, and the root-daemon check needs CAP_SYS_PTRACE): exit 77
(ctest's SKIP_RETURN_CODE) without it, where setpriv is missing or cannot switch users (a user
namespace without those uids), where ibverbs-utils or pyverbs is missing, or where Yama's
ptrace_scope is 2 or more (no daemon without CAP_SYS_PTRACE could read any client, so the
successful cases this test needs cannot happen).
"""

import errno
import grp
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_pairs_test as pairs  # noqa: E402  (Side, start_listening, check, finish, skip)

PYTHON = "/usr/bin/python3"  # Debian's: pyverbs is not installed for a pyenv python3
DAEMON_UID = 65533  # unused uids (65534 is nobody); numeric only, none is created
MEMBER_UID = 65534
OUTSIDER_UID = 65532
CLIENT_TIMEOUT = 20  # seconds; a refused client must be far quicker (ASSERTED_QUICK)
ASSERTED_QUICK = 10

# The client: registers memory at an address it mapped itself (so the daemon's log line can be
# matched to it) after each step of argv[1] ("reg", "nodump", "dump"), and prints one JSON line
# per registration: the address, the errno pyverbs reports (0: registered) and whether the
# process was dumpable then.
CLIENT = r'''
import ctypes, json, mmap, os, sys
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

libc = ctypes.CDLL(None, use_errno=True)
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
ctx = Context(name="srdma0")
pd = PD(ctx)
keep = []
print(json.dumps({"pid": os.getpid()}), flush=True)
for step in sys.argv[1].split(","):
    if step in ("nodump", "dump"):
        if libc.prctl(PR_SET_DUMPABLE, 1 if step == "dump" else 0, 0, 0, 0) != 0:
            sys.exit("prctl(PR_SET_DUMPABLE) failed: errno %d" % ctypes.get_errno())
        continue
    buf = mmap.mmap(-1, 8192)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    keep.append(buf)
    result = {"addr": addr, "dumpable": libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)}
    try:
        keep.append(MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE, address=addr))
        result["errno"] = 0
    except PyverbsRDMAError as ex:
        result["errno"] = ex.error_code
    print(json.dumps(result), flush=True)
'''


def free_gid():
    """A gid no group has: --group is then given a number, as a container's gid may be."""
    for gid in range(65531, 60000, -1):
        try:
            grp.getgrgid(gid)
        except KeyError:
            return gid
    pairs.skip("no free gid between 60001 and 65531")


def as_user(uid, gid, groups=(), ptrace=False):
    """setpriv's prefix running a program as UID:GID with exactly GROUPS as supplementary
    groups, and CAP_SYS_PTRACE as an ambient capability if PTRACE (else no capability).
    Changing uid clears the parent-death signal: setpriv sets it again after the switch."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
    argv += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    if ptrace:
        argv += ["--inh-caps=+sys_ptrace", "--ambient-caps=+sys_ptrace"]
    return argv + ["--pdeathsig=KILL", "--"]


class Setup:
    """The temporary directory (0755, so every uid reaches it), copies of the binaries in it, and
    one runtime directory per uid (softrdma refuses one that is not its own)."""

    def __init__(self, work, softrdmad, softrdma, shim_dir):
        self.work = work
        os.chmod(work, 0o755)
        bin_dir, lib_dir = os.path.join(work, "bin"), os.path.join(work, "lib")
        os.mkdir(bin_dir, 0o755)
        os.mkdir(lib_dir, 0o755)
        self.softrdmad = shutil.copy(softrdmad, bin_dir)
        self.softrdma = shutil.copy(softrdma, bin_dir)
        shutil.copy(os.path.join(shim_dir, "libibverbs.so.1"), lib_dir)
        self.lib_dir = lib_dir
        self.script = os.path.join(work, "client.py")
        with open(self.script, "w") as f:
            f.write(CLIENT)
        os.chmod(self.script, 0o644)

    def env(self, uid):
        """`env` arguments for a process of UID: its own runtime directory, the copied shim."""
        rt = os.path.join(self.work, f"runtime-{uid}")
        if not os.path.isdir(rt):
            os.mkdir(rt, 0o700)
            os.chown(rt, uid, -1)
        return ["env", f"SOFTRDMA_RUNTIME_DIR={rt}", f"SOFTRDMA_LIB_DIR={self.lib_dir}"]

    def socket_dir(self, uid, name):
        """A directory only UID may write, everyone may traverse: where UID's daemon listens."""
        d = os.path.join(self.work, name)
        os.mkdir(d, 0o755)
        os.chown(d, uid, -1)
        return d

    def daemon(self, tag, user, ip, extra=(), wrapper=()):
        """softrdmad run with USER's setpriv prefix (after WRAPPER's) on a socket in its own
        directory; (Side, socket path), the Side already ended when the socket never appeared."""
        sock = os.path.join(self.socket_dir(user[0], tag), "d.sock")
        argv = [*wrapper] + as_user(*user[:3], ptrace=user[3]) + self.env(user[0]) + \
            [self.softrdmad, "--ip", ip, "--socket", sock, *extra]
        side = pairs.Side("daemon", argv, self.work, tag)
        until = time.monotonic() + pairs.LISTEN_TIMEOUT
        while not os.path.exists(sock) and side.alive() and time.monotonic() < until:
            time.sleep(0.02)
        return side, sock

    def client(self, user, sock, program):
        """PROGRAM through `softrdma run --daemon=SOCK` as USER: (exit status, stdout, stderr,
        seconds), exit status None when it had to be killed at CLIENT_TIMEOUT."""
        argv = as_user(*user[:3]) + self.env(user[0]) + [self.softrdma, "run", f"--daemon={sock}", "--", *program]
        start = time.monotonic()
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=CLIENT_TIMEOUT, env=pairs.clean_env())
            return r.returncode, r.stdout, r.stderr, time.monotonic() - start
        except subprocess.TimeoutExpired as ex:
            out = ex.stdout.decode(errors="replace") if isinstance(ex.stdout, bytes) else (ex.stdout or "")
            err = ex.stderr.decode(errors="replace") if isinstance(ex.stderr, bytes) else (ex.stderr or "")
            return None, out, err, time.monotonic() - start

    def registrations(self, user, sock, steps):
        """The client script's (pid, [registration results]) for STEPS, or (None, []) with a
        failed check."""
        rc, out, err, _ = self.client(user, sock, [PYTHON, self.script, steps])
        lines = []
        for line in out.splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
        expected = steps.split(",").count("reg")
        if not pairs.check(rc == 0 and lines and "pid" in lines[0] and len(lines) == 1 + expected,
                           f"the pyverbs client ({steps}) runs to its end", f"exit {rc}\n{out}{err}"):
            return None, []
        return lines[0]["pid"], lines[1:]


def stop(side, what):
    """SIGTERM to a daemon: it must exit 0; its stderr."""
    if side.alive():
        side.proc.send_signal(signal.SIGTERM)
        side.wait(time.monotonic() + 10)
    pairs.check(side.proc.returncode == 0, f"{what} exits 0 on SIGTERM", side.report())
    return side.output()[1]


def listening(side, sock, what):
    return pairs.check(os.path.exists(sock) and side.alive(), f"{what} listens on {sock}", side.report())


def unreachable_lines(log, pid):
    return [line for line in log.splitlines() if f"softrdmad: pid {pid}: cannot reach its memory" in line]


def refused(result, sock):
    """Whether a client's result is the shim's refusal: the connect error, no device, quick."""
    rc, out, err, seconds = result
    return (rc is not None and rc != 0 and f"cannot reach softrdmad at {sock}: Permission denied" in err and
            "no RDMA device" in err and "srdma0" not in out and seconds < ASSERTED_QUICK)


def case_group(s):
    gid = free_gid()
    daemon_user = (DAEMON_UID, DAEMON_UID, [gid], True)  # uid, gid, groups, CAP_SYS_PTRACE
    member = (MEMBER_UID, MEMBER_UID, [gid])
    outsider = (OUTSIDER_UID, OUTSIDER_UID, [])
    ip = "127.84.7.1"

    daemon, sock = s.daemon("group", daemon_user, ip, ["--group", str(gid)])
    if not listening(daemon, sock, f"softrdmad --group {gid} as uid {DAEMON_UID}"):
        return
    try:
        st = os.stat(sock)
        pairs.check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == gid and
                    st.st_uid == DAEMON_UID,
                    f"the socket is mode 0660, group {gid}, user {DAEMON_UID}",
                    f"mode {oct(st.st_mode)} uid {st.st_uid} gid {st.st_gid}")
        rc, out, err, _ = s.client(member, sock, ["ibv_devinfo", "-v"])
        pairs.check(rc == 0 and "srdma0" in out and f"::ffff:{ip}" in out,
                    f"a member of {gid} (uid {MEMBER_UID}) sees the daemon's device", f"exit {rc}\n{out[-1500:]}{err}")
        pairs.check(re.search(r"^\s+max_mcast_grp:\s+64$", out, re.M) is not None,
                    "the daemon's device reports the 64 groups its udp backend can join")
        r = s.client(outsider, sock, ["ibv_devinfo"])
        pairs.check(refused(r, sock), f"uid {OUTSIDER_UID}, not in group {gid}: refused at once, no device",
                    f"exit {r[0]} after {r[3]:.1f} s\n{r[1]}{r[2]}")

        # A pair of the member's programs: the daemon reads and writes memory of another uid.
        run = as_user(*member) + s.env(MEMBER_UID) + [s.softrdma, "run", f"--daemon={sock}", "--"]
        pingpong = ["ibv_rc_pingpong", "-g", "0", "-n", "50"]
        server, port = pairs.start_listening(lambda p: run + pingpong + ["-p", str(p)], s.work, "group.pp",
                                             time.monotonic() + 30)
        if server is not None:
            client = pairs.Side("client", run + pingpong + ["-p", str(port), "127.0.0.1"], s.work, "group.pp")
            until = time.monotonic() + 60
            client.wait(until)
            server.wait(until)
            for side in (server, client):
                out, _ = side.output()
                pairs.check(side.proc.returncode == 0 and "bytes in" in out,
                            f"ibv_rc_pingpong's {side.role} as uid {MEMBER_UID} on the daemon of uid {DAEMON_UID}",
                            side.report())
    finally:
        log = stop(daemon, "the --group daemon")
    pairs.check("cannot reach its memory" not in log, "the daemon with CAP_SYS_PTRACE reached the member's memory", log)

    # Without --group the socket is the daemon user's alone: the member is refused as well.
    daemon, sock = s.daemon("nogroup", daemon_user, "127.84.7.2")
    if listening(daemon, sock, "softrdmad without --group"):
        try:
            st = os.stat(sock)
            pairs.check(stat.S_IMODE(st.st_mode) == 0o600, "without --group the socket is mode 0600", oct(st.st_mode))
            r = s.client(member, sock, ["ibv_devinfo"])
            pairs.check(refused(r, sock), f"without --group a member of {gid} is refused at once, no device",
                        f"exit {r[0]} after {r[3]:.1f} s\n{r[1]}{r[2]}")
        finally:
            stop(daemon, "the daemon without --group")

    # A daemon outside the group cannot hand it the socket (chown needs membership or CAP_CHOWN).
    daemon, sock = s.daemon("notmember", (DAEMON_UID, DAEMON_UID, [], False), "127.84.7.3", ["--group", str(gid)])
    daemon.wait(time.monotonic() + 10)
    _, err = daemon.output()
    pairs.check(daemon.proc.returncode == 1 and f"cannot give {sock} to group {gid}: Operation not permitted" in err and
                not os.path.exists(sock),
                "a daemon not in the group: exit 1, says it cannot give the socket to the group, leaves no socket",
                daemon.report())

    # A daemon without CAP_SYS_PTRACE lets the member attach, but not register memory: EACCES,
    # and the log names the reason. Its own user's client registers (the setup is sound).
    daemon, sock = s.daemon("noptrace", (DAEMON_UID, DAEMON_UID, [gid], False), "127.84.7.4", ["--group", str(gid)])
    if not listening(daemon, sock, "softrdmad --group without CAP_SYS_PTRACE"):
        return
    try:
        own_pid, own = s.registrations((DAEMON_UID, DAEMON_UID, []), sock, "reg")
        pairs.check(own_pid is not None and [r["errno"] for r in own] == [0],
                    "without CAP_SYS_PTRACE, a client of the daemon's own uid registers memory", json.dumps(own))
        pid, regs = s.registrations(member, sock, "reg")
    finally:
        log = stop(daemon, "the daemon without CAP_SYS_PTRACE")
    if pid is None:
        return
    pairs.check([r["errno"] for r in regs] == [errno.EACCES],
                f"without CAP_SYS_PTRACE, ibv_reg_mr of uid {MEMBER_UID}'s memory fails with EACCES", json.dumps(regs))
    lines = unreachable_lines(log, pid)
    want = (f"at {hex(regs[0]['addr'])} with process_vm_readv (Operation not permitted): the client runs as uid "
            f"{MEMBER_UID}, the daemon as uid {DAEMON_UID} without CAP_SYS_PTRACE")
    pairs.check(len(lines) == 1 and want in lines[0], "the daemon logs that the client is another user", log)


def case_dumpable(s):
    user = (MEMBER_UID, MEMBER_UID, [])
    daemon, sock = s.daemon("dumpable", (*user, False), "127.84.7.5")
    if not listening(daemon, sock, f"softrdmad as uid {MEMBER_UID} without capabilities"):
        return
    try:
        toggled_pid, toggled = s.registrations(user, sock, "reg,nodump,reg,dump,reg")
        never_pid, never = s.registrations(user, sock, "nodump,reg")
    finally:
        log = stop(daemon, "the unprivileged daemon")
    if toggled_pid is not None:
        pairs.check([(r["dumpable"], r["errno"]) for r in toggled] == [(1, 0), (0, errno.EACCES), (1, 0)],
                    "one client: ibv_reg_mr works dumpable, fails with EACCES not dumpable, works dumpable again",
                    json.dumps(toggled))
        lines = unreachable_lines(log, toggled_pid)
        want = (f"at {hex(toggled[1]['addr'])} with process_vm_readv (Operation not permitted): the client is not "
                f"dumpable")
        pairs.check(len(lines) == 1 and want in lines[0] and "CAP_SYS_PTRACE" in lines[0],
                    "the daemon logs the refused registration once: the client is not dumpable, needs CAP_SYS_PTRACE",
                    log)
    if never_pid is not None:
        pairs.check([(r["dumpable"], r["errno"]) for r in never] == [(0, errno.EACCES)],
                    "a client not dumpable from the start: ibv_reg_mr fails with EACCES", json.dumps(never))
        lines = unreachable_lines(log, never_pid)
        pairs.check(len(lines) == 1 and hex(never[0]["addr"]) in lines[0] and "the client is not dumpable" in lines[0],
                    "the daemon logs it", log)

    # Root's daemon has CAP_SYS_PTRACE: dumpability does not stop it. (--group with the
    # client's own gid lets uid 65534 reach root's socket.)
    daemon, sock = s.daemon("root", (0, 0, [], False), "127.84.7.6", ["--group", str(MEMBER_UID)])
    if not listening(daemon, sock, "softrdmad as root"):
        return
    try:
        pid, regs = s.registrations(user, sock, "nodump,reg")
    finally:
        log = stop(daemon, "root's daemon")
    if pid is not None:
        pairs.check([(r["dumpable"], r["errno"]) for r in regs] == [(0, 0)],
                    f"root's daemon registers the memory of uid {MEMBER_UID}'s client that is not dumpable",
                    json.dumps(regs) + "\n" + log)


def case_pidns(s):
    # unshare does not pass SIGTERM on: the daemon (its child, pid 1 inside) gets it directly.
    daemon, sock = s.daemon("pidns", (0, 0, [], False), "127.84.7.7", wrapper=["unshare", "--pid", "--fork", "--kill-child"])
    if not listening(daemon, sock, "softrdmad in a PID namespace of its own"):
        return
    try:
        rc, out, err, seconds = s.client((0, 0, []), sock, ["ibv_devinfo"])
    finally:
        with open(f"/proc/{daemon.proc.pid}/task/{daemon.proc.pid}/children") as f:
            for child in f.read().split():
                os.kill(int(child), signal.SIGTERM)
        log = stop(daemon, "the daemon in its own PID namespace")
    pairs.check("cannot see this process: it runs in another PID namespace" in err and "srdma0" not in out and
                seconds < ASSERTED_QUICK, "a client the daemon cannot see is refused at once, saying why",
                f"exit {rc}, {seconds:.1f} s\n{out}{err}")
    pairs.check("refused a client (uid 0) whose PID namespace this daemon cannot see" in log,
                "the daemon logs the refusal", log)


def main(argv):
    if len(argv) != 5 or argv[1] not in ("group", "dumpable", "pidns"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    case, softrdmad, softrdma, shim_dir = argv[1:]
    if os.geteuid() != 0:
        pairs.skip("needs root: setpriv switches between unprivileged users")
    if shutil.which("setpriv") is None:
        pairs.skip("setpriv is not installed (util-linux)")
    probe = subprocess.run(as_user(OUTSIDER_UID, OUTSIDER_UID) + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pairs.skip(f"setpriv cannot switch to uid {OUTSIDER_UID} here: {probe.stderr.strip()}")
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            if int(f.read()) >= 2:
                pairs.skip("Yama's ptrace_scope is 2 or more: only CAP_SYS_PTRACE may read another process")
    except FileNotFoundError:
        pass  # no Yama (as on the machine this was written on): PR_SET_PTRACER goes untested
    if case == "group":
        for program in ("ibv_devinfo", "ibv_rc_pingpong"):
            if not os.path.exists(f"/usr/bin/{program}"):
                pairs.skip(f"/usr/bin/{program} is not installed (apt-get install ibverbs-utils)")
    if case == "pidns" and subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode != 0:
        pairs.skip("unshare --pid cannot make a PID namespace here")
    if subprocess.run([PYTHON, "-c", "import pyverbs"], capture_output=True).returncode != 0:
        pairs.skip(f"pyverbs is not installed for {PYTHON} (apt-get install python3-pyverbs)")

    with tempfile.TemporaryDirectory(prefix="softrdmad-access-") as work:
        s = Setup(work, softrdmad, softrdma, shim_dir)
        {"group": case_group, "dumpable": case_dumpable, "pidns": case_pidns}[case](s)
    return pairs.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
