// The connection manager through softrdmad: clients of one daemon connect to each other over
// its CM, each listener and connection is its owner's alone, and a client that goes ends its
// connections with a DREQ. Also the codec of the CM's requests and events on the socket.
//
// Addresses: 127.83.110.0/24 and up (host_fixture.hpp's convention).
#include <catch2/catch.hpp>
#include <deque>
#include <mutex>

#include "emulator/host/daemon_cm_codec.hpp"
#include "tests/host/daemon_fixture.hpp"
#include "wire/cm_mad.hpp"

namespace {

using namespace test;
using core::CmEventType;

constexpr std::uint64_t kService = wire::kIpCmServiceIdPrefix | 0x06 << 16 | 7471;  // RDMA_PS_TCP, port 7471

// A daemon client and the CM events its event thread hands over.
struct CmClient {
  explicit CmClient(Daemon& d) : link(d.connect()) {
    link->set_cm_handler([this](const core::CmEvent& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    });
  }
  // The next event, which must come within the fixture's patience and be of `type`.
  core::CmEvent next(CmEventType type) {
    core::CmEvent e;
    const bool got = eventually([&] {
      std::lock_guard lock(mutex);
      if (events.empty()) return false;
      e = events.front();
      events.pop_front();
      return true;
    });
    REQUIRE(got);
    CHECK(e.type == type);
    return e;
  }

  std::unique_ptr<DaemonClient> link;
  std::mutex mutex;
  std::deque<core::CmEvent> events;
};

core::CmConnect request_to(const core::Gid& gid) {
  core::CmConnect c;
  c.service_id = kService;
  c.remote_gid = gid;
  c.qpn = 0x11;
  c.starting_psn = 0x123;
  c.private_data = {1, 2, 3};
  return c;
}

// The active side's connection and the passive side's, established.
std::pair<std::uint32_t, std::uint32_t> establish(Daemon& d, CmClient& active, CmClient& passive) {
  const auto id = active.link->cm_connect(request_to(d.host->gid()));
  REQUIRE(id.ok());
  const core::CmEvent request = passive.next(CmEventType::request);
  core::CmAccept accept;
  accept.qpn = 0x22;
  REQUIRE(passive.link->cm_accept(request.id, accept) == 0);
  const core::CmEvent reply = active.next(CmEventType::reply);
  CHECK(reply.id == *id);
  REQUIRE(active.link->cm_ready(*id, {}) == 0);
  passive.next(CmEventType::established);
  return {*id, request.id};
}

}  // namespace

TEST_CASE("daemon cm: two clients of one daemon connect through its CM and disconnect", "[daemon][cm]") {
  Daemon d("127.83.110.1");
  CmClient server(d), client(d);
  REQUIRE(server.link->cm_listen(kService).ok());
  const auto [active, passive] = establish(d, client, server);
  REQUIRE(client.link->cm_disconnect(active, {}) == 0);
  server.next(CmEventType::disconnect_request);
  REQUIRE(server.link->cm_disconnect(passive, {}) == 0);
  client.next(CmEventType::disconnected);
}

TEST_CASE("daemon cm: a listener or connection of another client is EINVAL and stays its owner's", "[daemon][cm]") {
  Daemon d("127.83.111.1");
  CmClient server(d), client(d), other(d);
  const auto listener = server.link->cm_listen(kService);
  REQUIRE(listener.ok());
  CHECK(other.link->cm_listen(kService).error() == EADDRINUSE);  // one device, one listener per service
  CHECK(other.link->cm_stop_listening(*listener) == EINVAL);
  const auto [active, passive] = establish(d, client, server);
  CHECK(other.link->cm_disconnect(passive, {}) == EINVAL);
  CHECK(other.link->cm_reject(active, {}) == EINVAL);
  core::CmAccept accept;
  CHECK(other.link->cm_accept(passive, accept) == EINVAL);
  REQUIRE(client.link->cm_disconnect(active, {}) == 0);
  server.next(CmEventType::disconnect_request);  // the owner still hears its connection's events
}

TEST_CASE("daemon cm: a client that goes ends its connections with a DREQ and frees its service", "[daemon][cm]") {
  Daemon d("127.83.112.1");
  CmClient client(d);
  {
    CmClient server(d);
    REQUIRE(server.link->cm_listen(kService).ok());
    establish(d, client, server);
  }  // its connection closes, as when the process exits or is killed
  client.next(CmEventType::disconnect_request);
  CmClient next(d);
  CHECK(eventually([&] { return next.link->cm_listen(kService).ok(); }));
}

TEST_CASE("daemon cm codec: requests and events read back as written", "[daemon][cm]") {
  std::vector<std::uint8_t> bytes;
  host::daemon::Writer out(bytes);
  const core::CmConnect connect = request_to(core::Gid{0xfe, 0x80});
  host::daemon::put(out, connect);
  core::CmEvent event;
  event.type = CmEventType::rejected;
  event.id = 7;
  event.remote_gid[15] = 9;
  event.mad = wire::CmMad{{}, wire::CmRej{.local_comm_id = 1, .remote_comm_id = 7, .reason = 28}};
  host::daemon::put(out, event);

  host::daemon::Reader in(bytes);
  core::CmConnect connect_back;
  host::daemon::get(in, connect_back);
  core::CmEvent event_back;
  REQUIRE(host::daemon::get(in, event_back));
  CHECK(connect_back.service_id == connect.service_id);
  CHECK(connect_back.remote_gid == connect.remote_gid);
  CHECK(connect_back.starting_psn == connect.starting_psn);
  CHECK(connect_back.private_data == connect.private_data);
  CHECK(event_back.id == 7);
  CHECK(event_back.remote_gid == event.remote_gid);
  REQUIRE(event_back.mad.has_value());
  CHECK(std::get<wire::CmRej>(event_back.mad->message).reason == 28);

  bytes.resize(bytes.size() - 1);  // a MAD cut short is not an event
  host::daemon::Reader short_in(bytes);
  host::daemon::get(short_in, connect_back);
  CHECK_FALSE(host::daemon::get(short_in, event_back));
}
