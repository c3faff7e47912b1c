#!/usr/bin/env python3
"""Registered memory the application unmaps: an access error, never a crash.

usage: unmapped_memory_test.py SOFTRDMA [--daemon SOFTRDMAD]
       unmapped_memory_test.py --inside     (what the first form runs under `softrdma run`)

One pyverbs process with QPs connected to each other on srdma0 (embedded, or with --daemon on
a softrdmad of its own). Unmapped ranges are held by inaccessible reservations, so that
nothing else is mapped there.

An on-demand MR over an mmap'ed buffer carries a checked RDMA WRITE first; then the buffer is
unmapped and
  - a SEND gathering from it completes with IBV_WC_LOC_PROT_ERR on the sender;
  - on a fresh RC pair, an RDMA WRITE into it completes with IBV_WC_REM_ACCESS_ERR;
  - on a fresh RC pair, an RDMA READ from it completes with IBV_WC_REM_ACCESS_ERR.
A plain MR holds a UD receive buffer, which takes a checked datagram first; then the buffer is
unmapped with a receive posted into it (as UCX's ud transport does at teardown: a real RNIC
writes to the pages it pinned), and the next datagram completes that receive with
IBV_WC_LOC_PROT_ERR. Last, new pairs over new MRs move data again: the process and the device
lived through it. Exit 0 pass, 1 fail, 77 (ctest's SKIP_RETURN_CODE) without pyverbs.
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_pairs_test import check, finish  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's: pyverbs is installed for it only
SIZE = 64 * 1024
PAGE = 4096
TIMEOUT = 10  # seconds for a completion
QKEY = 0x11111111
DATAGRAM = 1024
GRH = 40  # the Global Route Header a UD receive buffer takes first (IBTA vol. 1 s11.4.1.2)

def inside():
    import pyverbs.enums as e
    from pyverbs.addr import AH, AHAttr, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mem_alloc import MAP_ANONYMOUS_, MAP_PRIVATE_, mmap, munmap
    PROT_NONE, MAP_FIXED_NOREPLACE = 0, 0x100000  # <sys/mman.h>
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
    from pyverbs.wr import SGE, RecvWR, SendWR
    import ctypes

    ctx = Context(name="srdma0")
    attr = ctx.query_device_ex()
    check(attr.odp_caps.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT != 0 and
          attr.odp_caps.general_caps & e.IBV_ODP_SUPPORT != 0, "srdma0 reports ODP, implicit MRs included")
    pd = PD(ctx)
    gid = ctx.query_gid(1, 0)
    access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
              e.IBV_ACCESS_ON_DEMAND)

    def pair():
        cq = CQ(ctx, 16)
        qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
               for _ in range(2)]
        for me, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
            a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
            a.qp_access_flags = access & ~e.IBV_ACCESS_ON_DEMAND
            me.to_init(a)
            a = QPAttr(port_num=1)
            a.path_mtu = e.IBV_MTU_1024
            a.dest_qp_num = peer.qp_num
            a.max_dest_rd_atomic = 1
            a.max_rd_atomic = 1
            a.timeout = 8  # 1 ms: a peer that answers nothing fails soon
            a.retry_cnt = 1
            a.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=0), is_global=1, port_num=1)
            me.to_rtr(a)
            me.to_rts(a)
        return cq, qps

    def wait(cq, qp_num=None):
        """The next completion (of `qp_num`'s, when given), or None after TIMEOUT."""
        until = time.monotonic() + TIMEOUT
        while time.monotonic() < until:
            n, wcs = cq.poll()
            if n > 0 and (qp_num is None or wcs[0].qp_num == qp_num):
                return wcs[0]
        return None

    def ud_pair():
        cq = CQ(ctx, 16)
        qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
               for _ in range(2)]
        for qp in qps:
            a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
            a.qkey = QKEY
            qp.to_init(a)
            qp.to_rtr(a)
            qp.to_rts(a)
        return cq, qps

    def post_page(qp, addr, lkey):
        qp.post_recv(RecvWR(num_sge=1, sg=[SGE(addr, PAGE, lkey)]))

    def send_datagram(cq, qps, send_mr):
        """Sends DATAGRAM bytes of 0x3C from qps[0] to qps[1]; qps[1]'s completion."""
        ctypes.memset(send_mr.buf, 0x3C, DATAGRAM)
        wr = SendWR(opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(send_mr.buf, DATAGRAM, send_mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, qps[1].qp_num, QKEY)
        qps[0].post_send(wr)
        return wait(cq, qps[1].qp_num)

    def datagram_landed(wc, addr):
        return (wc is not None and wc.status == e.IBV_WC_SUCCESS and wc.byte_len == GRH + DATAGRAM and
                ctypes.string_at(addr + GRH, DATAGRAM) == b"\x3c" * DATAGRAM)

    def hold(addr):
        """Unmaps [addr, addr + SIZE) and reserves it inaccessible; whether the reservation landed."""
        munmap(addr, SIZE)
        return mmap(addr=addr, length=SIZE, prot=PROT_NONE, flags=MAP_ANONYMOUS_ | MAP_PRIVATE_ | MAP_FIXED_NOREPLACE)

    def odp_buffer():
        addr = mmap(length=SIZE, flags=MAP_ANONYMOUS_ | MAP_PRIVATE_)
        return addr, MR(pd, SIZE, access, address=addr)

    def write_read_roundtrip(cq, qps, mr_from, mr_to):
        ctypes.memset(mr_from.buf, 0x5A, SIZE)
        wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr_from.buf, SIZE, mr_from.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(mr_to.rkey, mr_to.buf)
        qps[0].post_send(wr)
        wc = wait(cq)
        wrote = wc is not None and wc.status == e.IBV_WC_SUCCESS and ctypes.string_at(mr_to.buf, SIZE) == b"\x5a" * SIZE
        return wrote, wc

    # Data moves through on-demand MRs at all.
    cq, qps = pair()
    addr_a, mr_a = odp_buffer()
    addr_b, mr_b = odp_buffer()
    wrote, wc = write_read_roundtrip(cq, qps, mr_a, mr_b)
    check(wrote, "an RDMA WRITE between two on-demand MRs lands intact", f"status {wc and wc.status}")

    # The destination's memory goes away: each operation that touches it fails, the process lives.
    # An inaccessible reservation then holds the range: the next pair's rings or buffers would
    # otherwise be mapped there, and an on-demand MR follows the address space to them.
    held = hold(addr_b)
    check(held == addr_b, "the unmapped range stays free of other mappings (a PROT_NONE reservation)", hex(held))
    send = SendWR(opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr_b.buf, PAGE, mr_b.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    qps[1].post_recv(RecvWR(num_sge=1, sg=[SGE(mr_a.buf, PAGE, mr_a.lkey)]))
    qps[1].post_send(send)
    wc = wait(cq)
    while wc is not None and wc.qp_num != qps[1].qp_num:
        wc = wait(cq)
    check(wc is not None and wc.status == e.IBV_WC_LOC_PROT_ERR,
          "a SEND gathering from unmapped on-demand memory completes with LOC_PROT_ERR", f"status {wc and wc.status}")

    for opcode, name in ((e.IBV_WR_RDMA_WRITE, "WRITE into"), (e.IBV_WR_RDMA_READ, "READ from")):
        cq, qps = pair()
        wr = SendWR(opcode=opcode, num_sge=1, sg=[SGE(mr_a.buf, PAGE, mr_a.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(mr_b.rkey, mr_b.buf)
        qps[0].post_send(wr)
        wc = wait(cq)
        check(wc is not None and wc.status == e.IBV_WC_REM_ACCESS_ERR,
              f"an RDMA {name} unmapped on-demand memory completes with REM_ACCESS_ERR", f"status {wc and wc.status}")

    # A UD receive buffer in a plain MR goes away with a receive posted into it.
    ah = AH(pd, attr=AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=0), is_global=1, port_num=1))
    cq, qps = ud_pair()
    addr_d = mmap(length=SIZE, flags=MAP_ANONYMOUS_ | MAP_PRIVATE_)
    mr_d = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE, address=addr_d)
    post_page(qps[1], addr_d, mr_d.lkey)
    wc = send_datagram(cq, qps, mr_a)
    check(datagram_landed(wc, addr_d), "a datagram lands in a plain MR's mmap'ed buffer", f"status {wc and wc.status}")
    post_page(qps[1], addr_d, mr_d.lkey)
    held = hold(addr_d)
    check(held == addr_d, "the unmapped receive buffer's range stays free of other mappings", hex(held))
    wc = send_datagram(cq, qps, mr_a)
    check(wc is not None and wc.status == e.IBV_WC_LOC_PROT_ERR,
          "a datagram for a receive buffer unmapped under a plain MR completes with LOC_PROT_ERR",
          f"status {wc and wc.status}")

    # The device still works: new pairs, new MRs.
    cq, qps = pair()
    addr_c, mr_c = odp_buffer()
    wrote, wc = write_read_roundtrip(cq, qps, mr_a, mr_c)
    check(wrote, "afterwards a new pair and on-demand MR move data again", f"status {wc and wc.status}")
    cq, qps = ud_pair()
    post_page(qps[1], mr_c.buf, mr_c.lkey)
    wc = send_datagram(cq, qps, mr_a)
    check(datagram_landed(wc, mr_c.buf), "afterwards a new UD pair moves a datagram", f"status {wc and wc.status}")
    mr_d.close()
    munmap(addr_d, SIZE)
    mr_b.close()
    munmap(addr_b, SIZE)
    munmap(addr_a, SIZE)  # after the MRs: their memory was the application's
    return finish()


def main(argv):
    if len(argv) == 2 and argv[1] == "--inside":
        return inside()
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--daemon"):
        print(__doc__, file=sys.stderr)
        return 2
    if subprocess.run([PYTHON, "-c", "import pyverbs"], capture_output=True).returncode != 0:
        print("skip: pyverbs is not installed for /usr/bin/python3 (apt-get install python3-pyverbs)")
        return 77
    softrdma = os.path.abspath(argv[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_")}
    with tempfile.TemporaryDirectory(prefix="softrdma-unmapped-") as work:
        daemon = None
        run = [softrdma, "run"]
        if len(argv) == 4:
            sock = os.path.join(work, "softrdmad.sock")
            daemon = subprocess.Popen([argv[3], "--socket", sock], stdout=subprocess.DEVNULL, env=env)
            until = time.monotonic() + 20
            while not os.path.exists(sock) and time.monotonic() < until:
                time.sleep(0.02)
            run.append(f"--daemon={sock}")
        try:
            p = subprocess.run(run + ["--", PYTHON, os.path.abspath(__file__), "--inside"], env=env, timeout=120,
                               capture_output=True, text=True)
        finally:
            if daemon is not None:
                daemon.terminate()
                daemon.wait(10)
    print(p.stdout, end="")
    if p.returncode != 0:
        print(f"FAIL the pyverbs process exits {p.returncode}\n{p.stderr[-3000:]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
