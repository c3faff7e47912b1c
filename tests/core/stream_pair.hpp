// Two engines with one iWARP QP each, joined by an in-memory byte stream per direction: the
// TCP connection after the MPA exchange, without sockets. Each direction's bytes are handed
// to the peer in chunks of a chosen size, so tests can cut FPDUs anywhere.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <vector>

#include "tests/core/engine_fixture.hpp"

namespace test {

struct StreamPair {
  explicit StreamPair(core::StreamParams params = {}, std::size_t buffer_bytes = 1 << 20)
      : a(ipv4_gid(1), buffer_bytes), b(ipv4_gid(2), buffer_bytes) {
    create(a, params);
    create(b, params);
  }

  // Moves FPDUs both ways until neither side has anything more to send or deliver.
  void pump() {
    bool moved = true;
    while (moved) {
      moved = drain(a, from_a) | drain(b, from_b);
      moved |= deliver(from_a, b) | deliver(from_b, a);
      moved |= hang_up(from_a, b) | hang_up(from_b, a);
    }
  }

  core::SendWr send(std::size_t offset, std::uint32_t length, std::uint64_t wr_id = 1) const {
    core::SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = core::WrOpcode::send;
    wr.flags = core::send_flags::signaled;
    wr.sg_list = {a.sge(offset, length)};
    return wr;
  }
  core::SendWr rdma(core::WrOpcode op, std::size_t local, std::size_t remote, std::uint32_t length,
                    std::uint64_t wr_id = 1) const {
    core::SendWr wr = send(local, length, wr_id);
    wr.opcode = op;
    wr.remote_addr = b.addr(remote);
    wr.rkey = b.mr.rkey;
    return wr;
  }
  void post_recv(Side& s, std::size_t offset, std::uint32_t length, std::uint64_t wr_id = 100) {
    core::RecvWr r;
    r.wr_id = wr_id;
    r.sg_list = {s.sge(offset, length)};
    REQUIRE(s.dev->post_recv(s.qpn, r) == 0);
  }

  core::QpState state(const Side& s) const { return s.dev->qp(s.qpn)->state(); }

  // One direction of the connection.
  struct Direction {
    std::vector<std::uint8_t> in_flight;  // sent, not yet delivered
    std::vector<std::uint8_t> sent;       // everything sent, for decoding
    std::size_t fpdus = 0;
    bool closed = false;  // the sender asked for the connection's close
  };

  Side a, b;
  Direction from_a, from_b;
  std::size_t chunk = 1 << 16;  // bytes handed to the receiver at once
  // Applied to each FPDU as it is sent, e.g. to corrupt one.
  std::function<void(const Side& sender, core::UninitialisedBytes& fpdu)> tamper;

 private:
  static void create(Side& s, const core::StreamParams& params) {
    core::QpInitAttr init;
    init.qp_type = core::QpType::rc;
    init.pd = s.pd;
    init.send_cq = s.send_cq;
    init.recv_cq = s.recv_cq;
    init.cap = {256, 256, 4, 4, 64};
    const auto created = s.dev->create_qp(init);
    REQUIRE(created.ok());
    s.qpn = created->qpn;
    core::QpAttr attr;
    attr.qp_state = core::QpState::init;
    attr.port_num = 1;
    attr.qp_access_flags = core::access::local_write | core::access::remote_write | core::access::remote_read;
    namespace mask = core::qp_attr;
    REQUIRE(s.dev->modify_qp(0, s.qpn, attr, mask::state | mask::pkey_index | mask::port | mask::access_flags) == 0);
    REQUIRE(s.dev->stream_attach(s.qpn, params) == 0);
  }

  bool drain(Side& s, Direction& d) {
    bool moved = false;
    core::UninitialisedBytes fpdu;
    while (const auto qpn = s.dev->next_stream_ready()) {
      for (fpdu.clear(); s.dev->stream_transmit(*qpn, fpdu); fpdu.clear()) {
        if (tamper) tamper(s, fpdu);
        d.in_flight.insert(d.in_flight.end(), fpdu.begin(), fpdu.end());
        d.sent.insert(d.sent.end(), fpdu.begin(), fpdu.end());
        ++d.fpdus;
        moved = true;
      }
    }
    while (s.dev->next_stream_close()) d.closed = true;
    return moved;
  }

  bool deliver(Direction& d, Side& to) {
    if (d.in_flight.empty()) return false;
    const std::size_t n = std::min(chunk, d.in_flight.size());
    to.dev->stream_receive(to.qpn, {d.in_flight.data(), n});
    d.in_flight.erase(d.in_flight.begin(), d.in_flight.begin() + static_cast<std::ptrdiff_t>(n));
    return true;
  }

  // A side that closed its connection: once its bytes are delivered, the peer sees the end.
  static bool hang_up(const Direction& d, Side& peer) {
    if (!d.closed || !d.in_flight.empty() || peer.dev->qp(peer.qpn)->stream->closing) return false;
    peer.dev->stream_lost(peer.qpn);
    return true;
  }
};

}  // namespace test
