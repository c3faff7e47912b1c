// DeviceConfig::unsealed_loopback: packets to the device's own GID 0 leave without an ICRC
// (the host turns them round with nothing to check it), every other packet is sealed as ever.
#include <catch2/catch.hpp>

#include "tests/core/direct_link.hpp"
#include "tests/core/engine_fixture.hpp"
#include "tests/core/verbs_test_util.hpp"

namespace test {

TEST_CASE("unsealed loopback: only packets to the device's own address go without an ICRC", "[core][loopback]") {
  core::DeviceConfig unsealed;
  unsealed.unsealed_loopback = true;
  Side s(ipv4_gid(1), 1 << 16, unsealed);
  Side peer(ipv4_gid(2), 1 << 16);
  const QpOptions o;
  const std::uint32_t first = s.dev->config().first_qpn;
  // s's first QP talks to its second, on s itself; s's third QP talks to peer's first.
  bring_up(s, first + 1, s.gid(), 100, 200, o);
  const std::uint32_t looped = s.qpn;
  bring_up(s, first, s.gid(), 200, 100, o);
  bring_up(s, first, peer.gid(), 300, 400, o);
  const std::uint32_t outward = s.qpn;
  bring_up(peer, outward, s.gid(), 400, 300, o);

  s.qpn = first + 1;
  post_recv(s, 1, 0, 64);
  peer.qpn = first;
  post_recv(peer, 2, 0, 64);
  REQUIRE(s.dev->post_send(0, looped, make_wr(WrOpcode::send, 3, {s.sge(1024, 16)})) == 0);
  REQUIRE(s.dev->post_send(0, outward, make_wr(WrOpcode::send, 4, {s.sge(2048, 16)})) == 0);

  std::vector<core::TxPacket> to_self, to_peer;
  while (auto p = s.dev->transmit(0)) (p->route.dst == s.gid() ? to_self : to_peer).push_back(std::move(*p));
  REQUIRE(to_self.size() == 1);
  REQUIRE(to_peer.size() == 1);

  // The looped packet fails a real ICRC check, and is taken when the host vouches for it.
  s.dev->receive(0, as_received(to_self[0]));
  CHECK(s.dev->counters().icrc_err == 1);
  core::RxPacket vouched = as_received(to_self[0]);
  vouched.icrc_checked = true;
  s.dev->receive(0, vouched);
  CHECK(s.dev->counters().icrc_err == 1);
  CHECK(s.poll(s.recv_cq).size() == 1);

  // The packet to another address carries a good ICRC.
  peer.dev->receive(0, as_received(to_peer[0]));
  CHECK(peer.dev->counters().icrc_err == 0);
  CHECK(peer.poll(peer.recv_cq).size() == 1);
}

}  // namespace test
