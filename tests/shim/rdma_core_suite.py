#!/usr/bin/env python3
"""rdma-core's own Python test suite (v44, Debian's python3-pyverbs) on softrdma.

usage: /usr/bin/python3 rdma_core_suite.py SOFTRDMA [--category core[,...]] [--min-pass 98] [-k PATTERN]...
                                          [--all] [--timeout 600] [--test-timeout 60] [--env NAME=VALUE]...
                                          [--daemon SOFTRDMAD [--daemon-ip 127.0.0.1] [--daemon-option OPT]...]

What a pass proves: under `SOFTRDMA run --` (our libibverbs.so.1, a clean environment), every
test of the selected categories of rdma-core-tests-inventory.tsv (default `core`, 100 tests)
exists in the installed suite and ran to an end; at least --min-pass of them passed (every
selected one when -k selects fewer); none failed, errored, crashed the interpreter or hung
(a crash outside any test, e.g. at exit, fails too); and each one that
skipped did so because softrdma lacks a capability (a zero capability or a verb answering
EOPNOTSUPP) or, in tests written for other hardware, because softrdma is not that hardware,
never because the test could not find the device, an ACTIVE port or a GID. The allowed and
forbidden skip reasons are the explicit lists HARDWARE_SKIPS (by category), FORBIDDEN_SKIPS
and ALLOWED_SKIPS below; a reason on none of them fails too, so a new kind of skip must be
looked at once.
Tests outside the category run only with --all, and are then reported but not judged.

How it runs: the installed suite is copied to a temporary folder and its .gz files unpacked;
`run_tests.py --list-tests` names the tests (with -k, unittest's own -k semantics), then each
test module runs in its own `softrdma run -- /usr/bin/python3 run_tests.py -v --dev DEV --port
PORT TEST_IDS...` process. One process per module, not per test: a process costs about 0.2 s
(interpreter, pyverbs, the suite's imports), negligible either way, but a module run is what a
user of the suite sees, so state one test leaves behind in the library (a leak, a wedged
context) shows up in the next. Isolation is kept where it matters: the output is read as it
comes, and when a test prints nothing for --test-timeout seconds (waits on completion events
never time out) its process group gets SIGABRT, so that faulthandler prints the Python stack
where it hung, then SIGKILL; the test counts as a hang. A test that kills the interpreter (a
signal, or an exit mid-test) counts as an error naming the signal. In both cases the results
already printed are kept and the module's remaining tests run in a fresh process. --timeout
bounds the whole run; tests it leaves unrun are errors. With --daemon every process attaches
to one softrdmad started for the run (`softrdma run --daemon=SOCKET`), as the processes of one
host share its RNIC: the rdmacm tests fork a passive and an active side that both use the
address of the device's net interface, which only a shared device holds. No --gid is passed by default: traffic
tests then pick the GID themselves (ACTIVE port, non-zero, RoCE type), so that discovery is
judged too; --gid pins an index like the suite's own flag.

Exit status: 0 pass, 1 fail, 2 usage error, 77 (ctest's SKIP_RETURN_CODE) when
/usr/share/doc/rdma-core/tests or /usr/bin/python3 with pyverbs is missing.
"""

import argparse
import ast
import dataclasses
import fnmatch
import functools
import gzip
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP_EXIT = 77
PYTHON = "/usr/bin/python3"  # Debian's interpreter: pyverbs is installed for it only
RDMA_CORE_TESTS = "/usr/share/doc/rdma-core/tests"
INVENTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rdma-core-tests-inventory.tsv")
OUTCOMES = ("pass", "skip", "fail", "error", "hang")
TRACE_LINES = 8  # lines of traceback kept per failure
LINE_WIDTH = 200

# Why a test may skip. A skip must mean "softrdma lacks this capability", never "the test could
# not reach the device". FORBIDDEN_SKIPS is checked first (environment failures: no device, no
# ACTIVE port, a GID missing or a GID table the test cannot use, no netdev, not root, missing
# host hardware); then ALLOWED_SKIPS (the suite's wording for a zero capability or a verb that
# answered EOPNOTSUPP / EPROTONOSUPPORT, plus the host having no 2 MiB hugepages, which says
# nothing about the device). A reason matching neither list fails as unrecognised. Patterns are
# case-insensitive regular expressions searched in the reason; `\bgid` cannot match inside
# "ibv_query_gid_table is not supported" (an EOPNOTSUPP skip), as "_" is a word character.
FORBIDDEN_SKIPS = [
    (r"no ib devices? found", "the test found no RDMA device"),
    (r"no supported port is up", "no ACTIVE port with a usable GID"),
    (r"port \d+ is not up", "the port is not ACTIVE"),
    (r"\bgids?\b", "a GID is missing or the GID table leaves nothing to test"),
    (r"link layer of port", "the port's link layer is not what a RoCE test needs"),
    (r"doesn't have net interface", "no network interface in sysfs (rdma_cm)"),
    (r"\bby root\b", "needs root"),
    (r"eswitch|pci device|/dev/dri|\bgpu\b", "host hardware is missing"),
]
ALLOWED_SKIPS = [
    (r"huge pages of size 2m|no huge pages", "the host has no 2 MiB hugepages"),
    (r"operation not supported", "a verb answered EOPNOTSUPP or EPROTONOSUPPORT"),
    (r"\bnot supported\b|doesn't support|no odp caps", "capability absent"),
]

# Skips for hardware this device is not, which issue 24's acceptance leaves out, accepted only in
# the categories of tests written for that hardware: another vendor's device (mlx5, whose VFIO
# tests also want a PCI device, and EFA), CUDA, and a GPU's dma-buf.
HARDWARE_SKIPS = {
    "vendor-mlx5": [(r"non mlx5 device|not an mlx5 device|pci device must be passed|cuda-python",
                     "written for an mlx5 device")],
    "vendor-efa": [(r"non efa device", "written for an EFA device")],
    "opt-cuda": [(r"cuda-python", "needs CUDA")],
    "opt-dmabuf-gpu": [(r"allocating dmabuf is not supported by /dev/dri", "needs a GPU's dma-buf")],
}

# unittest -v (Python 3.11) writes "NAME (ID)", a newline and the docstring's first line when
# there is one, " ... ", then the status; and at the end one "=====" section per FAIL/ERROR.
HEADER = re.compile(r"^(\w+) \(([\w.]+)\)(?=\n| \.\.\. )", re.M)
STATUS = re.compile(r"(?:^|\.\.\. )(ok|FAIL|ERROR|expected failure|unexpected success|skipped ('.*'|\".*\"))$",
                    re.M)
SECTION = re.compile(r"^(?:={70}|-{70})$", re.M)
TRACEBACK = re.compile(r"^={70}\n(?:FAIL|ERROR): (\w+) \(([\w.]+)\)\n.*?^-{70}\n(.*?)(?=^={70}$|^-{70}\nRan |\Z)",
                       re.M | re.S)
STATUS_OUTCOME = {"ok": "pass", "expected failure": "pass", "unexpected success": "fail", "FAIL": "fail",
                  "ERROR": "error"}


@dataclasses.dataclass
class Result:
    test: str
    outcome: str  # one of OUTCOMES
    detail: str = ""  # the skip reason, or the end of the traceback / crash report


@dataclasses.dataclass
class Batch:
    """One run_tests.py process: what it printed and how it ended."""
    text: str
    returncode: int
    stalled: str = ""  # why the runner killed it ("" if it ended by itself)


@dataclasses.dataclass
class Runner:
    softrdma: str
    script: str  # run_tests.py in the unpacked copy
    env: dict
    suite_flags: list
    test_timeout: float
    deadline: float  # time.monotonic() after which nothing more is started
    attach: list = dataclasses.field(default_factory=list)  # ["--daemon=SOCKET"] on a daemon

    def command(self, extra):
        return [self.softrdma, "run", *self.attach, "--", PYTHON, self.script] + extra


def module_of(test):
    return ".".join(test.split(".")[:2])


def trim(text, keep_last=True):
    """At most TRACE_LINES lines of TEXT, without blank lines, 3.11's ^^^ position markers or
    faulthandler's list of extension modules."""
    lines = [line[:LINE_WIDTH] for line in text.strip().splitlines()
             if line.strip(" ^~") and not line.startswith("Extension modules:")]
    return "\n".join(lines[-TRACE_LINES:] if keep_last else lines[:TRACE_LINES])


def classify_skip(reason, category):
    """(allowed, why) for a skip reason of a test of CATEGORY, from HARDWARE_SKIPS for that
    category, then FORBIDDEN_SKIPS, then ALLOWED_SKIPS."""
    for pattern, why in HARDWARE_SKIPS.get(category, []):
        if re.search(pattern, reason, re.I):
            return True, why
    for pattern, why in FORBIDDEN_SKIPS:
        if re.search(pattern, reason, re.I):
            return False, why
    for pattern, why in ALLOWED_SKIPS:
        if re.search(pattern, reason, re.I):
            return True, why
    return False, "unrecognised reason: add it to ALLOWED_SKIPS only if it names an absent capability"


# ---------------------------------------------------------------------------------------------
# Set-up


def missing_prerequisite():
    """What is missing to run the suite at all (exit 77), or None."""
    if not os.path.isdir(RDMA_CORE_TESTS):
        return f"{RDMA_CORE_TESTS} is not installed (apt-get install python3-pyverbs)"
    if not os.access(PYTHON, os.X_OK):
        return f"{PYTHON} is not installed"
    probe = subprocess.run([PYTHON, "-c", "import importlib.util, sys; sys.exit(not importlib.util.find_spec('pyverbs'))"],
                           capture_output=True)
    if probe.returncode != 0:
        return f"pyverbs is not installed for {PYTHON} (apt-get install python3-pyverbs)"
    return None


def unpack_suite(work):
    """Copy the installed suite into WORK/tests and gunzip what Debian compressed."""
    tests = os.path.join(work, "tests")
    shutil.copytree(RDMA_CORE_TESTS, tests)
    for name in os.listdir(tests):
        if name.endswith(".gz"):
            packed = os.path.join(tests, name)
            with gzip.open(packed, "rb") as src, open(packed[:-3], "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(packed)
    return os.path.join(tests, "run_tests.py")


def clean_env(deliberate):
    """The caller's environment without softrdma's knobs or a foreign Python set-up, plus
    DELIBERATE (--env) and what the runner itself needs."""
    dropped = ("SYSFS_PATH", "PYTHONPATH", "PYTHONHOME")  # SYSFS_PATH redirects the library's sysfs
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_") and k not in dropped}
    env.update(deliberate)
    # Unbuffered: the tests' prints land in order between unittest's lines. faulthandler: a
    # crash, or the SIGABRT sent to a hung test, prints the Python stack.
    env.update(PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", PYTHONDONTWRITEBYTECODE="1")
    return env


@functools.cache
def load_inventory():
    with open(INVENTORY) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return {test: category for test, category in rows[1:]}


def category_of(test):
    return load_inventory().get(test)


def matches_k(test, patterns):
    """unittest's -k: a pattern without '*' matches as a substring; any pattern selects."""
    return not patterns or any(fnmatch.fnmatchcase(test, p if "*" in p else f"*{p}*") for p in patterns)


def list_tests(runner, patterns):
    flags = ["--list-tests"] + [arg for p in patterns for arg in ("-k", p)]
    try:
        p = subprocess.run(runner.command(flags), env=runner.env, capture_output=True, text=True, timeout=120,
                           cwd=os.path.dirname(runner.script))
    except subprocess.TimeoutExpired:
        print("FAIL: run_tests.py --list-tests did not finish in 120 s")
        sys.exit(1)
    if p.returncode != 0:
        print(f"FAIL: run_tests.py --list-tests exited with {p.returncode}:\n{trim(p.stdout + p.stderr)}")
        sys.exit(1)
    return re.findall(r"^(tests\.test_\w+\.\w+\.\w+)$", p.stdout, re.M)


# ---------------------------------------------------------------------------------------------
# Running one process


def kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def read_output(proc, quiet, deadline):
    """PROC's output until EOF, QUIET seconds without any, or DEADLINE (monotonic).
    Returns (bytes, reached_eof)."""
    data, fd = b"", proc.stdout.fileno()
    last = time.monotonic()
    while True:
        left = min(last + quiet, deadline) - time.monotonic()
        if left <= 0:
            return data, False
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return data, True
            data, last = data + chunk, time.monotonic()
        elif proc.poll() is not None:
            kill_group(proc, signal.SIGKILL)  # the interpreter is gone: its forked children go too


def run_batch(runner, test_ids):
    """Run TEST_IDS in one process; stop it when no output comes for test_timeout seconds."""
    proc = subprocess.Popen(runner.command(runner.suite_flags + test_ids), env=runner.env,
                            cwd=os.path.dirname(runner.script), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    text, eof = read_output(proc, runner.test_timeout, runner.deadline)
    stalled = ""
    if not eof:
        stalled = ("the overall --timeout was reached while it ran" if time.monotonic() >= runner.deadline
                   else f"no output for {runner.test_timeout:g} s")
        kill_group(proc, signal.SIGABRT)  # faulthandler prints where it is stuck
        text += read_output(proc, 3, time.monotonic() + 3)[0]
    kill_group(proc, signal.SIGKILL)
    proc.stdout.close()
    work = os.path.dirname(os.path.dirname(runner.script)) + os.sep  # temporary: not worth printing
    return Batch(text.decode(errors="replace").replace(work, ""), proc.wait(), stalled)


# ---------------------------------------------------------------------------------------------
# Parsing unittest's verbose output


def result_key(name, paren):
    """The test id; a class or module fixture ("setUpClass (tests.m.C)") gets tests.m.C.setUpClass."""
    return paren if paren.endswith("." + name) else f"{paren}.{name}"


def tracebacks(text):
    return {result_key(m[1], m[2]): trim(m[3]) for m in TRACEBACK.finditer(text)}


def parse_run(text):
    """([Result] of the tests that finished, id of the test that was running when the output
    ended or None). Only the part before unittest's closing sections holds statuses."""
    summary = SECTION.search(text)
    region = text[:summary.start()] if summary else text
    traces = tracebacks(text)
    headers = list(HEADER.finditer(region))
    done, running = [], None
    for header, following in zip(headers, headers[1:] + [None]):
        segment = region[header.end():following.start() if following else len(region)]
        status = STATUS.search(segment)
        test = result_key(header[1], header[2])
        if not status:
            running = test
        elif status[2]:
            done.append(Result(test, "skip", ast.literal_eval(status[2])))
        else:
            outcome = STATUS_OUTCOME[status[1]]
            lost = "(traceback lost: the process ended before unittest printed it)" if outcome != "pass" else ""
            done.append(Result(test, outcome, traces.get(test, lost)))
    return done, running


def how_it_ended(batch):
    if batch.stalled:
        return f"killed: {batch.stalled}"
    if batch.returncode < 0:
        return f"the interpreter died of {signal.Signals(-batch.returncode).name}"
    return f"the interpreter exited with status {batch.returncode}"


def interrupted_result(test, batch):
    """The test that was running when its process was killed or died."""
    after = batch.text[batch.text.rfind(f"({test})"):]
    crash = after.find("Fatal Python error")
    report = trim(after[crash:], keep_last=False) if crash >= 0 else trim(after)
    outcome = "hang" if batch.stalled else "error"
    return Result(test, outcome, f"{how_it_ended(batch)}\n{report}")


def ended_normally(batch):
    return not batch.stalled and batch.returncode in (0, 1)


# ---------------------------------------------------------------------------------------------
# Running a module, resuming after a crash or a hang


def run_module(runner, tests):
    """Results for TESTS (one module), in order, plus any fixture errors and process deaths."""
    results, extra, pending = {}, [], list(tests)
    while pending:
        if time.monotonic() >= runner.deadline:
            for test in pending:
                results[test] = Result(test, "error", "not run: the overall --timeout was reached")
            break
        batch = run_batch(runner, pending)
        done, running = parse_run(batch.text)
        for r in done:
            if r.test in pending:
                results[r.test] = r
            else:
                extra.append(r)  # a class or module fixture's error
        if running in pending:
            results[running] = interrupted_result(running, batch)
        elif not ended_normally(batch):
            extra.append(Result(f"{module_of(tests[0])}.<process>", "error",
                                f"{how_it_ended(batch)} outside any test\n{trim(batch.text)}"))
        left = [t for t in pending if t not in results]
        if left and (ended_normally(batch) or not (done or running in pending)):
            for test in left:  # no progress possible: report instead of retrying
                results[test] = Result(test, "error", f"no result reported; {how_it_ended(batch)}\n{trim(batch.text)}")
            left = []
        pending = left
    return [results[t] for t in tests] + extra


def run_tests(runner, tests):
    """{module: ([Result], seconds)} for TESTS, one process per module (more after a crash)."""
    modules = {}
    for test in tests:
        modules.setdefault(module_of(test), []).append(test)
    report = {}
    for module, members in modules.items():
        start = time.monotonic()
        results = run_module(runner, members)
        report[module] = (results, time.monotonic() - start)
    return report


# ---------------------------------------------------------------------------------------------
# Report and verdict


def counts(results):
    return [sum(r.outcome == o for r in results) for o in OUTCOMES]


def print_table(title, report):
    print(f"\n{title}")
    print(f"  {'module':28} " + " ".join(f"{o:>5}" for o in OUTCOMES) + "   time")
    everything = []
    for module, (results, seconds) in report.items():
        everything += results
        print(f"  {module:28} " + " ".join(f"{n:5}" for n in counts(results)) + f" {seconds:5.1f}s")
    total = sum(seconds for _, seconds in report.values())
    print(f"  {'total':28} " + " ".join(f"{n:5}" for n in counts(everything)) + f" {total:5.1f}s")
    return everything


def indent(text, prefix="      "):
    return prefix + text.replace("\n", "\n" + prefix) if text else ""


def print_details(results):
    skips = [r for r in results if r.outcome == "skip"]
    bad = [r for r in results if r.outcome in ("fail", "error", "hang")]
    if skips:
        print(f"\n  skipped ({len(skips)}):")
        for r in skips:
            allowed, why = classify_skip(r.detail, category_of(r.test))
            print(f"    {r.test}: {r.detail!r} [{'accepted' if allowed else 'REJECTED'}: {why}]")
    if bad:
        print(f"\n  failed, errored or hung ({len(bad)}):")
        for r in bad:
            print(f"    {r.outcome.upper()} {r.test}")
            print(indent(r.detail))


def verdict(results, selected, min_pass):
    """The reasons the judged RESULTS of SELECTED tests fail acceptance (empty: pass)."""
    problems = []
    for r in results:
        if r.outcome == "skip":
            allowed, why = classify_skip(r.detail, category_of(r.test))
            if not allowed:
                problems.append(f"{r.test} skipped for a reason that is not an absent capability: "
                                f"{r.detail!r} ({why})")
    passed, _, failed, errored, hung = counts(results)
    if failed or errored or hung:
        problems.append(f"{failed} failed, {errored} errored, {hung} hung (each must be 0)")
    need = min(min_pass, selected)
    if passed < need:
        problems.append(f"{passed} passed, fewer than the {need} required")
    if not selected:
        problems.append("no test selected")
    return problems


# ---------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("softrdma", help="the softrdma executable")
    p.add_argument("--category", default="core",
                   help="inventory category judged, or several separated by commas (default core)")
    p.add_argument("--min-pass", type=int, default=98,
                   help="passes required (default 98; every selected test when -k selects fewer)")
    p.add_argument("-k", dest="patterns", action="append", default=[], help="unittest -k pattern (repeatable)")
    p.add_argument("--all", action="store_true", help="also run tests outside the category (reported, not judged)")
    p.add_argument("--timeout", type=float, default=600, help="bound on the whole run, seconds (default 600)")
    p.add_argument("--test-timeout", type=float, default=60,
                   help="a test printing nothing for this long is a hang, seconds (default 60)")
    p.add_argument("--dev", default="srdma0", help="device passed to run_tests.py (default srdma0)")
    p.add_argument("--port", type=int, default=1)
    p.add_argument("--gid", type=int, help="GID index passed to run_tests.py (default: the tests choose)")
    p.add_argument("--daemon", metavar="SOFTRDMAD",
                   help="run the tests on one softrdmad (started here) instead of a device per process")
    p.add_argument("--daemon-ip", default="127.0.0.1",
                   help="the daemon's address (default 127.0.0.1, the address of `lo` the rdmacm tests use)")
    p.add_argument("--daemon-option", action="append", default=[], metavar="OPT",
                   help="an option for softrdmad (e.g. --iwarp, with --dev srdmaiw0 --env SOFTRDMA_IWARP=1)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable to pass deliberately (e.g. SOFTRDMA_DEBUG=1)")
    args = p.parse_args(argv)
    if any("=" not in e for e in args.env):
        p.error("--env takes NAME=VALUE")
    if not os.access(args.softrdma, os.X_OK):
        p.error(f"{args.softrdma} is not an executable")
    return args


def suite_flags(args):
    flags = ["-v", "--dev", args.dev, "--port", str(args.port)]
    return flags + (["--gid", str(args.gid)] if args.gid is not None else [])


def select_tests(listed, inventory, args):
    """(judged tests that exist, judged tests missing from the suite, other tests to run)."""
    categories = set(args.category.split(","))
    judged = [t for t in listed if inventory.get(t) in categories]
    missing = sorted(t for t, c in inventory.items()
                     if c in categories and matches_k(t, args.patterns) and t not in listed)
    others = [t for t in listed if inventory.get(t) not in categories] if args.all else []
    return judged, missing, others


# How long to wait for the daemon's address to be free: under ctest -j another test's device
# may hold it for a while (an embedded device takes the first free 127.0.0.N).
DAEMON_ADDRESS_WAIT = 60


def start_daemon(softrdmad, address, work, options=()):
    """softrdmad on ADDRESS, with OPTIONS, its socket in WORK: (the process, the socket), or
    (None, why)."""
    sock = os.path.join(work, "softrdmad.sock")
    log = os.path.join(work, "softrdmad.log")
    give_up = time.monotonic() + DAEMON_ADDRESS_WAIT
    while True:
        with open(log, "w") as out:
            daemon = subprocess.Popen([softrdmad, "--ip", address, "--socket", sock, *options], stdout=out, stderr=out,
                                      stdin=subprocess.DEVNULL)
        while not os.path.exists(sock) and daemon.poll() is None:
            time.sleep(0.02)
        if os.path.exists(sock):
            return daemon, sock
        with open(log) as f:
            said = f.read().strip()
        if "already in use" not in said or time.monotonic() > give_up:
            return None, f"softrdmad did not start: {said}"
        time.sleep(0.5)


def stop_daemon(daemon):
    """SIGTERM; the problem, or "" when it exited 0."""
    daemon.terminate()
    try:
        rc = daemon.wait(timeout=10)
    except subprocess.TimeoutExpired:
        daemon.kill()
        return "softrdmad did not exit within 10 s of SIGTERM"
    return "" if rc == 0 else f"softrdmad exited {rc} on SIGTERM"


def main(argv):
    args = parse_args(argv)
    absent = missing_prerequisite()
    if absent:
        print(f"SKIPPED: {absent}")
        return SKIP_EXIT
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="softrdma-rdma-core-suite-") as work:
        daemon, attach = None, []
        if args.daemon:
            daemon, sock = start_daemon(args.daemon, args.daemon_ip, work, args.daemon_option)
            if daemon is None:
                print(f"FAIL: {sock}")
                return 1
            attach = [f"--daemon={sock}"]
        try:
            results, expected = run_category(args, work, started, attach)
        finally:
            stopped = stop_daemon(daemon) if daemon is not None else ""
    problems = verdict(results, expected, args.min_pass) + ([stopped] if stopped else [])
    print(f"\nran in {time.monotonic() - started:.1f} s")
    for problem in problems:
        print(f"FAIL: {problem}")
    if not problems:
        print(f"PASS: category {args.category!r}: {counts(results)[0]} passed, {counts(results)[1]} skipped "
              "for accepted reasons, none failed, errored or hung")
    return 1 if problems else 0


def run_category(args, work, started, attach):
    """Runs the judged tests (and the others with --all): their results and how many were judged."""
    runner = Runner(os.path.abspath(args.softrdma), unpack_suite(work),
                    clean_env(dict(e.split("=", 1) for e in args.env)), suite_flags(args),
                    args.test_timeout, started + args.timeout, attach)
    judged, missing, others = select_tests(list_tests(runner, args.patterns), load_inventory(), args)
    print(f"rdma-core tests on {runner.softrdma} (run_tests.py {' '.join(runner.suite_flags)}"
          f"{''.join(' -k ' + p for p in args.patterns)}): {len(judged)} of category {args.category!r}"
          + (f", {len(others)} others" if args.all else ""))
    report = run_tests(runner, judged)
    if missing:
        report["(not in the suite)"] = ([Result(t, "error", "in the inventory but not listed by run_tests.py")
                                         for t in missing], 0.0)
    results = print_table(f"category {args.category!r} (judged):", report)
    print_details(results)
    if others:
        print_details(print_table("outside the category (reported, not judged):", run_tests(runner, others)))
    return results, len(judged) + len(missing)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
