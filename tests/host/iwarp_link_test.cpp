// IwarpLink: the shim's verbs on an embedded iWARP host (127.83.95.x). The engine's verbs run
// through it, completion-channel events reach the handler set on it, and the InfiniBand CM's
// calls fail with EOPNOTSUPP.
#include "emulator/host/iwarp_link.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>

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
