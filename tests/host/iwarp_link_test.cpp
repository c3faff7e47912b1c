// IwarpLink: the shim's verbs on an embedded iWARP host (127.83.95.x). The engine's verbs run
// through it, completion-channel events reach the handler set on it, connections go through
// its iWARP CM calls, and the InfiniBand CM's calls fail with EOPNOTSUPP.
#include "emulator/host/iwarp_link.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "tests/host/iwarp_fixture.hpp"

namespace {

using namespace test;

TEST_CASE("an IwarpLink runs the verbs on its iWARP engine and reports CQ events", "[iwarp]") {
  IwarpNode server("127.83.95.1"), client("127.83.95.2");
  connect_nodes(server, client, endpoint("127.83.95.1", 17180));
  host::IwarpLink server_link(*server.h), client_link(*client.h);
  CHECK(server_link.address() == "127.83.95.1");

  std::atomic<int> cq_events{0};
  server_link.set_event_handlers(
      [&](std::uint32_t cq) {
        if (cq == server.cq) ++cq_events;
      },
      [](const core::AsyncEvent&) {});
  REQUIRE(server_link.req_notify_cq(server.cq, false) == 0);

  core::RecvWr recv;
  recv.wr_id = 7;
  recv.sg_list = {{server.addr(0), 64, server.mr.lkey}};
  std::size_t posted = 0;
  REQUIRE(server_link.post_recv(server.qpn, {&recv, 1}, posted) == 0);
  CHECK(posted == 1);
  std::memcpy(client.buffer.data(), "through the link", 16);
  core::SendWr send;
  send.wr_id = 8;
  send.opcode = core::WrOpcode::send;
  send.flags = core::send_flags::signaled;
  send.sg_list = {{client.addr(0), 16, client.mr.lkey}};
  REQUIRE(client_link.post_send(client.qpn, {&send, 1}, posted) == 0);

  REQUIRE(eventually([&] { return cq_events.load() == 1; }));
  core::Wc wc;
  REQUIRE(server_link.poll_cq(server.cq, {&wc, 1}) == 1);
  CHECK(wc.wr_id == 7);
  CHECK(wc.byte_len == 16);
  CHECK(std::memcmp(server.buffer.data(), "through the link", 16) == 0);
  REQUIRE(client_link.poll_cq(client.cq, {&wc, 1}) == 1);
  CHECK(wc.wr_id == 8);

  // A PD, CQ and MR of the link's own, on the same engine.
  const auto pd = server_link.alloc_pd();
  REQUIRE(pd.ok());
  const auto cq = server_link.create_cq(16);
  REQUIRE(cq.ok());
  const auto mr = server_link.reg_mr(*pd, server.addr(1 << 20), 4096, server.addr(1 << 20), 0);
  REQUIRE(mr.ok());
  CHECK(server_link.dereg_mr(mr->lkey) == 0);
  CHECK(server_link.destroy_cq(*cq) == 0);
  CHECK(server_link.dealloc_pd(*pd) == 0);
}

TEST_CASE("an IwarpLink connects, refuses and disconnects through the iWARP CM's calls", "[iwarp]") {
  IwarpNode server("127.83.95.4"), client("127.83.95.5");
  host::IwarpLink server_link(*server.h), client_link(*client.h);
  server_link.set_iw_handler([&](const core::IwarpEvent& e) { server.push(e); });
  const core::TcpEndpoint service = endpoint("127.83.95.4", 17181);
  const auto listener = server_link.iw_listen(service);
  REQUIRE(listener.ok());
  CHECK(server_link.iw_listen(service).error() == EADDRINUSE);

  core::MpaOffer offer;
  offer.private_data = {9, 8, 7};
  offer.ird = offer.ord = 2;
  const auto first = client_link.iw_connect(service, client.qpn, offer);
  REQUIRE(first.ok());
  const core::IwarpEvent refused = server.next_event();
  REQUIRE(refused.type == core::IwarpEventType::connect_request);
  CHECK(refused.private_data == offer.private_data);
  const std::vector<std::uint8_t> why = {1};
  REQUIRE(server_link.iw_reject(refused.id, why) == 0);
  const core::IwarpEvent rejected = client.next_event();
  CHECK(rejected.type == core::IwarpEventType::rejected);
  CHECK(rejected.private_data == why);
  client_link.iw_destroy(*first);

  REQUIRE(client_link.iw_connect(service, client.qpn, offer).ok());
  const core::IwarpEvent request = server.next_event();
  REQUIRE(request.type == core::IwarpEventType::connect_request);
  REQUIRE(server_link.iw_accept(request.id, server.qpn, offer) == 0);
  CHECK(server.next_event().type == core::IwarpEventType::established);
  const core::IwarpEvent established = client.next_event();
  REQUIRE(established.type == core::IwarpEventType::established);
  CHECK(client.h->call([&](core::Device& d, core::IwarpConnectionManager&) { return d.qp(client.qpn)->state(); }) ==
        core::QpState::rts);

  REQUIRE(client_link.iw_disconnect(established.id) == 0);
  CHECK(client.next_event().type == core::IwarpEventType::disconnected);
  CHECK(server.next_event().type == core::IwarpEventType::disconnected);
  CHECK(server_link.iw_stop_listening(*listener) == 0);
}

TEST_CASE("an IwarpLink has no InfiniBand CM and no multicast", "[iwarp]") {
  IwarpNode node("127.83.95.3");
  host::IwarpLink link(*node.h);
  CHECK(link.cm_listen(0x106000000004e20ull).error() == EOPNOTSUPP);
  CHECK(link.cm_connect(core::CmConnect{}).error() == EOPNOTSUPP);
  CHECK(link.cm_accept(1, core::CmAccept{}) == EOPNOTSUPP);
  CHECK(link.attach_mcast(node.qpn, core::Gid{}) == EOPNOTSUPP);
  CHECK(link.multicast_limits().max_groups == 0);
}

}  // namespace
