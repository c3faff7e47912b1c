// The iWARP transport as a timeline: two engines joined by in-memory streams, FPDUs decoded
// off the "wire" to check what each side sent (RFC 5040, 5041, 5044).
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "tests/core/stream_pair.hpp"
#include "tests/iwarp_consumer_objects.hpp"
#include "wire/iwarp/mpa_stream.hpp"

namespace {

using namespace test;
using core::QpState;
using core::WcStatus;
using core::WrOpcode;
using wire::iwarp::MpaItemKind;
using wire::iwarp::MpaStreamItem;
using wire::iwarp::RdmapOpcode;

// Every FPDU of one direction, decoded as a peer would (CRCs as `crc` says).
std::vector<MpaStreamItem> decode(const std::vector<std::uint8_t>& bytes, bool crc = false) {
  wire::iwarp::MpaStreamDecoder decoder;
  decoder.start_full_operation(false, crc);
  std::vector<MpaStreamItem> items;
  decoder.feed(bytes, [&](const MpaStreamItem& item) {
    items.push_back(item);
    items.back().fpdu.message.payload = {};  // valid only during the call
  });
  return items;
}

void fill(Side& s, std::size_t offset, std::size_t length, std::uint8_t seed) {
  for (std::size_t i = 0; i < length; ++i) s.buffer[offset + i] = static_cast<std::uint8_t>(seed + i * 7);
}

bool same_bytes(const Side& x, std::size_t xo, const Side& y, std::size_t yo, std::size_t length) {
  return std::memcmp(x.buffer.data() + xo, y.buffer.data() + yo, length) == 0;
}

}  // namespace

TEST_CASE("an iWARP Send is segmented into FPDUs that fit the MSS and fills one receive WQE", "[iwarp]") {
  core::StreamParams params;
  params.max_fpdu = 1460;
  StreamPair p(params);
  fill(p.a, 0, 3000, 1);
  p.post_recv(p.b, 8192, 4096);
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.send(0, 3000)) == 0);
  p.pump();

  const auto items = decode(p.from_a.sent);
  REQUIRE(items.size() == 3);  // 1460-byte FPDUs carry 1436 payload bytes after 24 of framing
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& m = items[i].fpdu.message;
    CHECK(m.opcode == RdmapOpcode::send);
    CHECK(m.ddp.queue_number == 0);
    CHECK(m.ddp.message_sequence_number == 1);  // RFC 5041 s5.1: MSNs start at 1
    CHECK(m.ddp.message_offset == i * 1436);
    CHECK(m.ddp.last == (i == 2));
    CHECK(items[i].end_offset - items[i].stream_offset <= 1460);
  }
  const auto sent = p.a.poll(p.a.send_cq);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == WcStatus::success);
  CHECK(sent[0].opcode == core::WcOpcode::send);
  const auto got = p.b.poll(p.b.recv_cq);
  REQUIRE(got.size() == 1);
  CHECK(got[0].status == WcStatus::success);
  CHECK(got[0].byte_len == 3000);
  CHECK(same_bytes(p.a, 0, p.b, 8192, 3000));
}

TEST_CASE("iWARP RDMA Write and Read move data, whatever the chunking of the stream", "[iwarp]") {
  const std::size_t chunk = GENERATE(1, 3, 7, 1000, 1 << 16);
  core::StreamParams params;
  params.crc = true;
  params.max_fpdu = 9000;
  StreamPair p(params);
  p.chunk = chunk;
  fill(p.a, 0, 40000, 3);
  fill(p.b, 100000, 30000, 9);
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.rdma(WrOpcode::rdma_write, 0, 200000, 40000, 1)) == 0);
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.rdma(WrOpcode::rdma_read, 50000, 100000, 30000, 2)) == 0);
  p.pump();

  const auto wcs = p.a.poll(p.a.send_cq);
  REQUIRE(wcs.size() == 2);
  CHECK(wcs[0].wr_id == 1);
  CHECK(wcs[0].opcode == core::WcOpcode::rdma_write);
  CHECK(wcs[1].wr_id == 2);
  CHECK(wcs[1].status == WcStatus::success);
  CHECK(wcs[1].opcode == core::WcOpcode::rdma_read);
  CHECK(wcs[1].byte_len == 30000);
  CHECK(same_bytes(p.a, 0, p.b, 200000, 40000));
  CHECK(same_bytes(p.b, 100000, p.a, 50000, 30000));
  for (const auto& item : decode(p.from_b.sent, true)) {
    CHECK(item.fpdu.crc_ok);
    CHECK(item.fpdu.message.opcode == RdmapOpcode::read_response);
  }
  CHECK(p.state(p.a) == QpState::rts);
  CHECK(p.state(p.b) == QpState::rts);
}

TEST_CASE("iWARP Read Requests stay within the ORD until their responses come", "[iwarp]") {
  core::StreamParams params;
  params.ord = 2;
  params.ird = 2;
  StreamPair p(params);
  for (std::uint64_t i = 0; i < 4; ++i)
    REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.rdma(WrOpcode::rdma_read, i * 100, i * 100, 64, i)) == 0);
  core::UninitialisedBytes out;
  const auto qpn = p.a.dev->next_stream_ready();
  REQUIRE(qpn);
  std::size_t requests = 0;
  while (p.a.dev->stream_transmit(*qpn, out)) ++requests;
  CHECK(requests == 2);
  p.from_a.in_flight.assign(out.begin(), out.end());
  p.pump();
  CHECK(p.a.poll(p.a.send_cq).size() == 4);
}

TEST_CASE("an iWARP Send with Invalidate invalidates the receiver's STag and says so in the WC", "[iwarp]") {
  StreamPair p;
  p.post_recv(p.b, 0, 64);
  core::SendWr wr = p.send(0, 16);
  wr.opcode = WrOpcode::send_with_inv;
  wr.invalidate_rkey = p.b.mr.rkey;
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, wr) == 0);
  p.pump();
  const auto got = p.b.poll(p.b.recv_cq);
  REQUIRE(got.size() == 1);
  CHECK(got[0].wc_flags == core::wc_flags::with_inv);
  CHECK(got[0].imm_data == p.b.mr.rkey);
  CHECK_FALSE(p.b.dev->find_region(p.b.mr.rkey)->valid);
  CHECK(decode(p.from_a.sent).at(0).fpdu.message.opcode == RdmapOpcode::send_invalidate);
}

TEST_CASE("iWARP QPs refuse the opcodes RDMAP lacks, and window binds", "[iwarp]") {
  StreamPair p;
  for (const WrOpcode op : {WrOpcode::send_with_imm, WrOpcode::rdma_write_with_imm, WrOpcode::atomic_cmp_and_swp,
                            WrOpcode::atomic_fetch_and_add, WrOpcode::bind_mw}) {
    core::SendWr wr = p.rdma(op, 0, 0, 8);
    CHECK(p.a.dev->post_send(0, p.a.qpn, wr) == EINVAL);
  }
}

TEST_CASE("an iWARP device has RC QPs only, no AHs, MWs or on-demand MRs, and reaches RTS only through its stream",
          "[iwarp]") {
  core::DirectMemory memory;
  core::DeviceConfig config;
  config.gids = {ipv4_gid(1)};
  config.iwarp = true;
  core::Device d(config, memory);
  std::vector<std::uint8_t> buffer(4096);
  const IwarpConsumerObjects o = create_consumer_objects(d, buffer, 16, {4, 4, 1, 1, 0});
  REQUIRE(d.qp(o.qpn)->state() == QpState::init);

  core::QpInitAttr ud;
  ud.qp_type = core::QpType::ud;
  ud.pd = o.pd;
  ud.send_cq = ud.recv_cq = o.cq;
  CHECK(d.create_qp(ud).error() == EOPNOTSUPP);
  ud.qp_type = core::QpType::uc;
  CHECK(d.create_qp(ud).error() == EOPNOTSUPP);
  CHECK(d.create_ah(o.pd, core::AddressVector{}).error() == EOPNOTSUPP);
  CHECK(d.alloc_mw(o.pd, 1).error() == EOPNOTSUPP);
  CHECK(d.alloc_mw(o.pd, 2).error() == EOPNOTSUPP);
  const auto host = reinterpret_cast<std::uint64_t>(buffer.data());
  CHECK(d.reg_mr(o.pd, host, 64, host, core::access::local_write | core::access::on_demand).error() == EOPNOTSUPP);

  // RTR with the attributes IBTA asks of RC (s11.2.4.2) is taken; RTS is not.
  namespace mask = core::qp_attr;
  core::QpAttr attr;
  attr.qp_state = QpState::rtr;
  attr.ah_attr.dgid = ipv4_gid(2);
  attr.dest_qp_num = 0x11;
  REQUIRE(d.modify_qp(0, o.qpn, attr,
                      mask::state | mask::av | mask::path_mtu | mask::dest_qpn | mask::rq_psn |
                          mask::max_dest_rd_atomic | mask::min_rnr_timer) == 0);
  attr.qp_state = QpState::rts;
  CHECK(d.modify_qp(0, o.qpn, attr,
                    mask::state | mask::sq_psn | mask::timeout | mask::retry_cnt | mask::rnr_retry |
                        mask::max_qp_rd_atomic) == EINVAL);
  CHECK(d.qp(o.qpn)->state() == QpState::rtr);
  REQUIRE(d.stream_attach(o.qpn, core::StreamParams{}) == 0);
  CHECK(d.qp(o.qpn)->state() == QpState::rts);
}

namespace {

// The Terminate `s` sent last, decoded.
wire::iwarp::RdmapTerminate terminate_sent(const StreamPair::Direction& d) {
  const auto items = decode(d.sent);
  REQUIRE_FALSE(items.empty());
  REQUIRE(items.back().kind == MpaItemKind::fpdu);
  REQUIRE(items.back().fpdu.message.opcode == RdmapOpcode::terminate);
  return items.back().fpdu.message.terminate;
}

void check_cause(const wire::iwarp::RdmapTerminate& t, wire::iwarp::TerminateCause c) {
  CHECK(int{t.layer} == c.layer);
  CHECK(int{t.error_type} == c.error_type);
  CHECK(int{t.error_code} == c.error_code);
}

}  // namespace

TEST_CASE("a Send with no receive WQE ends both QPs with a DDP Terminate", "[iwarp]") {
  StreamPair p;
  p.post_recv(p.a, 0, 64, 7);  // flushed when the Terminate arrives
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.send(0, 100)) == 0);
  p.pump();
  const auto t = terminate_sent(p.from_b);
  check_cause(t, wire::iwarp::terminate_cause::ddp_untagged_no_buffer);
  CHECK(t.has_ddp_header);
  CHECK(t.ddp_segment_length == 118);  // the 18-byte untagged header and 100 bytes
  CHECK(p.from_b.closed);
  CHECK(p.state(p.a) == QpState::err);
  CHECK(p.state(p.b) == QpState::err);
  CHECK(p.b.dev->iwarp_counters().terminates_sent == 1);
  CHECK(p.a.dev->iwarp_counters().terminates_received == 1);
  CHECK(p.a.dev->iwarp_counters().terminates_sent == 0);
  const auto flushed = p.a.poll(p.a.recv_cq);
  REQUIRE(flushed.size() == 1);
  CHECK(flushed[0].status == WcStatus::wr_flush_err);
}

TEST_CASE("an RDMA Write to a bad STag or beyond the MR is refused with a tagged-buffer Terminate", "[iwarp]") {
  StreamPair p;
  const bool bad_stag = GENERATE(true, false);
  core::SendWr wr = p.rdma(WrOpcode::rdma_write, 0, bad_stag ? 0 : (1 << 20) - 8, 64);
  if (bad_stag) wr.rkey ^= 0x100;
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, wr) == 0);
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.rdma(WrOpcode::rdma_read, 0, 0, 8, 2)) == 0);
  p.pump();
  check_cause(terminate_sent(p.from_b), bad_stag ? wire::iwarp::terminate_cause::ddp_tagged_invalid_stag
                                                 : wire::iwarp::terminate_cause::ddp_tagged_base_or_bounds);
  // The Write completed when it was sent; the Read after it is what the Terminate ends.
  const auto wcs = p.a.poll(p.a.send_cq);
  REQUIRE(wcs.size() == 2);
  CHECK(wcs[0].status == WcStatus::success);
  CHECK(wcs[1].status == WcStatus::rem_access_err);
  CHECK(p.state(p.a) == QpState::err);
}

TEST_CASE("an RDMA Read beyond the source MR gets an RDMAP Terminate with the Read Request header", "[iwarp]") {
  StreamPair p;
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.rdma(WrOpcode::rdma_read, 0, (1 << 20) - 8, 64, 5)) == 0);
  p.pump();
  const auto t = terminate_sent(p.from_b);
  check_cause(t, wire::iwarp::terminate_cause::rdmap_base_or_bounds);
  CHECK(t.rdmap_header_present);
  const auto wcs = p.a.poll(p.a.send_cq);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].wr_id == 5);
  CHECK(wcs[0].status == WcStatus::rem_access_err);
}

TEST_CASE("a corrupted FPDU is refused with an MPA CRC Terminate when CRCs were negotiated", "[iwarp]") {
  core::StreamParams params;
  params.crc = true;
  StreamPair p(params);
  p.post_recv(p.b, 0, 64);
  // A payload byte, or one of the queue number's: a damaged header is a CRC error too.
  const bool in_header = GENERATE(false, true);
  p.tamper = [&](const Side& from, core::UninitialisedBytes& fpdu) {
    if (&from == &p.a) fpdu[in_header ? 10 : fpdu.size() / 2] ^= 0x01;
  };
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.send(0, 32)) == 0);
  p.pump();
  check_cause(terminate_sent(p.from_b), wire::iwarp::terminate_cause::mpa_crc_error);
  CHECK(p.b.dev->iwarp_counters().crc_err == 1);
  CHECK(p.b.poll(p.b.recv_cq).at(0).status == WcStatus::wr_flush_err);
  CHECK(p.state(p.a) == QpState::err);
}

TEST_CASE("garbage instead of FPDUs ends the stream with a Terminate, never a crash", "[iwarp]") {
  StreamPair p;
  p.post_recv(p.b, 0, 64);
  // Its first two bytes read as a ULPDU length of 2864: the "FPDU" ends there, and is no DDP
  // segment.
  std::vector<std::uint8_t> garbage(5000);
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<std::uint8_t>(i * 37 + 11);
  p.b.dev->stream_receive(p.b.qpn, garbage);
  CHECK(p.state(p.b) == QpState::err);
  p.pump();
  CHECK(p.from_b.closed);
  terminate_sent(p.from_b);
}

TEST_CASE("a connection lost under an iWARP QP flushes its WRs and asks for the close", "[iwarp]") {
  StreamPair p;
  p.post_recv(p.a, 0, 64, 9);
  REQUIRE(p.a.dev->post_send(0, p.a.qpn, p.rdma(WrOpcode::rdma_read, 0, 0, 64, 4)) == 0);
  core::UninitialisedBytes out;
  REQUIRE(p.a.dev->stream_transmit(p.a.qpn, out));  // the Read Request leaves, no response comes
  p.a.dev->stream_lost(p.a.qpn);
  CHECK(p.state(p.a) == QpState::err);
  const auto sent = p.a.poll(p.a.send_cq);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == WcStatus::wr_flush_err);
  CHECK(p.a.poll(p.a.recv_cq).at(0).status == WcStatus::wr_flush_err);
  CHECK(p.a.dev->next_stream_close() == p.a.qpn);
  out.clear();
  CHECK_FALSE(p.a.dev->stream_transmit(p.a.qpn, out));
}

TEST_CASE("a QP moved to ERR by the consumer closes its stream without a Terminate", "[iwarp]") {
  StreamPair p;
  core::QpAttr attr;
  attr.qp_state = QpState::err;
  REQUIRE(p.a.dev->modify_qp(0, p.a.qpn, attr, core::qp_attr::state) == 0);
  p.pump();
  CHECK(p.from_a.closed);
  CHECK(p.from_a.sent.empty());
  CHECK(p.state(p.b) == QpState::err);  // the peer saw the connection end
}

TEST_CASE("stream_attach takes an RC QP in INIT or RTR only", "[iwarp]") {
  StreamPair p;
  CHECK(p.a.dev->stream_attach(p.a.qpn, {}) == EINVAL);  // already attached
  core::QpInitAttr init;
  init.qp_type = core::QpType::ud;
  init.pd = p.a.pd;
  init.send_cq = init.recv_cq = p.a.send_cq;
  const auto ud = p.a.dev->create_qp(init);
  REQUIRE(ud.ok());
  CHECK(p.a.dev->stream_attach(ud->qpn, {}) == EINVAL);
  init.qp_type = core::QpType::rc;
  const auto rc = p.a.dev->create_qp(init);
  CHECK(p.a.dev->stream_attach(rc->qpn, {}) == EINVAL);  // still in RESET
}
