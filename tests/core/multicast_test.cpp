// Multicast (IBTA vol. 1 s10.5): attaching UD QPs to groups, the port's membership changes the
// host carries out, delivery of a UD SEND to the multicast QPN to every attached QP, and
// sending to a group. Packets are built here and handed to the engine as a host would, with
// the group's GID as their destination.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "emulator/core/roce_headers.hpp"
#include "tests/core/verbs_test_util.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"

namespace test {
namespace {

constexpr core::Gid kGroup4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 77, 40, 1};       // ::ffff:239.77.40.1
constexpr core::Gid kGroup6 = {0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77, 0x40, 0x01};  // ff0e::77:4001
constexpr core::Gid kOtherGroup = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 77, 40, 2};
constexpr std::uint32_t kQkey = 0x01234567;  // rdma_cm's RDMA_UDP_QKEY
constexpr std::uint32_t kSenderQpn = 0x000123;
constexpr core::Gid kSenderGid = ipv4_gid(9);

// A device with UD QPs in RTS, each with its Q_Key, receiving into slices of one buffer.
struct Port {
  explicit Port(std::uint8_t last_octet = 1, core::DeviceConfig config = {})
      : side(ipv4_gid(last_octet), 1 << 16, config) {}

  std::uint32_t ud_qp(std::uint32_t qkey = kQkey) {
    QpOptions o;
    o.type = core::QpType::ud;
    bring_up(side, 0, {}, 0, 0, o);  // UD: no peer
    core::QpAttr a;
    a.qkey = qkey;
    REQUIRE(side.dev->modify_qp(0, side.qpn, a, core::qp_attr::qkey) == 0);
    return side.qpn;
  }
  core::Device& dev() { return *side.dev; }
  void post_recv(std::uint32_t qpn, std::uint64_t id, std::size_t offset) {
    REQUIRE(side.dev->post_recv(qpn, recv_wr(id, {side.sge(offset, 40 + 1024)})) == 0);
  }
  std::vector<core::GroupChange> changes() {
    std::vector<core::GroupChange> out;
    while (auto c = side.dev->next_group_change()) out.push_back(*c);
    return out;
  }

  Side side;
};

// A UD SEND (or another opcode) from kSenderQpn at kSenderGid to `dest_qp` at `dst`, as the
// wire brings it: ICRC computed for those addresses.
std::vector<std::uint8_t> ud_send(const core::Gid& dst, std::span<const std::uint8_t> payload,
                                  std::uint32_t qkey = kQkey, std::uint32_t dest_qp = wire::kMulticastQpn,
                                  wire::Opcode op = wire::opcode(wire::Transport::ud, wire::Operation::send_only)) {
  wire::IbRepr h;
  h.opcode = op;
  h.dest_qp = dest_qp;
  h.psn = 7;
  h.qkey = qkey;
  h.src_qp = kSenderQpn;
  h.payload = payload;
  std::vector<std::uint8_t> bytes(h.buffer_len());
  h.emit(bytes.data());
  const std::size_t covered = bytes.size() - wire::kIcrcLength;
  const core::Endpoints e{kSenderGid, dst, 0xC000, 0, 0, 64};
  wire::store_icrc(bytes.data() + covered, core::icrc_between(e, {bytes.data(), covered}));
  return bytes;
}

void deliver(core::Device& d, const core::Gid& dst, const std::vector<std::uint8_t>& bytes) {
  d.receive(0, core::RxPacket{bytes, kSenderGid, dst, 0xC000, false});
}

std::vector<core::Wc> completions(Port& p, std::uint32_t cq) { return p.side.poll(cq); }

TEST_CASE("multicast attach: UD QPs to multicast GIDs only, errno values as the kernel's", "[core][multicast]") {
  Port p;
  const std::uint32_t ud = p.ud_qp();
  Bare bare;
  const std::uint32_t pd = bare.pd(), cq = bare.cq();
  const std::uint32_t rc = bare.dev.create_qp(bare.qp_attr(pd, cq))->qpn;

  CHECK(bare.dev.attach_mcast(rc, kGroup4) == EINVAL);     // s10.5: only UD QPs join groups
  CHECK(p.dev().attach_mcast(ud, ipv4_gid(7)) == EINVAL);  // a unicast GID
  core::Gid ipv4_broadcast = kGroup4;
  ipv4_broadcast[12] = 255;
  CHECK(p.dev().attach_mcast(ud, ipv4_broadcast) == EINVAL);  // 255.x: not 224.0.0.0/4
  CHECK(p.dev().attach_mcast(0x999, kGroup4) == EINVAL);      // no such QP
  CHECK(p.dev().attach_mcast(ud, kGroup4) == 0);
  CHECK(p.dev().attach_mcast(ud, kGroup4) == 0);  // twice: still one attachment
  CHECK(p.dev().attach_mcast(ud, kGroup6) == 0);
  CHECK(p.dev().detach_mcast(ud, kGroup4) == 0);
  CHECK(p.dev().detach_mcast(ud, kGroup4) == EINVAL);  // not attached any more
  CHECK(p.dev().detach_mcast(ud, kOtherGroup) == EINVAL);

  core::DeviceConfig none;
  none.mcast = {0, 0, 0};  // a host that cannot receive groups
  Port without(2, none);
  const std::uint32_t q = without.ud_qp();
  CHECK(without.dev().attach_mcast(q, kGroup4) == EOPNOTSUPP);
  CHECK(without.dev().detach_mcast(q, kGroup4) == EOPNOTSUPP);
}

TEST_CASE("multicast limits: groups, QPs per group and attachments in all", "[core][multicast]") {
  core::DeviceConfig c;
  c.mcast = {2, 2, 3};
  Port p(1, c);
  const std::uint32_t a = p.ud_qp(), b = p.ud_qp(), d = p.ud_qp();
  CHECK(p.dev().attach_mcast(a, kGroup4) == 0);
  CHECK(p.dev().attach_mcast(b, kGroup4) == 0);
  CHECK(p.dev().attach_mcast(d, kGroup4) == ENOMEM);  // a third QP in one group
  CHECK(p.dev().attach_mcast(a, kGroup6) == 0);
  CHECK(p.dev().attach_mcast(a, kOtherGroup) == ENOMEM);  // a third group (and a fourth attachment)
  CHECK(p.dev().attach_mcast(b, kGroup6) == ENOMEM);      // a fourth attachment
  CHECK(p.dev().detach_mcast(a, kGroup6) == 0);
  CHECK(p.dev().attach_mcast(d, kOtherGroup) == 0);  // room again
}

TEST_CASE("the port joins a group with its first QP and leaves it with its last, destroyed QPs included",
          "[core][multicast]") {
  Port p;
  const std::uint32_t a = p.ud_qp(), b = p.ud_qp();
  REQUIRE(p.dev().attach_mcast(a, kGroup4) == 0);
  REQUIRE(p.dev().attach_mcast(b, kGroup4) == 0);
  REQUIRE(p.dev().attach_mcast(b, kGroup6) == 0);
  auto c = p.changes();
  REQUIRE(c.size() == 2);
  CHECK((c[0].group == kGroup4 && c[0].joined));
  CHECK((c[1].group == kGroup6 && c[1].joined));

  REQUIRE(p.dev().detach_mcast(a, kGroup4) == 0);
  CHECK(p.changes().empty());  // b is still a member
  REQUIRE(p.dev().destroy_qp(b) == 0);
  c = p.changes();
  REQUIRE(c.size() == 2);
  for (const core::GroupChange& left : c) CHECK_FALSE(left.joined);
  CHECK(((c[0].group == kGroup4 && c[1].group == kGroup6) || (c[0].group == kGroup6 && c[1].group == kGroup4)));
}

TEST_CASE("a UD SEND to the multicast QPN reaches every attached QP whose Q_Key matches", "[core][multicast]") {
  Port p;
  const std::uint32_t a = p.ud_qp(), b = p.ud_qp(), wrong_key = p.ud_qp(0x1111), outside = p.ud_qp();
  for (const std::uint32_t q : {a, b, wrong_key}) REQUIRE(p.dev().attach_mcast(q, kGroup4) == 0);
  p.post_recv(a, 1, 0);
  p.post_recv(b, 2, 2048);
  p.post_recv(wrong_key, 3, 4096);
  p.post_recv(outside, 4, 6144);
  std::vector<std::uint8_t> data(100);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);

  deliver(p.dev(), kGroup4, ud_send(kGroup4, data));
  const auto wcs = completions(p, p.side.recv_cq);
  REQUIRE(wcs.size() == 2);  // a and b; not the QP with another Q_Key (C9-48), not one outside
  for (const core::Wc& wc : wcs) {
    CHECK(wc.status == core::WcStatus::success);
    CHECK(wc.byte_len == 40 + 100);
    CHECK(wc.src_qp == kSenderQpn);
    CHECK((wc.wc_flags & core::wc_flags::grh) != 0);
  }
  CHECK(((wcs[0].qp_num == a && wcs[1].qp_num == b) || (wcs[0].qp_num == b && wcs[1].qp_num == a)));
  for (const std::size_t at : {std::size_t{0}, std::size_t{2048}})
    CHECK(std::memcmp(p.side.buffer.data() + at + 40, data.data(), data.size()) == 0);
  // The GRH area holds the IPv4 header (last 20 bytes): its destination is the group.
  CHECK(std::memcmp(p.side.buffer.data() + 20 + 16, kGroup4.data() + 12, 4) == 0);

  const core::DeviceCounters n = p.dev().counters();
  CHECK(n.mcast_rcvd == 1);
  CHECK(n.mcast_dropped == 0);
  CHECK(n.dropped == 1);  // the copy for the QP with another Q_Key
  CHECK(n.unknown_qp == 0);
  CHECK(p.dev().qp(a)->counters.rcvd_pkts == 1);
  CHECK(p.dev().qp(outside)->counters.rcvd_pkts == 0);

  // Each QP consumed one receive WQE: a second datagram finds only wrong_key's and outside's.
  deliver(p.dev(), kGroup4, ud_send(kGroup4, data));
  CHECK(completions(p, p.side.recv_cq).empty());
  CHECK(p.dev().counters().dropped == 1 + 3);  // a and b had no WQE (UD has no RNR, s9.8.2), wrong_key the key
}

TEST_CASE("multicast packets for no group of ours, to a unicast address or of another transport are dropped",
          "[core][multicast]") {
  Port p;
  const std::uint32_t a = p.ud_qp();
  REQUIRE(p.dev().attach_mcast(a, kGroup4) == 0);
  for (std::uint64_t id = 1; id <= 4; ++id) p.post_recv(a, id, 0);
  const std::vector<std::uint8_t> data(16, 5);

  deliver(p.dev(), kOtherGroup, ud_send(kOtherGroup, data));    // a group nobody here attached to
  deliver(p.dev(), p.side.gid(), ud_send(p.side.gid(), data));  // the multicast QPN at our unicast address
  const auto rc_send = wire::opcode(wire::Transport::rc, wire::Operation::send_only);
  deliver(p.dev(), kGroup4, ud_send(kGroup4, data, kQkey, wire::kMulticastQpn, rc_send));  // multicast is UD only
  CHECK(completions(p, p.side.recv_cq).empty());
  CHECK(p.dev().counters().mcast_dropped == 3);
  CHECK(p.dev().counters().mcast_rcvd == 0);

  // Detached, the QP hears the group no more.
  deliver(p.dev(), kGroup4, ud_send(kGroup4, data));
  CHECK(completions(p, p.side.recv_cq).size() == 1);
  REQUIRE(p.dev().detach_mcast(a, kGroup4) == 0);
  deliver(p.dev(), kGroup4, ud_send(kGroup4, data));
  CHECK(completions(p, p.side.recv_cq).empty());
  CHECK(p.dev().counters().mcast_dropped == 4);
}

TEST_CASE("a UD SEND to a group leaves for the group's address with DestQP 0xFFFFFF and reaches its members",
          "[core][multicast]") {
  for (const core::Gid& group : {kGroup4, kGroup6}) {
    INFO((group == kGroup4 ? "IPv4 group" : "IPv6 group"));
    const bool v4 = group == kGroup4;
    const core::Gid sender_gid = v4 ? ipv4_gid(1) : core::Gid{0xFD, 0x77, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    Side sender(sender_gid, 4096);
    Port member1(2), member2(3);
    QpOptions o;
    o.type = core::QpType::ud;
    bring_up(sender, 0, {}, 0, 0, o);
    const std::uint32_t m1 = member1.ud_qp(0x11111111), m2 = member2.ud_qp(0x11111111);  // bring_up's Q_Key
    REQUIRE(member1.dev().attach_mcast(m1, group) == 0);
    REQUIRE(member2.dev().attach_mcast(m2, group) == 0);
    member1.post_recv(m1, 1, 0);
    member2.post_recv(m2, 2, 0);

    core::AddressVector av;
    av.dgid = group;
    const auto ah = sender.dev->create_ah(sender.pd, av);
    REQUIRE(ah.ok());
    for (std::size_t i = 0; i < 64; ++i) sender.buffer[i] = static_cast<std::uint8_t>(i + 1);
    core::SendWr w = make_wr(WrOpcode::send_with_imm, 9, {sender.sge(0, 64)});
    w.ah = *ah;
    w.remote_qpn = wire::kMulticastQpn;
    w.remote_qkey = 0x80000000;  // the QP's own Q_Key (s10.2.5)
    w.imm_data = 0xA1B2C3D4;
    REQUIRE(sender.dev->post_send(0, sender.qpn, w) == 0);

    auto sent = sender.dev->transmit(0);
    REQUIRE(sent.has_value());
    CHECK(sent->route.dst == group);
    CHECK(sent->route.src == sender_gid);
    const auto checked = wire::IbPacket::check(sent->bytes);
    REQUIRE(checked);
    CHECK(checked->dest_qp() == wire::kMulticastQpn);
    CHECK(wire::Deth::qkey::get(checked->ext(wire::Ext::deth)) == 0x11111111);
    CHECK(core::icrc_between(sent->route, checked->covered()) == checked->icrc());  // sealed for the group's address

    for (Port* m : {&member1, &member2})
      m->dev().receive(0, core::RxPacket{sent->bytes, sent->route.src, sent->route.dst, sent->route.src_port, false});
    for (Port* m : {&member1, &member2}) {
      const auto wcs = completions(*m, m->side.recv_cq);
      REQUIRE(wcs.size() == 1);
      CHECK(wcs[0].status == core::WcStatus::success);
      CHECK(wcs[0].byte_len == 40 + 64);
      CHECK(wcs[0].src_qp == sender.qpn);
      CHECK(wcs[0].imm_data == 0xA1B2C3D4);
      CHECK(std::memcmp(m->side.buffer.data() + 40, sender.buffer.data(), 64) == 0);
      CHECK(m->dev().counters().icrc_err == 0);
      CHECK(m->dev().counters().mcast_rcvd == 1);
    }
    CHECK(sender.poll(sender.send_cq).size() == 1);  // signaled: done once sent, as any UD SEND
  }
}

}  // namespace
}  // namespace test
