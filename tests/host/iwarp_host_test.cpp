// Two embedded iWARP hosts in one process, connected through the kernel's TCP on loopback
// (127.83.90.x): rdma_cm's exchange through the iWARP CM, then Sends, RDMA Writes and Reads
// of a megabyte over real sockets, and the disconnect.
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include "tests/host/iwarp_fixture.hpp"

namespace {

using namespace test;
using core::IwarpEventType;
using namespace std::chrono_literals;

}  // namespace

TEST_CASE("two iWARP hosts connect over kernel TCP and move data both ways", "[iwarp]") {
  IwarpNode server("127.83.90.1"), client("127.83.90.2");
  const core::TcpEndpoint service = endpoint("127.83.90.1", 17174);
  REQUIRE(server.h->listen(service).ok());
  CHECK(server.h->listen(service).error() == EADDRINUSE);

  core::MpaOffer offer;
  offer.private_data = {1, 2, 3};
  offer.ird = offer.ord = 4;
  const std::uint32_t client_id = client.h->call(
      [&](core::Device&, core::IwarpConnectionManager& cm) { return *cm.connect(service, client.qpn, offer); });
  const core::IwarpEvent request = server.next_event();
  REQUIRE(request.type == IwarpEventType::connect_request);
  CHECK(request.private_data == offer.private_data);
  CHECK(request.remote.address == client.h->gid());
  REQUIRE(server.h->call([&](core::Device&, core::IwarpConnectionManager& cm) {
    return cm.accept(request.id, server.qpn, offer);
  }) == 0);
  CHECK(server.next_event().type == IwarpEventType::established);
  const core::IwarpEvent established = client.next_event();
  CHECK(established.type == IwarpEventType::established);
  CHECK(established.id == client_id);

  // A 1 MiB RDMA Write, then a Send that says it is there; the server reads 1 MiB back.
  std::iota(client.buffer.begin(), client.buffer.begin() + (1 << 20), std::uint8_t{7});
  core::RecvWr recv;
  recv.wr_id = 50;
  recv.sg_list = {{server.addr(3 << 20), 64, server.mr.lkey}};
  REQUIRE(server.h->call(
              [&](core::Device& d, core::IwarpConnectionManager&) { return d.post_recv(server.qpn, recv); }) == 0);
  core::SendWr write;
  write.wr_id = 1;
  write.opcode = core::WrOpcode::rdma_write;
  write.sg_list = {{client.addr(0), 1 << 20, client.mr.lkey}};
  write.remote_addr = server.addr(0);
  write.rkey = server.mr.rkey;
  REQUIRE(client.post(write) == 0);
  core::SendWr send;
  send.wr_id = 2;
  send.opcode = core::WrOpcode::send;
  send.flags = core::send_flags::signaled;
  send.sg_list = {{client.addr(0), 16, client.mr.lkey}};
  REQUIRE(client.post(send) == 0);
  CHECK(client.next_wc().wr_id == 2);
  const core::Wc arrived = server.next_wc();
  CHECK(arrived.wr_id == 50);
  CHECK(arrived.byte_len == 16);
  CHECK(std::memcmp(server.buffer.data(), client.buffer.data(), 1 << 20) == 0);

  core::SendWr read;
  read.wr_id = 3;
  read.opcode = core::WrOpcode::rdma_read;
  read.flags = core::send_flags::signaled;
  read.sg_list = {{server.addr(1 << 20), 1 << 20, server.mr.lkey}};
  read.remote_addr = client.addr(0);
  read.rkey = client.mr.rkey;
  REQUIRE(server.post(read) == 0);
  const core::Wc read_done = server.next_wc();
  CHECK(read_done.status == core::WcStatus::success);
  CHECK(read_done.byte_len == 1u << 20);
  CHECK(std::memcmp(server.buffer.data() + (1 << 20), client.buffer.data(), 1 << 20) == 0);

  REQUIRE(client.h->call([&](core::Device&, core::IwarpConnectionManager& cm) { return cm.disconnect(client_id); }) ==
          0);
  CHECK(client.next_event().type == IwarpEventType::disconnected);
  CHECK(server.next_event().type == IwarpEventType::disconnected);
}

TEST_CASE("an iWARP connect where nothing listens is rejected with ECONNREFUSED", "[iwarp]") {
  IwarpNode client("127.83.90.3");
  client.h->call([&](core::Device&, core::IwarpConnectionManager& cm) {
    return cm.connect(endpoint("127.83.90.4", 17175), client.qpn, {}).ok();
  });
  const core::IwarpEvent e = client.next_event();
  CHECK(e.type == IwarpEventType::rejected);
  CHECK(e.status == ECONNREFUSED);
}

TEST_CASE("a stream of RDMA Writes larger than the host's buffers keeps flowing to the end", "[iwarp]") {
  // 32 MiB in 64 KiB Writes, 32 in flight: each connection holds at most 256 KiB taken from the
  // engine, so the rest must be pulled again as the kernel takes it.
  IwarpNode server("127.83.90.5"), client("127.83.90.6");
  const core::TcpEndpoint service = endpoint("127.83.90.5", 17176);
  REQUIRE(server.h->listen(service).ok());
  client.h->call(
      [&](core::Device&, core::IwarpConnectionManager& cm) { return cm.connect(service, client.qpn, {}).ok(); });
  const core::IwarpEvent request = server.next_event();
  REQUIRE(server.h->call([&](core::Device&, core::IwarpConnectionManager& cm) {
    return cm.accept(request.id, server.qpn, {});
  }) == 0);
  REQUIRE(client.next_event().type == IwarpEventType::established);
  core::SendWr write;
  write.opcode = core::WrOpcode::rdma_write;
  write.flags = core::send_flags::signaled;
  write.sg_list = {{client.addr(0), 1 << 16, client.mr.lkey}};
  write.remote_addr = server.addr(0);
  write.rkey = server.mr.rkey;
  constexpr int kWrites = 512, kDepth = 32;
  int posted = 0;
  for (int done = 0; done < kWrites; ++done) {
    while (posted < kWrites && posted - done < kDepth) {
      write.wr_id = static_cast<std::uint64_t>(posted++);
      REQUIRE(client.post(write) == 0);
    }
    const core::Wc wc = client.next_wc();
    REQUIRE(wc.status == core::WcStatus::success);
    REQUIRE(wc.wr_id == static_cast<std::uint64_t>(done));
  }
}

namespace {

// Polls `node`'s CQ without pause, as perftest does, until `done()` holds or two seconds pass;
// whether it held. Every poll finds nothing, so the node holds its busy-poll lease throughout.
template <class F>
bool busy_poll_until(IwarpNode& node, F&& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  core::Wc wc;
  while (!done()) {
    if (node.h->poll_cq(node.cq, {&wc, 1}) != 0 || std::chrono::steady_clock::now() > end) return false;
  }
  return true;
}

// Busy-polls `server` for 5 ms, with an RDMA Write from `client` arriving in the middle: it
// wakes the server's progress thread, which then waits as the lease says (a thread asleep since
// before the lease began still waits for the bytes too).
void hold_lease(IwarpNode& server, IwarpNode& client) {
  const auto for_ms = [&](int ms) {
    const auto start = std::chrono::steady_clock::now();
    return busy_poll_until(server, [&] { return std::chrono::steady_clock::now() - start > ms * 1ms; });
  };
  REQUIRE(for_ms(2));
  core::SendWr write;
  write.opcode = core::WrOpcode::rdma_write;
  write.sg_list = {{client.addr(1 << 20), 64, client.mr.lkey}};
  write.remote_addr = server.addr(1 << 20);
  write.rkey = server.mr.rkey;
  REQUIRE(client.post(write) == 0);
  REQUIRE(for_ms(3));
}

bool has_event(IwarpEvents& node) {
  std::lock_guard lock(node.mutex);
  return !node.events.empty();
}

}  // namespace

TEST_CASE("a busy-polling application's connection still ends when its peer closes it", "[iwarp]") {
  // In its lease the progress thread leaves the FPDUs to the polling application, which does
  // not read a connection's end: the FIN must still reach the CM.
  IwarpNode server("127.83.90.7"), client("127.83.90.8");
  const std::uint32_t client_id = connect_nodes(server, client, endpoint("127.83.90.7", 17177));
  hold_lease(server, client);
  REQUIRE(client.h->call([&](core::Device&, core::IwarpConnectionManager& cm) { return cm.disconnect(client_id); }) ==
          0);
  CHECK(busy_poll_until(server, [&] { return has_event(server); }));
  CHECK(server.next_event().type == IwarpEventType::disconnected);
}

TEST_CASE("an RDMA Write that arrives after the application stopped polling is placed", "[iwarp]") {
  // ib_write_lat's shape: the target polls, then spins on its buffer with no verbs call, and
  // only the progress thread can place the Write once the lease has run out.
  IwarpNode server("127.83.90.9"), client("127.83.90.10");
  connect_nodes(server, client, endpoint("127.83.90.9", 17178));
  hold_lease(server, client);
  std::memset(client.buffer.data(), 0x5a, 64);
  core::SendWr write;
  write.opcode = core::WrOpcode::rdma_write;
  write.sg_list = {{client.addr(0), 64, client.mr.lkey}};
  write.remote_addr = server.addr(0);
  write.rkey = server.mr.rkey;
  REQUIRE(client.post(write) == 0);
  CHECK(test::eventually([&] { return std::memcmp(server.buffer.data(), client.buffer.data(), 64) == 0; }));
}
