// An embedded iWARP host with one PD, CQ, 4 MiB MR and RC QP in INIT, and its CM's events
// collected for the test to wait on.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emulator/host/iwarp_host.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/iwarp_consumer_objects.hpp"
#include "tests/net/eventually.hpp"

namespace test {

namespace core = softrdma::core;
namespace host = softrdma::host;

// A CM event handler's events, for a test to wait on in order.
struct IwarpEvents {
  void push(const core::IwarpEvent& e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
  }
  // Waits for the next CM event.
  core::IwarpEvent next_event() {
    REQUIRE(test::eventually([&] {
      std::lock_guard lock(mutex);
      return !events.empty();
    }));
    std::lock_guard lock(mutex);
    core::IwarpEvent e = events.front();
    events.pop_front();
    return e;
  }

  std::mutex mutex;
  std::deque<core::IwarpEvent> events;
};

struct IwarpNode : IwarpEvents {
  explicit IwarpNode(const std::string& ip) : buffer(4 << 20) {
    host::IwarpHostConfig config;
    config.ip = ip;
    auto started = host::IwarpHost::start(config);
    REQUIRE(started.host);
    h = std::move(started.host);
    h->set_event_handler([this](const core::IwarpEvent& e) { push(e); });
    h->call([&](core::Device& d, core::IwarpConnectionManager&) {
      const IwarpConsumerObjects o = create_consumer_objects(d, buffer, 256, {64, 64, 2, 2, 0});
      pd = o.pd;
      cq = o.cq;
      qpn = o.qpn;
      mr = o.mr;
    });
  }

  std::uint64_t addr(std::size_t offset) const { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }

  // Waits for the next work completion.
  core::Wc next_wc() {
    core::Wc wc;
    REQUIRE(test::eventually([&] { return h->poll_cq(cq, {&wc, 1}) == 1; }));
    return wc;
  }

  int post(const core::SendWr& wr) {
    return h->call([&](core::Device& d, core::IwarpConnectionManager&) { return d.post_send(0, qpn, wr); });
  }

  std::vector<std::uint8_t> buffer;
  std::unique_ptr<host::IwarpHost> h;
  std::uint32_t pd = 0, cq = 0, qpn = 0;
  core::MrKeys mr;
};

inline core::TcpEndpoint endpoint(const std::string& ip, std::uint16_t port) {
  return {*softrdma::net::parse_gid(ip), port};
}

// Connects client's QP to server's through their CMs (server listening on `service`), and
// waits until both have it established; the client's connection ID.
inline std::uint32_t connect_nodes(IwarpNode& server, IwarpNode& client, const core::TcpEndpoint& service) {
  REQUIRE(server.h->listen(service).ok());
  core::MpaOffer offer;
  offer.ird = offer.ord = 4;
  REQUIRE(client.h->call(
      [&](core::Device&, core::IwarpConnectionManager& cm) { return cm.connect(service, client.qpn, offer).ok(); }));
  const core::IwarpEvent request = server.next_event();
  REQUIRE(request.type == core::IwarpEventType::connect_request);
  REQUIRE(server.h->call([&](core::Device&, core::IwarpConnectionManager& cm) {
    return cm.accept(request.id, server.qpn, offer);
  }) == 0);
  REQUIRE(server.next_event().type == core::IwarpEventType::established);
  const core::IwarpEvent established = client.next_event();
  REQUIRE(established.type == core::IwarpEventType::established);
  return established.id;
}

}  // namespace test
