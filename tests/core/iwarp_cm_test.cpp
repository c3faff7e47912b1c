// The iWARP connection manager between two engines, joined by a simulated TCP: listen,
// connect with private data, the MPA exchange, accept or reject, data on the streams, and
// every way a connection ends.
#include "emulator/core/iwarp_cm.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "tests/core/engine_fixture.hpp"

namespace {

using namespace test;
using core::IwarpEventType;
using core::QpState;
using Bytes = std::vector<std::uint8_t>;

struct Node {
  Node(std::uint8_t octet) : side(ipv4_gid(octet), 1 << 16), cm(*side.dev) {}
  core::TcpEndpoint at(std::uint16_t port) const { return {side.gid(), port}; }

  // A QP in INIT, as rdma_cm's consumer creates it before connecting or accepting.
  std::uint32_t new_qp() {
    core::QpInitAttr init;
    init.pd = side.pd;
    init.send_cq = side.send_cq;
    init.recv_cq = side.recv_cq;
    init.cap = {16, 16, 2, 2, 0};
    const std::uint32_t qpn = side.dev->create_qp(init)->qpn;
    core::QpAttr attr;
    attr.qp_state = QpState::init;
    attr.port_num = 1;
    attr.qp_access_flags = core::access::local_write | core::access::remote_read | core::access::remote_write;
    namespace mask = core::qp_attr;
    REQUIRE(side.dev->modify_qp(0, qpn, attr, mask::state | mask::pkey_index | mask::port | mask::access_flags) == 0);
    return qpn;
  }

  std::vector<core::IwarpEvent> events() {
    std::vector<core::IwarpEvent> out;
    while (auto e = cm.next_event()) out.push_back(std::move(*e));
    return out;
  }

  Side side;
  core::IwarpConnectionManager cm;
};

// TCP between two nodes: bytes arrive whole and at once; a close reaches the peer after them.
struct Tcp {
  Tcp(Node& x, Node& y) : nodes{&x, &y} {}

  void run() {
    for (bool moved = true; moved;) {
      moved = false;
      for (int n = 0; n < 2; ++n) moved |= act(n) | send(n);
    }
  }

  std::uint32_t mss = 1460;
  std::map<std::uint16_t, std::pair<int, std::uint32_t>> listening;  // port: node, listener
  std::map<std::pair<int, std::uint32_t>, std::pair<int, std::uint32_t>> peer_of;
  Node* nodes[2];

 private:
  bool act(int n) {
    bool moved = false;
    while (const auto a = nodes[n]->cm.next_action()) {
      moved = true;
      using Kind = core::TcpAction::Kind;
      if (a->kind == Kind::listen) listening[a->endpoint.port] = {n, a->handle};
      if (a->kind == Kind::stop_listening) listening.erase(a->endpoint.port);
      if (a->kind == Kind::connect) connect(n, a->handle, a->endpoint);
      if (a->kind == Kind::close) close(n, a->handle);
    }
    return moved;
  }

  void connect(int n, std::uint32_t id, const core::TcpEndpoint& remote) {
    const auto l = listening.find(remote.port);
    if (l == listening.end()) return nodes[n]->cm.tcp_failed(id, ECONNREFUSED);
    const int m = l->second.first;
    const core::TcpEndpoint local = nodes[n]->at(40000);
    const std::uint32_t accepted = nodes[m]->cm.tcp_accepted(l->second.second, remote, local, mss);
    peer_of[{n, id}] = {m, accepted};
    peer_of[{m, accepted}] = {n, id};
    nodes[n]->cm.tcp_connected(id, local, mss);
  }

  void close(int n, std::uint32_t id) {
    send_all(n, id);  // what was written before the close still arrives
    const auto p = peer_of.find({n, id});
    if (p == peer_of.end()) return;
    const auto [m, peer] = p->second;
    peer_of.erase({m, peer});
    peer_of.erase(p);
    nodes[m]->cm.tcp_closed(peer);
  }

  bool send(int n) {
    bool moved = false;
    while (const auto id = nodes[n]->cm.next_ready()) moved |= send_all(n, *id);
    return moved;
  }

  bool send_all(int n, std::uint32_t id) {
    core::UninitialisedBytes out;
    while (nodes[n]->cm.tcp_transmit(id, out)) {
    }
    const auto p = peer_of.find({n, id});
    if (out.empty() || p == peer_of.end()) return false;
    nodes[p->second.first]->cm.tcp_received(p->second.second, out);
    return true;
  }
};

core::MpaOffer offer(const std::string& pd, std::uint16_t ird = 4, std::uint16_t ord = 4) {
  core::MpaOffer o;
  o.ird = ird;
  o.ord = ord;
  o.private_data.assign(pd.begin(), pd.end());
  return o;
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Connected {
  Connected() : server(2), client(1), tcp(client, server) {
    REQUIRE(server.cm.listen(server.at(7174)).ok());
    tcp.run();  // listening before the client connects
    client_qp = client.new_qp();
    server_qp = server.new_qp();
    client_id = *client.cm.connect(server.at(7174), client_qp, offer("hi", 2, 8));
    tcp.run();
    const auto requests = server.events();
    REQUIRE(requests.size() == 1);
    request = requests[0];
    server_id = request.id;
    REQUIRE(server.cm.accept(server_id, server_qp, offer("welcome", 4, 4)) == 0);
    tcp.run();
  }

  Node server, client;
  Tcp tcp;
  std::uint32_t client_qp = 0, server_qp = 0, client_id = 0, server_id = 0;
  core::IwarpEvent request;
};

}  // namespace

TEST_CASE("an iWARP connection carries private data both ways and puts both QPs in RTS", "[iwarp_cm]") {
  Connected c;
  CHECK(c.request.type == IwarpEventType::connect_request);
  CHECK(c.request.private_data == bytes("hi"));
  CHECK(c.request.ird == 2);
  CHECK(c.request.ord == 8);
  CHECK(c.request.remote.address == c.client.side.gid());

  const auto server_events = c.server.events();
  REQUIRE(server_events.size() == 1);
  CHECK(server_events[0].type == IwarpEventType::established);
  const auto client_events = c.client.events();
  REQUIRE(client_events.size() == 1);
  CHECK(client_events[0].type == IwarpEventType::established);
  CHECK(client_events[0].private_data == bytes("welcome"));
  CHECK(client_events[0].ord == 4);  // 8 asked, the server's IRD is 4
  CHECK(c.server.side.dev->qp(c.server_qp)->state() == QpState::rts);
  CHECK(c.client.side.dev->qp(c.client_qp)->state() == QpState::rts);
  CHECK(int{c.server.side.dev->qp(c.server_qp)->attr.max_rd_atomic} == 2);  // the client's IRD

  // Data over the stream: a Send from the client, an RDMA Read by the server.
  core::RecvWr r;
  r.wr_id = 5;
  r.sg_list = {c.server.side.sge(0, 64)};
  REQUIRE(c.server.side.dev->post_recv(c.server_qp, r) == 0);
  std::memcpy(c.client.side.buffer.data(), "ping", 4);
  core::SendWr s;
  s.opcode = core::WrOpcode::send;
  s.flags = core::send_flags::signaled;
  s.sg_list = {c.client.side.sge(0, 4)};
  REQUIRE(c.client.side.dev->post_send(0, c.client_qp, s) == 0);
  core::SendWr read;
  read.wr_id = 6;
  read.opcode = core::WrOpcode::rdma_read;
  read.flags = core::send_flags::signaled;
  read.sg_list = {c.server.side.sge(100, 4)};
  read.remote_addr = c.client.side.addr(0);
  read.rkey = c.client.side.mr.rkey;
  REQUIRE(c.server.side.dev->post_send(0, c.server_qp, read) == 0);
  c.tcp.run();
  CHECK(c.server.side.poll(c.server.side.recv_cq).at(0).byte_len == 4);
  CHECK(c.server.side.poll(c.server.side.send_cq).at(0).wr_id == 6);
  CHECK(std::memcmp(c.server.side.buffer.data() + 100, "ping", 4) == 0);
}

TEST_CASE("rdma_disconnect on one side ends the connection on both, flushing the QPs", "[iwarp_cm]") {
  Connected c;
  c.server.events();
  c.client.events();
  core::RecvWr r;
  r.wr_id = 9;
  r.sg_list = {c.server.side.sge(0, 64)};
  REQUIRE(c.server.side.dev->post_recv(c.server_qp, r) == 0);
  REQUIRE(c.client.cm.disconnect(c.client_id) == 0);
  c.tcp.run();
  const auto client_events = c.client.events();
  REQUIRE(client_events.size() == 1);
  CHECK(client_events[0].type == IwarpEventType::disconnected);
  const auto server_events = c.server.events();
  REQUIRE(server_events.size() == 1);
  CHECK(server_events[0].type == IwarpEventType::disconnected);
  CHECK(c.server.side.dev->qp(c.server_qp)->state() == QpState::err);
  CHECK(c.server.side.poll(c.server.side.recv_cq).at(0).status == core::WcStatus::wr_flush_err);
  CHECK(c.client.cm.disconnect(c.client_id) == EINVAL);  // once

  // Each side counted its half of one connection, and the same bytes the other way.
  const core::IwarpCounters& sc = c.server.side.dev->iwarp_counters();
  const core::IwarpCounters& cc = c.client.side.dev->iwarp_counters();
  CHECK(cc.connections_initiated == 1);
  CHECK(cc.connections_accepted == 0);
  CHECK(sc.connections_accepted == 1);
  CHECK(sc.connections_initiated == 0);
  CHECK(cc.disconnects == 1);
  CHECK(sc.disconnects == 1);
  CHECK(cc.tcp_bytes_sent > 0);
  CHECK(cc.tcp_bytes_sent == sc.tcp_bytes_received);
  CHECK(sc.tcp_bytes_sent == cc.tcp_bytes_received);
  CHECK(cc.terminates_sent + cc.terminates_received + sc.terminates_sent + sc.terminates_received == 0);
}

TEST_CASE("a rejected iWARP connection reaches the client with the server's private data", "[iwarp_cm]") {
  Node server(2), client(1);
  Tcp tcp(client, server);
  REQUIRE(server.cm.listen(server.at(9)).ok());
  tcp.run();
  const std::uint32_t id = *client.cm.connect(server.at(9), client.new_qp(), offer("let me in"));
  tcp.run();
  const auto request = server.events().at(0);
  REQUIRE(server.cm.reject(request.id, bytes("no")) == 0);
  tcp.run();
  const auto events = client.events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == IwarpEventType::rejected);
  CHECK(events[0].id == id);
  CHECK(events[0].status == ECONNREFUSED);
  CHECK(events[0].private_data == bytes("no"));
  CHECK(server.events().empty());
  CHECK(server.side.dev->iwarp_counters().rejects_sent == 1);
  CHECK(client.side.dev->iwarp_counters().connects_refused == 1);
  CHECK(client.side.dev->iwarp_counters().connections_initiated == 0);
}

TEST_CASE("connecting where nobody listens is rejected as TCP refused it", "[iwarp_cm]") {
  Node server(2), client(1);
  Tcp tcp(client, server);
  client.cm.connect(server.at(1), client.new_qp(), offer(""));
  tcp.run();
  const auto events = client.events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == IwarpEventType::rejected);
  CHECK(events[0].status == ECONNREFUSED);
}

TEST_CASE("the iWARP CM refuses what rdma_cm would", "[iwarp_cm]") {
  Node n(1);
  REQUIRE(n.cm.listen({ipv4_gid(0), 80}).ok());  // 127.0.0.0: a different address, same port
  core::TcpEndpoint any;
  any.port = 80;
  CHECK(n.cm.listen(any).error() == EADDRINUSE);
  CHECK(n.cm.listen(n.at(81)).ok());
  CHECK(n.cm.connect(n.at(81), 12345, offer("")).error() == EINVAL);  // no such QP
  CHECK(n.cm.connect(n.at(81), n.new_qp(), offer(std::string(600, 'x'))).error() == EINVAL);
  CHECK(n.cm.accept(77, n.new_qp(), offer("")) == EINVAL);
  CHECK(n.cm.disconnect(77) == EINVAL);
  CHECK(n.cm.stop_listening(77) == EINVAL);
}

TEST_CASE("a peer that closes the TCP connection ends the QP and the consumer hears of it", "[iwarp_cm]") {
  Connected c;
  c.server.events();
  c.client.events();
  c.tcp.peer_of.clear();  // the simulated network forgets the pair: the server's close goes nowhere
  c.client.cm.tcp_closed(c.client_id);
  const auto events = c.client.events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == IwarpEventType::disconnected);
  CHECK(c.client.side.dev->qp(c.client_qp)->state() == QpState::err);
}

TEST_CASE("destroying an established connection ends its QP without an event", "[iwarp_cm]") {
  Connected c;
  c.client.events();
  c.server.events();
  c.client.cm.destroy(c.client_id);
  CHECK(c.client.events().empty());
  CHECK(c.client.side.dev->qp(c.client_qp)->state() == QpState::err);
  c.tcp.run();
  CHECK(c.server.events().at(0).type == IwarpEventType::disconnected);
}
