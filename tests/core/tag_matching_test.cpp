// Tag matching in the engine (rdma-core's Documentation/tag_matching.md): a SEND's TMH routes
// it to a tagged buffer (eager), to a READ of the sender's data (rendezvous) or whole to an
// ordinary SRQ WQE (unexpected, no tag); the unexpected count gates matching; the list
// operations and their completions.
#include "emulator/core/tag_matching.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tests/core/verbs_test_util.hpp"

namespace {

using namespace test;
namespace wcf = core::wc_flags;
using core::SrqOp;
using core::SrqOpcode;
using core::TmhOp;

constexpr std::size_t kBytes = 1 << 16;

// a: a plain RC QP; b: an RC QP on a tag-matching SRQ completing into b's tm_cq.
struct TmPair {
  explicit TmPair(QpOptions o = {}) : a(ipv4_gid(1), kBytes), b(ipv4_gid(2), kBytes), net(*a.dev, *b.dev, 1) {
    tm_cq = *b.dev->create_cq(256);
    srq = *b.dev->create_srq(b.pd, 16, 4, 0, std::nullopt, core::Device::TmSrq{tm_cq, 4, 8});
    const std::uint32_t first = a.dev->config().first_qpn;
    bring_up(a, first, b.gid(), o.a_psn, o.b_psn, o);
    o.srq = srq;
    bring_up(b, first, a.gid(), o.b_psn, o.a_psn, o);
  }

  std::vector<core::Wc> wait(Side& s, std::uint32_t cq, std::size_t n) {
    std::vector<core::Wc> got;
    const bool done = net.run_until([&] {
      for (const auto& wc : s.poll(cq)) got.push_back(wc);
      return got.size() >= n;
    });
    INFO("completions: " << got.size() << " of " << n);
    REQUIRE(done);
    return got;
  }
  void settle() {
    net.run_until([] { return false; }, 100'000);
  }

  // Adds a tagged buffer of b's memory at `offset`; returns its handle.
  std::uint32_t add(std::uint64_t recv_wr_id, std::uint64_t tag, std::size_t offset, std::uint32_t length,
                    std::uint32_t unexpected_cnt = 0) {
    SrqOp op;
    op.wr_id = 1000 + recv_wr_id;
    op.opcode = SrqOpcode::tag_add;
    op.flags = core::srq_op_flags::signaled;
    op.unexpected_cnt = unexpected_cnt;
    op.recv_wr_id = recv_wr_id;
    op.sg_list = {b.sge(offset, length)};
    op.tag = tag;
    op.mask = ~std::uint64_t{0};
    REQUIRE(b.dev->post_srq_ops(srq, op) == 0);
    const auto wc = wait(b, tm_cq, 1).at(0);
    CHECK(wc.opcode == WcOpcode::tm_add);
    CHECK(wc.wr_id == op.wr_id);
    return op.handle;
  }

  core::Wc op(SrqOpcode opcode, std::uint32_t handle, std::uint32_t unexpected_cnt, std::uint32_t flags) {
    SrqOp op;
    op.wr_id = 77;
    op.opcode = opcode;
    op.handle = handle;
    op.unexpected_cnt = unexpected_cnt;
    op.flags = core::srq_op_flags::signaled | flags;
    REQUIRE(b.dev->post_srq_ops(srq, op) == 0);
    return wait(b, tm_cq, 1).at(0);
  }

  // Sends a's bytes [0, length) after writing a TMH (and `extra`) at their start.
  void send(TmhOp op, std::uint64_t tag, std::uint32_t length, const std::vector<std::uint8_t>& extra = {}) {
    std::uint8_t* m = a.buffer.data();
    std::memset(m, 0, core::kTmhLength);
    m[0] = static_cast<std::uint8_t>(op);
    m[4] = 0xAB, m[7] = 0xCD;  // app_ctx 0xAB0000CD
    for (int i = 0; i < 8; ++i) m[8 + i] = static_cast<std::uint8_t>(tag >> (56 - 8 * i));
    std::copy(extra.begin(), extra.end(), m + core::kTmhLength);
    REQUIRE(a.dev->post_send(net.now, a.qpn, make_wr(WrOpcode::send, 9, {a.sge(0, length)})) == 0);
  }

  void fill_payload(std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) a.buffer[i] = static_cast<std::uint8_t>(i * 7);
  }

  Side a, b;
  SimNetwork net;
  std::uint32_t tm_cq = 0, srq = 0;
};

std::vector<std::uint8_t> be_bytes(std::uint64_t value, int n) {
  std::vector<std::uint8_t> out;
  for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  return out;
}

// An RVH naming a's bytes [offset, offset + length).
std::vector<std::uint8_t> rvh(const Side& a, std::size_t offset, std::uint32_t length) {
  auto out = be_bytes(a.addr(offset), 8);
  for (auto part : {be_bytes(a.mr.rkey, 4), be_bytes(length, 4)}) out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST_CASE("an eager message matching a tag lands in its buffer without the TMH, in one completion", "[core][tm]") {
  TmPair p;
  p.add(5, 0x1234, 1024, 512);
  p.fill_payload(core::kTmhLength, 200);
  p.send(TmhOp::eager, 0x1234, 200);
  const auto wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.status == WcStatus::success);
  CHECK(wc.opcode == WcOpcode::tm_recv);
  CHECK(wc.wr_id == 5);
  CHECK(wc.wc_flags == (wcf::tm_match | wcf::tm_data_valid));
  CHECK(wc.tm_tag == 0x1234);
  CHECK(wc.tm_priv == 0xAB0000CD);
  CHECK(wc.byte_len == 200 - core::kTmhLength);
  CHECK(std::memcmp(p.b.buffer.data() + 1024, p.a.buffer.data() + core::kTmhLength, 200 - core::kTmhLength) == 0);
  CHECK(p.b.poll(p.b.recv_cq).empty());  // a TM-SRQ's receives complete on its own CQ
  CHECK(p.wait(p.a, p.a.send_cq, 1).at(0).status == WcStatus::success);
}

TEST_CASE("a matched eager message of several packets reports the match first and its data at its end", "[core][tm]") {
  QpOptions o;
  o.mtu = core::Mtu::mtu256;
  TmPair p(o);
  p.add(6, 42, 4096, 2048);
  p.fill_payload(core::kTmhLength, 1000);
  p.send(TmhOp::eager, 42, 1000);
  const auto wcs = p.wait(p.b, p.tm_cq, 2);
  CHECK(wcs[0].wc_flags == wcf::tm_match);
  CHECK(wcs[0].tm_tag == 42);
  CHECK(wcs[1].wc_flags == wcf::tm_data_valid);
  CHECK(wcs[1].tm_tag == 0);  // the tag goes with the match only
  for (const auto& wc : wcs) CHECK(wc.wr_id == 6);
  CHECK(wcs[1].byte_len == 1000 - core::kTmhLength);
  CHECK(std::memcmp(p.b.buffer.data() + 4096, p.a.buffer.data() + core::kTmhLength, 1000 - core::kTmhLength) == 0);
}

TEST_CASE("an unexpected message goes whole to an ordinary WQE and stops matching until software syncs", "[core][tm]") {
  TmPair p;
  REQUIRE(p.b.dev->post_srq_recv(p.srq, recv_wr(70, {p.b.sge(0, 512)})) == 0);
  REQUIRE(p.b.dev->post_srq_recv(p.srq, recv_wr(71, {p.b.sge(512, 512)})) == 0);
  p.add(5, 7, 2048, 512);
  p.send(TmhOp::eager, 8, 64);  // no tag 8 is listed
  auto wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.opcode == WcOpcode::tm_recv);
  CHECK(wc.wr_id == 70);
  CHECK(wc.wc_flags == 0);
  CHECK(wc.byte_len == 64);
  CHECK(std::memcmp(p.b.buffer.data(), p.a.buffer.data(), 64) == 0);  // TMH included

  // Tag 7 is listed, but software has not said it saw the unexpected message.
  p.send(TmhOp::eager, 7, 64);
  wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.wr_id == 71);
  CHECK(wc.wc_flags == 0);
  // An operation posted with a stale count asks for a sync; a sync with the right one resumes.
  CHECK(p.op(SrqOpcode::tag_sync, 0, 0, 0).wc_flags == wcf::tm_sync_req);
  wc = p.op(SrqOpcode::tag_sync, 0, 2, core::srq_op_flags::tm_sync);
  CHECK(wc.opcode == WcOpcode::tm_sync);
  CHECK(wc.wc_flags == 0);
  p.send(TmhOp::eager, 7, 64);
  wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.wr_id == 5);
  CHECK(wc.wc_flags == (wcf::tm_match | wcf::tm_data_valid));
}

TEST_CASE("a message without a tag completes as TM_NO_TAG, whole, and leaves matching on", "[core][tm]") {
  TmPair p;
  REQUIRE(p.b.dev->post_srq_recv(p.srq, recv_wr(70, {p.b.sge(0, 512)})) == 0);
  p.add(5, 3, 2048, 512);
  p.send(TmhOp::no_tag, 3, 40);
  auto wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.opcode == WcOpcode::tm_no_tag);
  CHECK(wc.wr_id == 70);
  CHECK(wc.byte_len == 40);
  p.send(TmhOp::eager, 3, 40);
  wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.wr_id == 5);
  CHECK(wc.wc_flags == (wcf::tm_match | wcf::tm_data_valid));
}

TEST_CASE("a matched rendezvous request READs the sender's data into the buffer, then sends a FIN back", "[core][tm]") {
  TmPair p;
  p.fill_payload(8192, 8192 + 3000);
  post_recv(p.a, 80, 16384, 64);  // for the FIN
  p.add(5, 99, 20000, 4096);
  p.send(TmhOp::rendezvous, 99, 40, rvh(p.a, 8192, 3000));
  const auto wcs = p.wait(p.b, p.tm_cq, 2);
  CHECK(wcs[0].wc_flags == wcf::tm_match);
  CHECK(wcs[1].wc_flags == wcf::tm_data_valid);
  CHECK(wcs[1].byte_len == 3000);
  CHECK(wcs[0].tm_tag == 99);
  CHECK(wcs[1].tm_tag == 0);
  for (const auto& wc : wcs) {
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.wr_id == 5);
  }
  CHECK(std::memcmp(p.b.buffer.data() + 20000, p.a.buffer.data() + 8192, 3000) == 0);
  const auto fin = p.wait(p.a, p.a.recv_cq, 1).at(0);
  CHECK(fin.wr_id == 80);
  CHECK(fin.byte_len == core::kTmhLength + core::kRvhLength);
  CHECK(p.a.buffer[16384] == static_cast<std::uint8_t>(TmhOp::fin));
  CHECK(std::memcmp(p.a.buffer.data() + 16385, p.a.buffer.data() + 1, 31) == 0);  // the request's headers
  p.settle();
  CHECK(p.b.poll(p.b.send_cq).empty());  // the device's own READ and FIN complete nowhere
}

TEST_CASE("a rendezvous larger than its tagged buffer leaves the request there as RNDV_INCOMPLETE", "[core][tm]") {
  TmPair p;
  p.add(5, 99, 20000, 256);
  p.send(TmhOp::rendezvous, 99, 40, rvh(p.a, 8192, 3000));
  const auto wc = p.wait(p.b, p.tm_cq, 1).at(0);
  CHECK(wc.status == WcStatus::tm_rndv_incomplete);
  CHECK(wc.wc_flags == wcf::tm_match);
  CHECK(wc.byte_len == 40);
  CHECK(std::memcmp(p.b.buffer.data() + 20000, p.a.buffer.data(), 40) == 0);
  p.settle();
  CHECK(p.b.poll(p.tm_cq).empty());
}

TEST_CASE("a rendezvous whose READ is refused completes its buffer with the error and the QP fails", "[core][tm]") {
  TmPair p;
  p.add(5, 99, 20000, 4096);
  auto header = rvh(p.a, 8192, 3000);
  header[11] ^= 0x55;  // a wrong rkey
  p.send(TmhOp::rendezvous, 99, 40, header);
  const auto wcs = p.wait(p.b, p.tm_cq, 2);
  CHECK(wcs[0].wc_flags == wcf::tm_match);
  CHECK(wcs[1].wr_id == 5);
  CHECK(wcs[1].status == WcStatus::rem_access_err);
  CHECK(state_of(p.b) == core::QpState::err);
  CHECK(p.b.poll(p.b.send_cq).empty());
}

TEST_CASE("an unexpected message with no ordinary WQE waits for one (RNR), a matching one does not", "[core][tm]") {
  TmPair p;
  p.add(5, 7, 2048, 512);
  p.send(TmhOp::eager, 7, 64);
  CHECK(p.wait(p.b, p.tm_cq, 1).at(0).wr_id == 5);
  p.send(TmhOp::eager, 8, 64);
  p.settle();
  CHECK(p.b.poll(p.tm_cq).empty());
  REQUIRE(p.b.dev->post_srq_recv(p.srq, recv_wr(70, {p.b.sge(0, 512)})) == 0);
  CHECK(p.wait(p.b, p.tm_cq, 1).at(0).wr_id == 70);
}

TEST_CASE("tag list operations: delete, delete of a consumed tag, a full list, the wrong SRQ", "[core][tm]") {
  TmPair p;
  const std::uint32_t h = p.add(5, 7, 2048, 512);
  auto wc = p.op(SrqOpcode::tag_del, h, 0, 0);
  CHECK(wc.opcode == WcOpcode::tm_del);
  CHECK(wc.status == WcStatus::success);
  CHECK(p.op(SrqOpcode::tag_del, h, 0, 0).status == WcStatus::tm_err);

  const std::uint32_t consumed = p.add(6, 9, 2048, 512);
  p.send(TmhOp::eager, 9, 64);
  CHECK(p.wait(p.b, p.tm_cq, 1).at(0).wr_id == 6);
  CHECK(p.op(SrqOpcode::tag_del, consumed, 0, 0).status == WcStatus::tm_err);  // ibv_post_srq_ops(3)

  for (std::uint64_t i = 0; i < 4; ++i) p.add(10 + i, 100 + i, 4096 + 512 * i, 512);
  SrqOp more;
  more.sg_list = {p.b.sge(0, 8)};
  CHECK(p.b.dev->post_srq_ops(p.srq, more) == ENOMEM);
  more.opcode = SrqOpcode::tag_del;
  more.handle = 4;  // max_num_tags is 4
  CHECK(p.b.dev->post_srq_ops(p.srq, more) == EINVAL);
  const std::uint32_t basic = *p.b.dev->create_srq(p.b.pd, 4, 1, 0);
  more.opcode = SrqOpcode::tag_sync;
  CHECK(p.b.dev->post_srq_ops(basic, more) == EINVAL);
}

TEST_CASE("tag-matching SRQs: limits, RC QPs only, none on iWARP", "[core][tm]") {
  Bare roce;
  const std::uint32_t pd = *roce.dev.alloc_pd();
  const std::uint32_t cq = *roce.dev.create_cq(16);
  const core::TmCaps caps = roce.dev.tm_caps();
  CHECK(caps.max_num_tags > 0);
  CHECK(roce.dev.create_srq(pd, 4, 1, 0, std::nullopt, core::Device::TmSrq{cq, caps.max_num_tags + 1, 1}).error() ==
        EINVAL);
  CHECK(roce.dev.create_srq(pd, 4, 1, 0, std::nullopt, core::Device::TmSrq{cq, 0, 1}).error() == EINVAL);
  CHECK(roce.dev.create_srq(pd, 4, 1, 0, std::nullopt, core::Device::TmSrq{cq + 5, 1, 1}).error() == EINVAL);
  const std::uint32_t srq = *roce.dev.create_srq(pd, 4, 1, 0, std::nullopt, core::Device::TmSrq{cq, 2, 2});
  core::QpInitAttr ud;
  ud.qp_type = core::QpType::ud;
  ud.pd = pd;
  ud.send_cq = ud.recv_cq = cq;
  ud.srq = srq;
  CHECK(roce.dev.create_qp(ud).error() == EINVAL);
  CHECK(roce.dev.destroy_cq(cq) == EBUSY);  // the SRQ completes into it
  CHECK(roce.dev.destroy_srq(srq) == 0);
  CHECK(roce.dev.destroy_cq(cq) == 0);

  core::DeviceConfig c;
  c.iwarp = true;
  Bare iwarp(c);
  const std::uint32_t ipd = *iwarp.dev.alloc_pd();
  const std::uint32_t icq = *iwarp.dev.create_cq(16);
  CHECK(iwarp.dev.tm_caps().max_num_tags == 0);
  CHECK(iwarp.dev.create_srq(ipd, 4, 1, 0, std::nullopt, core::Device::TmSrq{icq, 1, 1}).error() == EOPNOTSUPP);
}

TEST_CASE("route_message: short, FIN and oversized rendezvous messages go to software", "[core][tm]") {
  core::TagMatching tm;
  tm.entries.resize(2);
  SrqOp op;
  op.tag = 1;
  op.mask = ~std::uint64_t{0};
  REQUIRE(core::add_tag(tm, op, 64));
  std::vector<std::uint8_t> msg(64, 0);
  msg[15] = 1;  // tag 1
  CHECK(core::route_message(tm, {}, true, 64).route == core::TmRoute::no_tag);
  msg[0] = static_cast<std::uint8_t>(TmhOp::eager);
  CHECK(core::route_message(tm, std::span(msg).first(10), true, 64).route == core::TmRoute::unexpected);
  CHECK(core::route_message(tm, msg, true, 64).route == core::TmRoute::eager);
  msg[0] = static_cast<std::uint8_t>(TmhOp::fin);
  CHECK(core::route_message(tm, msg, true, 64).route == core::TmRoute::unexpected);
  msg[0] = static_cast<std::uint8_t>(TmhOp::rendezvous);
  CHECK(core::route_message(tm, msg, true, 64).route == core::TmRoute::rendezvous);
  CHECK(core::route_message(tm, msg, true, 48).route == core::TmRoute::unexpected);   // over max_rndv_hdr_size
  CHECK(core::route_message(tm, msg, false, 64).route == core::TmRoute::unexpected);  // more than one packet
  tm.unexpected = 1;
  msg[0] = static_cast<std::uint8_t>(TmhOp::eager);
  CHECK(core::route_message(tm, msg, true, 64).route == core::TmRoute::unexpected);  // not in sync
}

}  // namespace
