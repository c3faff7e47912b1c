// softrdmad's srdmaiw0 in one process: an IwarpHost over ProcessMemory and a DaemonServer on its
// socket, with DaemonClients speaking the real protocol to it, as daemon_test.cpp does for
// srdma0. Connections go through the iWARP CM's requests and events (daemon_iwarp_codec.hpp).
//
// Addresses: 127.83.97.0/24 (host_fixture.hpp's convention).
#include <catch2/catch.hpp>
#include <cerrno>

#include "emulator/host/daemon_protocol.hpp"
#include "tests/host/daemon_fixture.hpp"
#include "tests/host/iwarp_fixture.hpp"

namespace {

using namespace test;

constexpr std::uint32_t kAllAccess = core::access::local_write | core::access::remote_write | core::access::remote_read;

struct IwarpDaemon {
  explicit IwarpDaemon(const std::string& ip) {
    host::IwarpHostConfig config;
    config.ip = ip;
    config.memory = &memory;
    host::IwarpHostStart started = host::IwarpHost::start(config);
    INFO(started.error);
    REQUIRE(started.host);
    host = std::move(started.host);
    socket = dir.path + "/d.sock";
    host::DaemonOptions options;
    options.socket_path = socket;
    host::DaemonStart s = host::DaemonServer::start(*host, memory, options);
    INFO(s.error);
    REQUIRE(s.server);
    server = std::move(s.server);
  }

  TempDir dir;
  host::ProcessMemory memory;  // before the host, which reads through it
  std::unique_ptr<host::IwarpHost> host;
  std::string socket;
  std::unique_ptr<host::DaemonServer> server;
};

// One client of srdmaiw0: a PD, a CQ, 64 KiB registered for everything, an RC QP in INIT, and
// the CM events it hears.
struct IwarpClient : IwarpEvents {
  explicit IwarpClient(const std::string& socket) : buffer(64 * 1024) {
    host::DaemonConnect c = DaemonClient::connect(socket);
    INFO(c.error);
    REQUIRE(c.client);
    link = std::move(c.client);
    link->set_iw_handler([this](const core::IwarpEvent& e) { push(e); });
    pd = *link->alloc_pd();
    cq = *link->create_cq(64);
    const auto keys = link->reg_mr(pd, addr(0), buffer.size(), addr(0), kAllAccess);
    REQUIRE(keys.ok());
    mr = *keys;
    core::QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.cap = {16, 16, 2, 2, 0};
    qpn = link->create_qp(init)->qpn;
    to_init(*link, qpn, kAllAccess);
  }
  std::uint64_t addr(std::size_t offset) const { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }

  core::Wc next_wc() {
    core::Wc wc;
    REQUIRE(eventually([&] { return link->poll_cq(cq, {&wc, 1}) == 1; }));
    return wc;
  }
  void post(const core::SendWr& wr) {
    std::size_t posted = 0;
    REQUIRE(link->post_send(qpn, {&wr, 1}, posted) == 0);
  }

  std::unique_ptr<DaemonClient> link;
  std::vector<std::uint8_t> buffer;
  std::uint32_t pd = 0, cq = 0, qpn = 0;
  core::MrKeys mr;
};

core::MpaOffer offer_of(std::uint16_t depth) {
  core::MpaOffer offer;
  offer.ird = offer.ord = depth;
  offer.private_data = {1, 2, 3};
  return offer;
}

}  // namespace

TEST_CASE("daemon: two clients of srdmaiw0 connect through its iWARP CM, SEND, READ and disconnect", "[daemon]") {
  IwarpDaemon d("127.83.97.1");
  IwarpClient server(d.socket), client(d.socket);
  const core::TcpEndpoint service = endpoint("127.83.97.1", 17190);
  const auto listener = server.link->iw_listen(service);
  REQUIRE(listener.ok());
  const auto id = client.link->iw_connect(service, client.qpn, offer_of(4));
  REQUIRE(id.ok());
  const core::IwarpEvent request = server.next_event();
  REQUIRE(request.type == core::IwarpEventType::connect_request);
  CHECK(request.listener == *listener);
  CHECK(request.private_data == std::vector<std::uint8_t>{1, 2, 3});
  REQUIRE(server.link->iw_accept(request.id, server.qpn, offer_of(4)) == 0);
  CHECK(server.next_event().type == core::IwarpEventType::established);
  const core::IwarpEvent established = client.next_event();
  REQUIRE(established.type == core::IwarpEventType::established);
  CHECK(established.id == *id);

  core::RecvWr recv;
  recv.wr_id = 5;
  recv.sg_list = {{server.addr(0), 64, server.mr.lkey}};
  std::size_t posted = 0;
  REQUIRE(server.link->post_recv(server.qpn, {&recv, 1}, posted) == 0);
  fill_pattern(client.buffer, 0, 64, 7);
  client.post(remote_wr(core::WrOpcode::send, 6, {{client.addr(0), 64, client.mr.lkey}}, 0, 0));
  const core::Wc received = server.next_wc();
  CHECK(received.status == core::WcStatus::success);
  CHECK(received.byte_len == 64);
  CHECK(std::equal(client.buffer.begin(), client.buffer.begin() + 64, server.buffer.begin()));
  CHECK(client.next_wc().status == core::WcStatus::success);

  fill_pattern(server.buffer, 4096, 8192, 9);
  client.post(remote_wr(core::WrOpcode::rdma_read, 7, {{client.addr(4096), 8192, client.mr.lkey}}, server.addr(4096),
                        server.mr.rkey));
  CHECK(client.next_wc().status == core::WcStatus::success);
  CHECK(std::equal(server.buffer.begin() + 4096, server.buffer.begin() + 12288, client.buffer.begin() + 4096));

  REQUIRE(client.link->iw_disconnect(*id) == 0);
  CHECK(client.next_event().type == core::IwarpEventType::disconnected);
  CHECK(server.next_event().type == core::IwarpEventType::disconnected);
  CHECK(server.link->iw_stop_listening(*listener) == 0);
}

TEST_CASE("daemon: srdmaiw0's clients cannot use each other's QPs or listeners, and the CMs stay apart", "[daemon]") {
  IwarpDaemon d("127.83.97.2");
  IwarpClient a(d.socket), b(d.socket);
  const core::TcpEndpoint service = endpoint("127.83.97.2", 17191);
  const auto listener = a.link->iw_listen(service);
  REQUIRE(listener.ok());
  CHECK(b.link->iw_stop_listening(*listener) == EINVAL);
  CHECK(b.link->iw_connect(service, a.qpn, offer_of(1)).error() == EINVAL);
  CHECK(a.link->iw_accept(12345, a.qpn, offer_of(1)) == EINVAL);
  // srdmaiw0 has no InfiniBand CM and no multicast, as an iWARP RNIC.
  CHECK(a.link->cm_listen(0x106000000004e20ull).error() == EOPNOTSUPP);
  CHECK(a.link->attach_mcast(a.qpn, core::Gid{}) == EOPNOTSUPP);

  // A request that reached a listener whose client went is refused.
  a.link.reset();
  const auto refused = b.link->iw_connect(service, b.qpn, offer_of(1));
  REQUIRE(refused.ok());
  const core::IwarpEvent e = b.next_event();
  CHECK((e.type == core::IwarpEventType::rejected || e.type == core::IwarpEventType::connect_error));

  // srdma0's daemon has no iWARP CM.
  Daemon roce("127.83.97.3");
  CHECK(roce.connect()->iw_listen(endpoint("127.83.97.3", 17192)).error() == EOPNOTSUPP);
}
