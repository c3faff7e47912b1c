// The verbs objects other than QPs: protection domains, memory regions and windows,
// completion queues, shared receive queues and address handles. Every refusal is checked for
// its exact errno (rdma-core: EINVAL, ENOMEM, EBUSY) and every use for its exact completion.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "tests/core/verbs_test_util.hpp"

using namespace test;
namespace acc = core::access;

namespace {

constexpr std::uint32_t kRemote = acc::remote_write | acc::remote_read | acc::remote_atomic;
constexpr std::uint32_t kAll = acc::local_write | kRemote | acc::mw_bind;

// A BIND_MW work request giving `mw_rkey` the range [addr, addr + length) of `mr_lkey`, with
// `low_byte` as the low byte of its new rkey.
core::SendWr bind_wr(std::uint64_t id, std::uint32_t mw_rkey, std::uint8_t low_byte, std::uint32_t mr_lkey,
                     std::uint64_t addr, std::uint64_t length, std::uint32_t flags) {
  core::SendWr w = make_wr(WrOpcode::bind_mw, id, {});
  w.mw_rkey = mw_rkey;
  w.bind_new_rkey = low_byte;
  w.bind_mr_lkey = mr_lkey;
  w.bind_addr = addr;
  w.bind_length = length;
  w.bind_access = flags;
  return w;
}

// One more connected QP on each side of `p` (it becomes a.qpn and b.qpn; both sides number
// their QPs alike); b's receives from `srq` when non-zero.
std::uint32_t add_qp_pair(Pair& p, std::uint32_t srq = 0) {
  QpOptions o;
  const std::uint32_t qpn = p.a.qpn + 1;
  bring_up(p.a, qpn, p.b.gid(), o.a_psn, o.b_psn, o);
  o.srq = srq;
  bring_up(p.b, qpn, p.a.gid(), o.b_psn, o.a_psn, o);
  REQUIRE(p.a.qpn == qpn);
  REQUIRE(p.b.qpn == qpn);
  return qpn;
}

// A type 2 window of b over b's first 4 KiB for remote writes, bound by a BIND_MW on b's QP;
// returns its rkey.
std::uint32_t bound_type2(Pair& p) {
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 2);
  REQUIRE(mw.ok());
  const auto low = static_cast<std::uint8_t>(*mw + 1);
  post_send(p, p.b, bind_wr(1, *mw, low, p.b.mr.lkey, p.b.addr(), 4096, acc::remote_write));
  REQUIRE(wait_wcs(p, p.b, p.b.send_cq, 1).at(0).status == WcStatus::success);
  return (*mw & ~0xFFu) | low;
}

// Posts the local operation `w` (BIND_MW or LOCAL_INV) on b; it fails with `status` and the
// QP enters ERR.
void expect_local_failure(Pair& p, const core::SendWr& w, WcStatus status) {
  post_send(p, p.b, w);
  const auto wc = wait_wcs(p, p.b, p.b.send_cq, 1).at(0);
  CHECK(wc.status == status);
  CHECK(wc.opcode == (w.opcode == WrOpcode::bind_mw ? WcOpcode::bind_mw : WcOpcode::local_inv));
  CHECK(state_of(p.b) == core::QpState::err);
}

// The status a WRITE of 64 bytes from a to b at `addr` under `rkey` completes with.
WcStatus write_status(Pair& p, std::uint64_t addr, std::uint32_t rkey) {
  return status_of(p, remote_wr(WrOpcode::rdma_write, 99, {p.a.sge(0, 64)}, addr, rkey));
}

}  // namespace

// --- protection domains ----------------------------------------------------------------------

TEST_CASE("PD: alloc and dealloc, unknown handles are EINVAL, a full table is ENOMEM", "[core][verbs][pd]") {
  core::DeviceConfig c;
  c.max_pd = 2;
  Bare b(c);
  const auto p1 = b.dev.alloc_pd(), p2 = b.dev.alloc_pd();
  REQUIRE(p1.ok());
  REQUIRE(p2.ok());
  CHECK(*p1 != *p2);
  const auto p3 = b.dev.alloc_pd();
  CHECK_FALSE(p3.ok());
  CHECK(p3.error() == ENOMEM);

  CHECK(b.dev.dealloc_pd(*p1) == 0);
  CHECK(b.dev.dealloc_pd(*p1) == EINVAL);  // twice
  CHECK(b.dev.dealloc_pd(0) == EINVAL);
  CHECK(b.dev.dealloc_pd(1000) == EINVAL);
  const auto again = b.dev.alloc_pd();  // the freed slot is reused
  REQUIRE(again.ok());
  CHECK(*again == *p1);
}

TEST_CASE("PD: dealloc is EBUSY while an object lives in it", "[core][verbs][pd]") {
  Bare b;
  const std::uint32_t pd = b.pd(), cq = b.cq();
  std::function<int()> release;
  SECTION("an MR") {
    const auto mr = b.dev.reg_mr(pd, b.addr(), 64, b.addr(), acc::local_write);
    REQUIRE(mr.ok());
    release = [&, key = mr->lkey] { return b.dev.dereg_mr(key); };
  }
  SECTION("an MW") {
    const auto mw = b.dev.alloc_mw(pd, 2);
    REQUIRE(mw.ok());
    release = [&, key = *mw] { return b.dev.dealloc_mw(key); };
  }
  SECTION("an SRQ") {
    const auto srq = b.dev.create_srq(pd, 4, 1, 0);
    REQUIRE(srq.ok());
    release = [&, h = *srq] { return b.dev.destroy_srq(h); };
  }
  SECTION("an AH") {
    const auto ah = b.dev.create_ah(pd, core::AddressVector{});
    REQUIRE(ah.ok());
    release = [&, h = *ah] { return b.dev.destroy_ah(h); };
  }
  SECTION("a QP") {
    const auto qp = b.dev.create_qp(b.qp_attr(pd, cq));
    REQUIRE(qp.ok());
    release = [&, qpn = qp->qpn] { return b.dev.destroy_qp(qpn); };
  }
  CHECK(b.dev.dealloc_pd(pd) == EBUSY);
  CHECK(release() == 0);
  CHECK(release() == EINVAL);  // already gone
  CHECK(b.dev.dealloc_pd(pd) == 0);
}

// --- memory regions ----------------------------------------------------------------------------

TEST_CASE("MR: registration checks the PD, the access flags and the range", "[core][verbs][mr]") {
  Bare b;
  const std::uint32_t pd = b.pd();
  const auto reg = [&](std::uint32_t in_pd, std::uint64_t iova, std::uint32_t flags) {
    return b.dev.reg_mr(in_pd, b.addr(), 4096, iova, flags);
  };
  CHECK(reg(pd + 1, b.addr(), acc::local_write).error() == EINVAL);  // no such PD
  // Remote write and remote atomic need local write (C10-43).
  CHECK(reg(pd, b.addr(), acc::remote_write).error() == EINVAL);
  CHECK(reg(pd, b.addr(), acc::remote_atomic | acc::remote_read).error() == EINVAL);
  CHECK(reg(pd, b.addr(), acc::local_write | (1u << 12)).error() == EINVAL);  // a flag we do not know
  CHECK(reg(pd, std::numeric_limits<std::uint64_t>::max() - 100, acc::local_write).error() == EINVAL);  // wraps
  CHECK(reg(pd, b.addr(), acc::remote_read).ok());
  CHECK(reg(pd, b.addr(), acc::local_write | acc::remote_write).ok());
  CHECK(reg(pd, b.addr(), 0).ok());  // local read only
}

TEST_CASE("MR: rereg keeps the keys and changes what it is asked to, a failure changes nothing", "[core][verbs][mr]") {
  Pair p;
  const std::uint32_t rkey = p.b.mr.rkey;
  for (int i = 0; i < 256; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i ^ 0x5a);
  const auto write_to = [&](std::size_t offset) {
    return status_of(p, remote_wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 256)}, p.b.addr(offset), rkey));
  };
  SECTION("a new translation: the old range is gone, the new one answers to the same rkey") {
    const core::MrTranslation moved{p.b.addr(8192), 4096, p.b.addr(8192)};
    REQUIRE(p.b.dev->rereg_mr(p.b.mr.lkey, {.translation = moved}) == 0);
    CHECK(write_to(8192 + 16) == WcStatus::success);
    CHECK(std::memcmp(p.b.buffer.data() + 8192 + 16, p.a.buffer.data(), 256) == 0);
  }
  SECTION("less access: a remote write is refused") {
    REQUIRE(p.b.dev->rereg_mr(p.b.mr.lkey, {.access = acc::local_write}) == 0);
    CHECK(write_to(0) == WcStatus::rem_access_err);
  }
  SECTION("refusals: unknown MR or PD, bad access, windows bound; the MR still works") {
    CHECK(p.b.dev->rereg_mr(p.b.mr.lkey + 0x100, {.access = acc::local_write}) == EINVAL);
    CHECK(p.b.dev->rereg_mr(p.b.mr.lkey, {.pd = 999, .access = acc::local_write}) == EINVAL);
    CHECK(p.b.dev->rereg_mr(p.b.mr.lkey, {.access = acc::remote_write}) == EINVAL);  // C10-43
    // Paging on demand is how the memory is reached, fixed at registration.
    CHECK(p.b.dev->rereg_mr(p.b.mr.lkey, {.access = acc::local_write | acc::on_demand}) == EOPNOTSUPP);
    const auto mw = p.b.dev->alloc_mw(p.b.pd, 1);
    REQUIRE(mw.ok());
    REQUIRE(p.b.dev->bind_mw(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(0), 64, acc::remote_read).ok());
    CHECK(p.b.dev->rereg_mr(p.b.mr.lkey, {.access = acc::local_write}) == EBUSY);
    CHECK(write_to(0) == WcStatus::success);
  }
}

TEST_CASE("MR: dereg of an unknown key, twice, of an MW key, of a stale key", "[core][verbs][mr]") {
  core::DeviceConfig c;
  c.max_mr = 2;  // MRs and MWs share the key table
  Bare b(c);
  const std::uint32_t pd = b.pd();
  const auto mr = b.dev.reg_mr(pd, b.addr(), 4096, b.addr(), acc::local_write);
  const auto mw = b.dev.alloc_mw(pd, 1);
  REQUIRE(mr.ok());
  REQUIRE(mw.ok());
  CHECK(mr->lkey == mr->rkey);
  CHECK(b.dev.reg_mr(pd, b.addr(), 64, b.addr(), 0).error() == ENOMEM);
  CHECK(b.dev.alloc_mw(pd, 2).error() == ENOMEM);

  CHECK(b.dev.dereg_mr(0) == EINVAL);
  CHECK(b.dev.dereg_mr(mr->lkey + 0x100) == EINVAL);
  CHECK(b.dev.dereg_mr(*mw) == EINVAL);  // an MW is not an MR
  CHECK(b.dev.dereg_mr(mr->lkey) == 0);
  CHECK(b.dev.dereg_mr(mr->lkey) == EINVAL);
  // The slot comes back with another key: the old one names nothing.
  const auto next = b.dev.reg_mr(pd, b.addr(), 4096, b.addr(), acc::local_write);
  REQUIRE(next.ok());
  CHECK((next->lkey >> 8) == (mr->lkey >> 8));
  CHECK(next->lkey != mr->lkey);
  CHECK(b.dev.dereg_mr(mr->lkey) == EINVAL);
  CHECK(b.dev.dereg_mr(next->lkey) == 0);
}

TEST_CASE("MR: a zero-based region is addressed from 0", "[core][verbs][mr]") {
  Pair p;
  const auto zb = p.b.dev->reg_mr(p.b.pd, p.b.addr(4096), 4096, p.b.addr(4096), kAll | acc::zero_based);
  REQUIRE(zb.ok());
  for (int i = 0; i < 64; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i + 1);
  CHECK(write_status(p, 200, zb->rkey) == WcStatus::success);
  CHECK(std::memcmp(p.b.buffer.data() + 4096 + 200, p.a.buffer.data(), 64) == 0);
  // Its host address is no address of it: the region spans [0, 4096).
  CHECK(write_status(p, p.b.addr(4096), zb->rkey) == WcStatus::rem_access_err);
}

TEST_CASE("MR: a deregistered lkey fails the WR with LOC_PROT_ERR and the QP enters ERR", "[core][verbs][mr]") {
  Pair p;
  const auto gone = p.a.dev->reg_mr(p.a.pd, p.a.addr(), 4096, p.a.addr(), acc::local_write);
  REQUIRE(gone.ok());
  REQUIRE(p.a.dev->dereg_mr(gone->lkey) == 0);
  const core::Sge bad{p.a.addr(), 64, gone->lkey};
  post_recv(p.b, 1, 0, 64);
  core::SendWr w;
  SECTION("SEND, signaled") { w = make_wr(WrOpcode::send, 1, {bad}); }
  SECTION("SEND, unsignaled: an error completes anyway") { w = make_wr(WrOpcode::send, 1, {bad}, 0); }
  // A READ or atomic gathers nothing; its response finds the local buffer unusable.
  SECTION("READ") { w = remote_wr(WrOpcode::rdma_read, 1, {bad}, p.b.addr(), p.b.mr.rkey); }
  SECTION("atomic") { w = remote_wr(WrOpcode::atomic_fetch_and_add, 1, {bad}, p.b.addr(), p.b.mr.rkey); }
  post_send(p, p.a, w);
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 8)}));
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].wr_id == 1);
  CHECK(wcs[0].status == WcStatus::loc_prot_err);
  CHECK(wcs[1].wr_id == 2);
  CHECK(wcs[1].status == WcStatus::wr_flush_err);
  CHECK(state_of(p.a) == core::QpState::err);
}

TEST_CASE("MR: the responder checks rkey, range, access and PD: REM_ACCESS_ERR", "[core][verbs][mr]") {
  struct Case {
    const char* what;
    WrOpcode op;
    std::uint32_t mr_access;
    std::uint32_t qp_access;
    bool other_pd = false;
    std::size_t offset = 0;
  };
  const Case c = GENERATE(values<Case>({
      {"WRITE to an MR without remote write", WrOpcode::rdma_write, acc::local_write | acc::remote_read, kRemote},
      {"READ of an MR without remote read", WrOpcode::rdma_read, acc::local_write | acc::remote_write, kRemote},
      {"atomic on an MR without remote atomic", WrOpcode::atomic_fetch_and_add,
       acc::local_write | acc::remote_write | acc::remote_read, kRemote},
      {"WRITE to a QP without remote write", WrOpcode::rdma_write, kAll, acc::remote_read | acc::remote_atomic},
      {"READ from a QP without remote read", WrOpcode::rdma_read, kAll, acc::remote_write | acc::remote_atomic},
      {"atomic on a QP without remote atomic", WrOpcode::atomic_fetch_and_add, kAll,
       acc::remote_write | acc::remote_read},
      {"WRITE to an MR of another PD", WrOpcode::rdma_write, kAll, kRemote, true},
      {"WRITE past the MR's end", WrOpcode::rdma_write, kAll, kRemote, false, 4096 - 32},
      {"READ past the MR's end", WrOpcode::rdma_read, kAll, kRemote, false, 4096 - 32},
  }));
  INFO(c.what);
  Pair p;
  const std::uint32_t pd = c.other_pd ? *p.b.dev->alloc_pd() : p.b.pd;
  const auto mr = p.b.dev->reg_mr(pd, p.b.addr(), 4096, p.b.addr(), c.mr_access);
  REQUIRE(mr.ok());
  core::QpAttr attr;
  attr.qp_access_flags = c.qp_access;
  REQUIRE(p.b.dev->modify_qp(0, p.b.qpn, attr, core::qp_attr::access_flags) == 0);

  const auto wc = status_of(p, remote_wr(c.op, 1, {p.a.sge(0, 64)}, p.b.addr(c.offset), mr->rkey));
  CHECK(wc == WcStatus::rem_access_err);
  CHECK(state_of(p.a) == core::QpState::err);
  CHECK(state_of(p.b) == core::QpState::err);
}

TEST_CASE("MR: scatter/gather lists split across packets land byte-exact", "[core][verbs][mr]") {
  Pair p;  // MTU 1024: packet boundaries fall inside SGEs and between them
  for (std::size_t i = 0; i < 16384; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i * 7 + i / 251);
  const std::vector<core::Sge> gather = {p.a.sge(0, 1000), p.a.sge(5000, 1000), p.a.sge(9000, 1000)};
  std::vector<std::uint8_t> message;
  for (const core::Sge& s : gather) {
    const auto* at = reinterpret_cast<const std::uint8_t*>(s.addr);
    message.insert(message.end(), at, at + s.length);
  }
  const auto holds_message = [&](Side& s, std::initializer_list<std::pair<std::size_t, std::size_t>> pieces) {
    std::vector<std::uint8_t> out;
    for (const auto& [offset, length] : pieces)
      out.insert(out.end(), s.buffer.begin() + offset, s.buffer.begin() + offset + length);
    return out == message;  // compared here: Catch would print both vectors in full
  };

  REQUIRE(p.b.dev->post_recv(p.b.qpn, recv_wr(1, {p.b.sge(100, 700), p.b.sge(2000, 1500), p.b.sge(6000, 900)})) == 0);
  CHECK(status_of(p, make_wr(WrOpcode::send, 1, gather)) == WcStatus::success);
  CHECK(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).byte_len == 3000);
  CHECK(holds_message(p.b, {{100, 700}, {2000, 1500}, {6000, 800}}));

  CHECK(status_of(p, remote_wr(WrOpcode::rdma_write, 2, gather, p.b.addr(20000), p.b.mr.rkey)) == WcStatus::success);
  CHECK(holds_message(p.b, {{20000, 3000}}));
  const std::vector<core::Sge> into = {p.a.sge(30000, 1030), p.a.sge(40000, 10), p.a.sge(50000, 1960)};
  CHECK(status_of(p, remote_wr(WrOpcode::rdma_read, 3, into, p.b.addr(20000), p.b.mr.rkey)) == WcStatus::success);
  CHECK(holds_message(p.a, {{30000, 1030}, {40000, 10}, {50000, 1960}}));
}

// --- memory windows ----------------------------------------------------------------------------

TEST_CASE("MW: alloc and dealloc", "[core][verbs][mw]") {
  Bare b;
  const std::uint32_t pd = b.pd();
  CHECK(b.dev.alloc_mw(pd + 1, 1).error() == EINVAL);
  CHECK(b.dev.alloc_mw(pd, 0).error() == EINVAL);
  CHECK(b.dev.alloc_mw(pd, 3).error() == EINVAL);
  const auto mw = b.dev.alloc_mw(pd, 1);
  const auto mr = b.dev.reg_mr(pd, b.addr(), 64, b.addr(), acc::local_write);
  REQUIRE(mw.ok());
  CHECK(b.dev.dealloc_mw(mr->lkey) == EINVAL);     // an MR is not an MW
  CHECK(b.dev.dealloc_mw(*mw + 0x100) == EINVAL);  // another index: no window there
  CHECK(b.dev.dealloc_mw(*mw) == 0);
  CHECK(b.dev.dealloc_mw(*mw) == EINVAL);
}

TEST_CASE("MW type 1: bind_mw gives a new rkey for a range, the old rkey is refused", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 1);
  REQUIRE(mw.ok());
  SECTION("allocated, a window is unbound") { CHECK(write_status(p, p.b.addr(8192), *mw) == WcStatus::rem_access_err); }
  SECTION("bound") {
    const auto rkey =
        p.b.dev->bind_mw(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(8192), 4096, acc::remote_write | acc::remote_read);
    REQUIRE(rkey.ok());
    CHECK(*rkey != *mw);
    CHECK((*rkey >> 8) == (*mw >> 8));  // the same window, another key byte
    for (int i = 0; i < 512; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i * 3);
    CHECK(status_of(p, remote_wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 512)}, p.b.addr(8192 + 100), *rkey)) ==
          WcStatus::success);
    CHECK(std::memcmp(p.b.buffer.data() + 8192 + 100, p.a.buffer.data(), 512) == 0);
    CHECK(status_of(p, remote_wr(WrOpcode::rdma_read, 2, {p.a.sge(4096, 512)}, p.b.addr(8192 + 100), *rkey)) ==
          WcStatus::success);
    CHECK(std::memcmp(p.a.buffer.data() + 4096, p.a.buffer.data(), 512) == 0);
    CHECK(p.b.dev->dereg_mr(p.b.mr.lkey) == EBUSY);                           // a window is bound to it
    CHECK(write_status(p, p.b.addr(8192), *mw) == WcStatus::rem_access_err);  // the key before the bind
  }
}

TEST_CASE("MW type 1: a signaled bind completes on the send CQ, an unsignaled one does not", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 1);
  REQUIRE(mw.ok());
  const auto quiet = p.b.dev->bind_mw(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(0), 4096, acc::remote_read);
  REQUIRE(quiet.ok());
  std::vector<core::Wc> none = p.b.poll(p.b.send_cq);
  CHECK(none.empty());
  const auto signaled = p.b.dev->bind_mw(p.b.qpn, *quiet, p.b.mr.lkey, p.b.addr(0), 4096, acc::remote_read, 77);
  REQUIRE(signaled.ok());
  std::vector<core::Wc> wcs = p.b.poll(p.b.send_cq);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].wr_id == 77);
  CHECK(wcs[0].opcode == WcOpcode::bind_mw);
  CHECK(wcs[0].status == WcStatus::success);
  CHECK(wcs[0].qp_num == p.b.qpn);
}

TEST_CASE("MW type 1: outside the window, or beyond its access, is refused", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 1);
  const auto rkey = p.b.dev->bind_mw(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(8192), 4096, acc::remote_read);
  REQUIRE(rkey.ok());
  SECTION("past its end") {
    CHECK(status_of(p, remote_wr(WrOpcode::rdma_read, 1, {p.a.sge(0, 64)}, p.b.addr(8192 + 4096 - 32), *rkey)) ==
          WcStatus::rem_access_err);
  }
  SECTION("before its start") {
    CHECK(status_of(p, remote_wr(WrOpcode::rdma_read, 1, {p.a.sge(0, 64)}, p.b.addr(8192 - 8), *rkey)) ==
          WcStatus::rem_access_err);
  }
  SECTION("a WRITE through a read-only window") {
    CHECK(write_status(p, p.b.addr(8192), *rkey) == WcStatus::rem_access_err);
  }
}

TEST_CASE("MW type 1: a zero-length bind unbinds", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 1);
  const auto bound = p.b.dev->bind_mw(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(0), 4096, acc::remote_write);
  REQUIRE(bound.ok());
  CHECK(p.b.dev->dereg_mr(p.b.mr.lkey) == EBUSY);
  const auto unbound = p.b.dev->bind_mw(p.b.qpn, *bound, p.b.mr.lkey, p.b.addr(0), 0, acc::remote_write);
  REQUIRE(unbound.ok());
  CHECK(*unbound != *bound);
  const auto mr2 = p.b.dev->reg_mr(p.b.pd, p.b.addr(), 4096, p.b.addr(), kAll);
  REQUIRE(mr2.ok());
  CHECK(p.b.dev->dereg_mr(p.b.mr.lkey) == 0);  // no window holds it any more
  CHECK(write_status(p, p.b.addr(0), *unbound) == WcStatus::rem_access_err);
}

TEST_CASE("MW type 1: bind_mw refusals are EINVAL", "[core][verbs][mw]") {
  Pair p;
  core::Device& d = *p.b.dev;
  const auto mw = d.alloc_mw(p.b.pd, 1);
  const auto mw2 = d.alloc_mw(p.b.pd, 2);
  const std::uint32_t other_pd = *d.alloc_pd();
  const auto mw_other_pd = d.alloc_mw(other_pd, 1);
  const auto mr_other_pd = d.reg_mr(other_pd, p.b.addr(), 4096, p.b.addr(), kAll);
  const auto no_bind = d.reg_mr(p.b.pd, p.b.addr(), 4096, p.b.addr(), acc::local_write | kRemote);
  const auto no_local_write = d.reg_mr(p.b.pd, p.b.addr(), 4096, p.b.addr(), acc::remote_read | acc::mw_bind);
  const std::uint32_t rw = acc::remote_write | acc::remote_read;
  const auto bind = [&](std::uint32_t qpn, std::uint32_t window, std::uint32_t lkey, std::uint64_t addr,
                        std::uint64_t len,
                        std::uint32_t flags) { return d.bind_mw(qpn, window, lkey, addr, len, flags).error(); };
  CHECK(bind(p.b.qpn + 1, *mw, p.b.mr.lkey, p.b.addr(), 64, rw) == EINVAL);             // no such QP
  CHECK(bind(p.b.qpn, *mw + 0x100, p.b.mr.lkey, p.b.addr(), 64, rw) == EINVAL);         // no such MW
  CHECK(bind(p.b.qpn, *mw2, p.b.mr.lkey, p.b.addr(), 64, rw) == EINVAL);                // type 2: a work request
  CHECK(bind(p.b.qpn, *mw_other_pd, mr_other_pd->lkey, p.b.addr(), 64, rw) == EINVAL);  // MW outside the QP's PD
  CHECK(bind(p.b.qpn, *mw, mr_other_pd->lkey, p.b.addr(), 64, rw) == EINVAL);           // MR outside the MW's PD
  CHECK(bind(p.b.qpn, *mw, no_bind->lkey, p.b.addr(), 64, rw) == EINVAL);               // MR without mw_bind
  CHECK(bind(p.b.qpn, *mw, no_local_write->lkey, p.b.addr(), 64, rw) == EINVAL);  // remote write needs local write
  CHECK(bind(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(p.b.buffer.size() - 32), 64, rw) == EINVAL);  // beyond the MR
  CHECK(bind(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr() - 8, 64, rw) == EINVAL);                    // before the MR
  CHECK(bind(p.b.qpn, *mw, no_local_write->lkey, p.b.addr(), 64, acc::remote_read) == 0);  // and now one that is fine
}

TEST_CASE("MW type 2: a BIND_MW work request binds it, WRITE and READ use the new rkey", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 2);
  REQUIRE(mw.ok());
  const std::uint8_t low = static_cast<std::uint8_t>(*mw + 0x35);
  post_send(p, p.b, bind_wr(7, *mw, low, p.b.mr.lkey, p.b.addr(8192), 4096, acc::remote_write | acc::remote_read));
  const auto wc = wait_wcs(p, p.b, p.b.send_cq, 1).at(0);
  CHECK(wc.status == WcStatus::success);
  CHECK(wc.opcode == WcOpcode::bind_mw);
  CHECK(wc.wr_id == 7);
  const std::uint32_t rkey = (*mw & ~0xFFu) | low;

  for (int i = 0; i < 300; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i ^ 0x5A);
  CHECK(status_of(p, remote_wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 300)}, p.b.addr(8192), rkey)) == WcStatus::success);
  CHECK(std::memcmp(p.b.buffer.data() + 8192, p.a.buffer.data(), 300) == 0);
  CHECK(status_of(p, remote_wr(WrOpcode::rdma_read, 2, {p.a.sge(1000, 300)}, p.b.addr(8192), rkey)) ==
        WcStatus::success);
  CHECK(std::memcmp(p.a.buffer.data() + 1000, p.a.buffer.data(), 300) == 0);
  CHECK(write_status(p, p.b.addr(8192), *mw) == WcStatus::rem_access_err);  // the old key
}

TEST_CASE("MW type 2: a failed BIND_MW completes MW_BIND_ERR", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 2);
  const auto no_bind = p.b.dev->reg_mr(p.b.pd, p.b.addr(), 4096, p.b.addr(), acc::local_write | kRemote);
  expect_local_failure(p, bind_wr(7, *mw, 1, no_bind->lkey, p.b.addr(), 4096, acc::remote_read), WcStatus::mw_bind_err);
}

TEST_CASE("MW type 2: a bound window does not bind again until invalidated", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 2);
  const auto key = [&](std::uint8_t low) { return (*mw & ~0xFFu) | low; };
  const auto bind = [&](std::uint64_t id, std::uint32_t current, std::uint8_t low) {
    post_send(p, p.b, bind_wr(id, current, low, p.b.mr.lkey, p.b.addr(), 64, acc::remote_write));
  };
  REQUIRE(key(0xA0) != *mw);
  bind(1, *mw, 0xA0);
  core::SendWr inv = make_wr(WrOpcode::local_inv, 2, {});
  inv.invalidate_rkey = key(0xA0);
  post_send(p, p.b, inv);
  bind(3, key(0xA0), 0xA1);
  bind(4, key(0xA1), 0xA2);
  const auto wcs = wait_wcs(p, p.b, p.b.send_cq, 4);
  CHECK(wcs[0].status == WcStatus::success);
  CHECK(wcs[1].status == WcStatus::success);
  CHECK(wcs[2].status == WcStatus::success);      // free again after LOCAL_INV
  CHECK(wcs[3].status == WcStatus::mw_bind_err);  // bound: not free
}

TEST_CASE("MW type 2: the window serves only the QP it was bound on", "[core][verbs][mw]") {
  Pair p;
  const std::uint32_t rkey = bound_type2(p);
  CHECK(write_status(p, p.b.addr(), rkey) == WcStatus::success);
  add_qp_pair(p);  // a's second QP reaches b's second QP, in the same PD
  CHECK(write_status(p, p.b.addr(), rkey) == WcStatus::rem_access_err);
}

TEST_CASE("LOCAL_INV and SEND_WITH_INV invalidate a type 2 window or an MR", "[core][verbs][mw]") {
  Pair p;
  const std::uint32_t window = bound_type2(p);
  const auto mr2 = p.b.dev->reg_mr(p.b.pd, p.b.addr(65536), 4096, p.b.addr(65536), kAll);
  REQUIRE(mr2.ok());
  std::uint32_t victim = 0;
  std::uint64_t victim_addr = 0;

  SECTION("LOCAL_INV of the window") {
    victim = window;
    victim_addr = p.b.addr();
    core::SendWr inv = make_wr(WrOpcode::local_inv, 5, {});
    inv.invalidate_rkey = window;
    post_send(p, p.b, inv);
    const auto wc = wait_wcs(p, p.b, p.b.send_cq, 1).at(0);
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.opcode == WcOpcode::local_inv);
    CHECK(wc.wr_id == 5);
    CHECK(p.b.dev->dereg_mr(p.b.mr.lkey) == 0);  // the window let go of its MR
  }
  const auto send_with_inv = [&](std::uint32_t rkey, std::uint64_t addr) {
    victim = rkey;
    victim_addr = addr;
    post_recv(p.b, 8, 8192, 256);
    core::SendWr w = make_wr(WrOpcode::send_with_inv, 6, {p.a.sge(0, 100)});
    w.invalidate_rkey = rkey;
    post_send(p, p.a, w);
    const auto wc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.wr_id == 8);
    CHECK(wc.byte_len == 100);
    CHECK(wc.wc_flags == core::wc_flags::with_inv);
    CHECK(wc.imm_data == rkey);  // the invalidated rkey
    CHECK(wait_wcs(p, p.a, p.a.send_cq, 1).at(0).status == WcStatus::success);
  };
  SECTION("SEND_WITH_INV of the window") { send_with_inv(window, p.b.addr()); }
  SECTION("SEND_WITH_INV of an MR") { send_with_inv(mr2->rkey, p.b.addr(65536)); }
  CHECK(write_status(p, victim_addr, victim) == WcStatus::rem_access_err);
}

TEST_CASE("LOCAL_INV of a type 1 window or an unknown key completes LOC_PROT_ERR", "[core][verbs][mw]") {
  Pair p;
  const auto type1 = p.b.dev->alloc_mw(p.b.pd, 1);
  core::SendWr inv = make_wr(WrOpcode::local_inv, 5, {});
  const bool unknown = GENERATE(false, true);
  inv.invalidate_rkey = unknown ? *type1 + 0x100 : *type1;
  expect_local_failure(p, inv, WcStatus::loc_prot_err);
}

TEST_CASE("MW: dealloc of a bound window frees its MR", "[core][verbs][mw]") {
  Pair p;
  const auto mw = p.b.dev->alloc_mw(p.b.pd, 1);
  const auto rkey = p.b.dev->bind_mw(p.b.qpn, *mw, p.b.mr.lkey, p.b.addr(), 4096, acc::remote_read);
  REQUIRE(rkey.ok());
  CHECK(p.b.dev->dereg_mr(p.b.mr.lkey) == EBUSY);
  // The window is named by its index: the key the consumer allocated still names it after
  // binds changed the key byte (a type 2 bind's new key is never reported back).
  CHECK(*mw != *rkey);
  CHECK(p.b.dev->dealloc_mw(*mw) == 0);
  CHECK(p.b.dev->dealloc_mw(*rkey) == EINVAL);
  CHECK(p.b.dev->dereg_mr(p.b.mr.lkey) == 0);
  CHECK(p.b.dev->dealloc_pd(p.b.pd) == EBUSY);  // the QP is still there
}

// --- completion queues -------------------------------------------------------------------------

TEST_CASE("CQ: create, destroy and resize refusals", "[core][verbs][cq]") {
  core::DeviceConfig c;
  c.max_cq = 2;
  c.max_cqe = 64;
  Bare b;
  Bare small(c);
  CHECK(small.dev.create_cq(0).error() == EINVAL);
  CHECK(small.dev.create_cq(65).error() == EINVAL);
  const auto cq = small.dev.create_cq(64);
  REQUIRE(cq.ok());
  REQUIRE(small.dev.create_cq(1).ok());
  CHECK(small.dev.create_cq(1).error() == ENOMEM);

  CHECK(small.dev.resize_cq(*cq, 0) == EINVAL);
  CHECK(small.dev.resize_cq(*cq, 65) == EINVAL);
  CHECK(small.dev.resize_cq(*cq + 5, 8) == EINVAL);
  CHECK(small.dev.resize_cq(*cq, 8) == 0);
  CHECK(small.dev.destroy_cq(*cq + 5) == EINVAL);

  // In use by a QP: EBUSY until the QP is gone.
  const std::uint32_t pd = b.pd(), send_cq = b.cq(), recv_cq = b.cq();
  auto attr = b.qp_attr(pd, send_cq);
  attr.recv_cq = recv_cq;
  const auto qp = b.dev.create_qp(attr);
  REQUIRE(qp.ok());
  CHECK(b.dev.destroy_cq(send_cq) == EBUSY);
  CHECK(b.dev.destroy_cq(recv_cq) == EBUSY);
  CHECK(b.dev.destroy_qp(qp->qpn) == 0);
  CHECK(b.dev.destroy_cq(send_cq) == 0);
  CHECK(b.dev.destroy_cq(recv_cq) == 0);
  CHECK(b.dev.destroy_cq(recv_cq) == EINVAL);

  core::Wc wc;
  CHECK(b.dev.poll_cq(send_cq, {&wc, 1}) == -EINVAL);
  CHECK(b.dev.req_notify_cq(send_cq, false) == EINVAL);
}

TEST_CASE("CQ: take_completed_cqs names each CQ that got completions once, then only new ones", "[core][verbs][cq]") {
  Bare b;
  const std::uint32_t pd = b.pd(), quiet = b.cq();
  const auto cq1 = b.dev.create_cq(16), cq2 = b.dev.create_cq(16);
  const auto qp1 = b.dev.create_qp(b.qp_attr(pd, *cq1)), qp2 = b.dev.create_qp(b.qp_attr(pd, *cq2));
  REQUIRE((qp1.ok() && qp2.ok()));
  b.to_error(qp1->qpn);  // receives posted now complete at once, flushed
  b.to_error(qp2->qpn);
  std::vector<std::uint32_t> got{99};
  b.dev.take_completed_cqs(got);
  CHECK(got.empty());
  for (std::uint64_t id = 0; id < 3; ++id) REQUIRE(b.dev.post_recv(qp1->qpn, recv_wr(id, {})) == 0);
  REQUIRE(b.dev.post_recv(qp2->qpn, recv_wr(7, {})) == 0);
  b.dev.take_completed_cqs(got);
  CHECK(got == std::vector<std::uint32_t>{*cq1, *cq2});  // once each, in the order they filled
  b.dev.take_completed_cqs(got);
  CHECK(got.empty());  // nothing new, though cq1 still holds three
  REQUIRE(b.dev.post_recv(qp2->qpn, recv_wr(8, {})) == 0);
  b.dev.take_completed_cqs(got);
  CHECK(got == std::vector<std::uint32_t>{*cq2});
  CHECK(std::find(got.begin(), got.end(), quiet) == got.end());
  // A CQ destroyed while listed is still named once: the caller looks the handle up.
  REQUIRE(b.dev.post_recv(qp2->qpn, recv_wr(9, {})) == 0);
  REQUIRE(b.dev.destroy_qp(qp2->qpn) == 0);
  REQUIRE(b.dev.destroy_cq(*cq2) == 0);
  b.dev.take_completed_cqs(got);
  CHECK(got == std::vector<std::uint32_t>{*cq2});
  b.dev.take_completed_cqs(got);
  CHECK(got.empty());
}

TEST_CASE("room: how many WRs each queue still takes, down to ENOMEM", "[core][verbs][qp]") {
  using Q = core::Device::WorkQueue;
  Bare b;
  const std::uint32_t pd = b.pd(), cq = b.cq();
  auto attr = b.qp_attr(pd, cq);
  attr.cap.max_recv_wr = 3;
  const auto qp = b.dev.create_qp(attr);
  REQUIRE(qp.ok());
  CHECK(b.dev.room(Q::send, qp->qpn) == qp->cap.max_send_wr);
  CHECK(b.dev.room(Q::recv, qp->qpn) == 3u);
  CHECK(b.dev.room(Q::send, qp->qpn + 100) == std::nullopt);
  CHECK(b.dev.room(Q::srq, 77) == std::nullopt);
  REQUIRE(b.dev.modify_qp(
              0, qp->qpn,
              [] {
                core::QpAttr a;
                a.qp_state = core::QpState::init;
                return a;
              }(),
              core::qp_attr::state | core::qp_attr::pkey_index | core::qp_attr::port | core::qp_attr::access_flags) ==
          0);
  for (std::uint64_t id = 0; id < 3; ++id) {
    CHECK(b.dev.room(Q::recv, qp->qpn) == 3u - id);
    REQUIRE(b.dev.post_recv(qp->qpn, recv_wr(id, {})) == 0);
  }
  CHECK(b.dev.room(Q::recv, qp->qpn) == 0u);
  CHECK(b.dev.post_recv(qp->qpn, recv_wr(9, {})) == ENOMEM);

  const auto srq = b.dev.create_srq(pd, 2, 1, 0);
  REQUIRE(srq.ok());
  CHECK(b.dev.room(Q::srq, *srq) == 2u);
  REQUIRE(b.dev.post_srq_recv(*srq, recv_wr(1, {})) == 0);
  CHECK(b.dev.room(Q::srq, *srq) == 1u);
  auto on_srq = b.qp_attr(pd, cq);
  on_srq.srq = *srq;
  const auto qp2 = b.dev.create_qp(on_srq);
  REQUIRE(qp2.ok());
  CHECK(b.dev.room(Q::recv, qp2->qpn) == std::nullopt);  // its receives go to the SRQ
}

TEST_CASE("CQ: resize below its contents is EINVAL, an overflow is one cq_err and lost completions",
          "[core][verbs][cq]") {
  Bare b;
  const std::uint32_t pd = b.pd();
  const auto cq = b.dev.create_cq(4);
  const auto qp = b.dev.create_qp(b.qp_attr(pd, *cq));
  REQUIRE(qp.ok());
  b.to_error(qp->qpn);  // every receive posted now completes at once, flushed
  const auto flush_recvs = [&](std::uint64_t first, int n) {
    for (int i = 0; i < n; ++i) REQUIRE(b.dev.post_recv(qp->qpn, recv_wr(first + i, {})) == 0);
  };
  flush_recvs(0, 3);
  CHECK(b.dev.resize_cq(*cq, 2) == EINVAL);
  CHECK(b.dev.resize_cq(*cq, 3) == 0);
  CHECK(async_events(b.dev).empty());

  flush_recvs(3, 3);  // all three are lost
  const auto events = async_events(b.dev);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == core::AsyncEventType::cq_err);
  CHECK(events[0].element == *cq);
  std::vector<core::Wc> wcs(8);
  REQUIRE(b.dev.poll_cq(*cq, wcs) == 3);
  for (std::uint64_t i = 0; i < 3; ++i) {
    CHECK(wcs[i].wr_id == i);
    CHECK(wcs[i].status == WcStatus::wr_flush_err);
    CHECK(wcs[i].opcode == WcOpcode::recv);
    CHECK(wcs[i].qp_num == qp->qpn);
  }
  CHECK(b.dev.poll_cq(*cq, wcs) == 0);
}

TEST_CASE("CQ: req_notify_cq raises one event for the next completion", "[core][verbs][cq]") {
  Bare b;
  const std::uint32_t pd = b.pd(), cq = b.cq();
  const auto qp = b.dev.create_qp(b.qp_attr(pd, cq));
  b.to_error(qp->qpn);
  const auto flush_one = [&] { REQUIRE(b.dev.post_recv(qp->qpn, recv_wr(1, {})) == 0); };

  flush_one();
  CHECK_FALSE(b.dev.next_cq_event());  // not armed
  CHECK(b.dev.req_notify_cq(cq, false) == 0);
  CHECK_FALSE(b.dev.next_cq_event());
  flush_one();
  CHECK(b.dev.next_cq_event() == cq);
  CHECK_FALSE(b.dev.next_cq_event());
  flush_one();
  CHECK_FALSE(b.dev.next_cq_event());  // one event per arming
  // Solicited-only still reports errors (s11.4.2.2); a flush is one.
  CHECK(b.dev.req_notify_cq(cq, true) == 0);
  flush_one();
  CHECK(b.dev.next_cq_event() == cq);
}

TEST_CASE("CQ: solicited-only notification ignores unsolicited completions", "[core][verbs][cq]") {
  Pair p;
  for (int i = 0; i < 3; ++i) post_recv(p.b, i, 1024 * i, 1024);
  const auto deliver = [&](std::uint32_t flags) {
    post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 16)}, core::send_flags::signaled | flags));
    REQUIRE(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).status == WcStatus::success);
  };
  REQUIRE(p.b.dev->req_notify_cq(p.b.recv_cq, true) == 0);
  deliver(0);
  CHECK_FALSE(p.b.dev->next_cq_event());
  deliver(core::send_flags::solicited);
  CHECK(p.b.dev->next_cq_event() == p.b.recv_cq);
  // Asking for every completion widens a solicited-only request.
  REQUIRE(p.b.dev->req_notify_cq(p.b.recv_cq, true) == 0);
  REQUIRE(p.b.dev->req_notify_cq(p.b.recv_cq, false) == 0);
  deliver(0);
  CHECK(p.b.dev->next_cq_event() == p.b.recv_cq);
}

// --- shared receive queues ---------------------------------------------------------------------

TEST_CASE("SRQ: create, modify, query and destroy check their bounds", "[core][verbs][srq]") {
  core::DeviceConfig c;
  c.max_srq = 1;
  Bare b(c);
  const std::uint32_t pd = b.pd();
  const std::uint32_t max_wr = c.limits.max_qp_wr, max_sge = c.limits.max_sge;
  CHECK(b.dev.create_srq(pd + 1, 4, 1, 0).error() == EINVAL);
  CHECK(b.dev.create_srq(pd, 0, 1, 0).error() == EINVAL);
  CHECK(b.dev.create_srq(pd, max_wr + 1, 1, 0).error() == EINVAL);
  CHECK(b.dev.create_srq(pd, 4, 0, 0).error() == EINVAL);
  CHECK(b.dev.create_srq(pd, 4, max_sge + 1, 0).error() == EINVAL);
  CHECK(b.dev.create_srq(pd, 4, 1, 5).error() == EINVAL);  // limit above max_wr
  const auto srq = b.dev.create_srq(pd, 4, 2, 1);
  REQUIRE(srq.ok());
  CHECK(b.dev.create_srq(pd, 4, 1, 0).error() == ENOMEM);

  std::uint32_t wr = 0, sge = 0, limit = 0;
  REQUIRE(b.dev.query_srq(*srq, wr, sge, limit) == 0);
  CHECK(wr == 4);
  CHECK(sge == 2);
  CHECK(limit == 1);
  CHECK(b.dev.query_srq(*srq + 1, wr, sge, limit) == EINVAL);

  // Three queued: max_wr may not drop below them.
  const core::Sge s{b.addr(), 16, 0};
  for (int i = 0; i < 3; ++i) REQUIRE(b.dev.post_srq_recv(*srq, recv_wr(i, {s})) == 0);
  CHECK(b.dev.post_srq_recv(*srq, recv_wr(9, {s, s, s})) == EINVAL);  // max_sge 2
  CHECK(b.dev.post_srq_recv(*srq + 1, recv_wr(9, {s})) == EINVAL);
  CHECK(b.dev.modify_srq(*srq, 2, 0, true, false) == EINVAL);
  CHECK(b.dev.modify_srq(*srq, 0, 0, true, false) == EINVAL);
  CHECK(b.dev.modify_srq(*srq, max_wr + 1, 0, true, false) == EINVAL);
  CHECK(b.dev.modify_srq(*srq, 0, 5, false, true) == EINVAL);  // limit above max_wr
  CHECK(b.dev.modify_srq(*srq + 1, 8, 0, true, false) == EINVAL);
  REQUIRE(b.dev.modify_srq(*srq, 8, 6, true, true) == 0);
  REQUIRE(b.dev.query_srq(*srq, wr, sge, limit) == 0);
  CHECK(wr == 8);
  CHECK(limit == 6);
  for (int i = 3; i < 8; ++i) REQUIRE(b.dev.post_srq_recv(*srq, recv_wr(i, {s})) == 0);
  CHECK(b.dev.post_srq_recv(*srq, recv_wr(9, {s})) == ENOMEM);

  // In use by a QP: EBUSY; and the QP takes no receives of its own.
  const std::uint32_t cq = b.cq();
  auto attr = b.qp_attr(pd, cq);
  attr.srq = *srq + 1;
  CHECK(b.dev.create_qp(attr).error() == EINVAL);  // no such SRQ
  attr.srq = *srq;
  const auto qp = b.dev.create_qp(attr);
  REQUIRE(qp.ok());
  CHECK(qp->cap.max_recv_wr == 0);
  b.to_error(qp->qpn);
  CHECK(b.dev.post_recv(qp->qpn, recv_wr(1, {})) == EINVAL);
  CHECK(b.dev.destroy_srq(*srq) == EBUSY);
  CHECK(b.dev.destroy_qp(qp->qpn) == 0);
  CHECK(b.dev.destroy_srq(*srq) == 0);
  CHECK(b.dev.destroy_srq(*srq) == EINVAL);
  CHECK(b.dev.dealloc_pd(pd) == 0);
}

TEST_CASE("SRQ: several RC QPs receive from one SRQ (ibv_srq_pingpong)", "[core][verbs][srq]") {
  Pair p;
  const auto srq = p.b.dev->create_srq(p.b.pd, 16, 1, 0);
  REQUIRE(srq.ok());
  std::vector<std::uint32_t> qpns;
  for (int i = 0; i < 4; ++i) qpns.push_back(add_qp_pair(p, *srq));
  for (std::uint64_t k = 0; k < 8; ++k) REQUIRE(p.b.dev->post_srq_recv(*srq, recv_wr(k, {p.b.sge(256 * k, 256)})) == 0);
  // Message m (1..8) is m repeated 40 + 10 m times, sent by a's QP (m - 1) / 2.
  for (std::uint32_t m = 1; m <= 8; ++m) {
    std::memset(p.a.buffer.data() + 256 * m, static_cast<int>(m), 256);
    REQUIRE(p.a.dev->post_send(p.net.now, qpns[(m - 1) / 2],
                               make_wr(WrOpcode::send, m, {p.a.sge(256 * m, 40 + 10 * m)})) == 0);
  }
  const auto wcs = wait_wcs(p, p.b, p.b.recv_cq, 8);
  std::set<std::uint32_t> seen;
  for (const core::Wc& wc : wcs) {
    const std::uint32_t m = p.b.buffer[256 * wc.wr_id];
    INFO("receive " << wc.wr_id << " holds message " << m);
    CHECK(wc.status == WcStatus::success);
    REQUIRE((m >= 1 && m <= 8));
    CHECK(wc.byte_len == 40 + 10 * m);
    CHECK(wc.qp_num == qpns[(m - 1) / 2]);
    CHECK(std::all_of(p.b.buffer.begin() + 256 * wc.wr_id, p.b.buffer.begin() + 256 * wc.wr_id + wc.byte_len,
                      [&](std::uint8_t v) { return v == m; }));
    seen.insert(m);
  }
  CHECK(seen.size() == 8);
  CHECK(p.b.dev->destroy_srq(*srq) == EBUSY);
}

TEST_CASE("SRQ: the limit event fires once when the queue drops below the armed limit", "[core][verbs][srq]") {
  Pair p;
  const auto srq = p.b.dev->create_srq(p.b.pd, 8, 1, 0);
  const std::uint32_t qpn = add_qp_pair(p, *srq);
  for (std::uint64_t k = 0; k < 5; ++k) REQUIRE(p.b.dev->post_srq_recv(*srq, recv_wr(k, {p.b.sge(64 * k, 64)})) == 0);
  REQUIRE(p.b.dev->modify_srq(*srq, 0, 3, false, true) == 0);
  const auto consume_one = [&] {
    REQUIRE(p.a.dev->post_send(p.net.now, qpn, make_wr(WrOpcode::send, 1, {p.a.sge(0, 8)})) == 0);
    REQUIRE(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).status == WcStatus::success);
  };
  consume_one();  // 4 left
  consume_one();  // 3 left: not below 3
  CHECK(async_events(*p.b.dev).empty());
  consume_one();  // 2 left
  const auto events = async_events(*p.b.dev);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == core::AsyncEventType::srq_limit_reached);
  CHECK(events[0].element == *srq);
  std::uint32_t wr = 0, sge = 0, limit = 99;
  REQUIRE(p.b.dev->query_srq(*srq, wr, sge, limit) == 0);
  CHECK(limit == 0);  // disarmed
  consume_one();
  CHECK(async_events(*p.b.dev).empty());
}

TEST_CASE("SRQ: a QP on an SRQ reports its last WQE once when it enters ERR", "[core][verbs][srq]") {
  Pair p;
  const auto srq = p.b.dev->create_srq(p.b.pd, 8, 1, 0);
  const std::uint32_t qpn = add_qp_pair(p, *srq);
  REQUIRE(p.b.dev->post_srq_recv(*srq, recv_wr(1, {p.b.sge(0, 64)})) == 0);
  core::QpAttr attr;
  attr.qp_state = core::QpState::err;
  REQUIRE(p.b.dev->modify_qp(p.net.now, qpn, attr, core::qp_attr::state) == 0);
  const auto events = async_events(*p.b.dev);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == core::AsyncEventType::qp_last_wqe_reached);
  CHECK(events[0].element == qpn);
  // The SRQ's own WQEs are not the QP's to flush; sends posted later flush without a second event.
  CHECK(p.b.poll(p.b.recv_cq).empty());
  post_send(p, p.b, make_wr(WrOpcode::send, 2, {}));
  CHECK(p.b.poll(p.b.send_cq).at(0).status == WcStatus::wr_flush_err);
  CHECK(async_events(*p.b.dev).empty());
}

// --- address handles ---------------------------------------------------------------------------

TEST_CASE("AH: create checks the PD, the GID index and the port, destroy", "[core][verbs][ah]") {
  core::DeviceConfig c;
  c.max_ah = 1;
  Bare b(c);
  const std::uint32_t pd = b.pd();
  core::AddressVector av;
  av.dgid = ipv4_gid(2);
  CHECK(b.dev.create_ah(pd + 1, av).error() == EINVAL);
  av.sgid_index = 1;  // the table holds one GID
  CHECK(b.dev.create_ah(pd, av).error() == EINVAL);
  av.sgid_index = 0;
  av.port_num = 2;
  CHECK(b.dev.create_ah(pd, av).error() == EINVAL);
  av.port_num = 1;
  const auto ah = b.dev.create_ah(pd, av);
  REQUIRE(ah.ok());
  CHECK(b.dev.create_ah(pd, av).error() == ENOMEM);
  CHECK(b.dev.destroy_ah(*ah + 1) == EINVAL);
  CHECK(b.dev.destroy_ah(*ah) == 0);
  CHECK(b.dev.destroy_ah(*ah) == EINVAL);
  CHECK(b.dev.create_ah(pd, av).ok());
}
