// The udp backend alone: bursts between two sockets, the addresses and ports a packet
// arrives with, packets it cannot route, and the datagrams of the multicast groups it joins
// (udp_groups.hpp), on loopback addresses 127.83.3x.y and 127.77.40.x.
#include "emulator/net/udp_backend.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/net/eventually.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"
#include "wire/opcode.hpp"

namespace test {
namespace {

namespace core = softrdma::core;
namespace net = softrdma::net;
using namespace std::chrono_literals;

std::unique_ptr<net::UdpBackend> open_backend(const char* ip) {
  net::UdpOpenResult r = net::UdpBackend::open(ip);
  INFO(r.error);
  REQUIRE(r.backend);
  return std::move(r.backend);
}

core::TxPacket packet(const net::UdpBackend& from, const net::UdpBackend& to, std::uint8_t tag, std::size_t length) {
  core::TxPacket p;
  p.route.src = from.local_gid();
  p.route.dst = to.local_gid();
  p.route.src_port = from.local_port();  // already the socket's port: sent as it is
  p.bytes.assign(length, tag);
  return p;
}

// Receives until `n` packets came, for `limit` at most (copied out: the backend reuses its
// slots).
std::vector<std::pair<core::RxPacket, std::vector<std::uint8_t>>> receive(net::UdpBackend& b, std::size_t n,
                                                                          std::chrono::milliseconds limit = 10s) {
  std::vector<std::pair<core::RxPacket, std::vector<std::uint8_t>>> got;
  eventually(
      [&] {
        for (const core::RxPacket& p : b.receive())
          got.emplace_back(p, std::vector<std::uint8_t>(p.bytes.begin(), p.bytes.end()));
        return got.size() >= n;
      },
      limit);
  return got;
}

TEST_CASE("a burst goes out with sendmmsg and arrives with its addresses", "[udp]") {
  auto a = open_backend("127.83.30.1");
  auto b = open_backend("127.83.30.2");
  CHECK(a->is_ipv4());
  CHECK(a->local_address() == "127.83.30.1");
  CHECK(a->local_port() == 4791);
  in_addr ip{};
  inet_pton(AF_INET, "127.83.30.1", &ip);
  CHECK(a->local_gid() == net::gid_of(ip));
  CHECK((fcntl(a->fd(), F_GETFD) & FD_CLOEXEC) != 0);  // a program this one runs does not inherit it

  std::vector<core::TxPacket> burst;
  for (std::uint8_t i = 0; i < 100; ++i) burst.push_back(packet(*a, *b, i, 20 + i));
  CHECK(a->send(burst) == 100);  // more than one sendmmsg's worth
  const auto got = receive(*b, 100);
  REQUIRE(got.size() == 100);
  for (std::uint8_t i = 0; i < 100; ++i) {
    const core::RxPacket& p = got[i].first;
    CHECK(got[i].second == std::vector<std::uint8_t>(20 + i, i));  // in order, intact
    CHECK(p.src_gid == a->local_gid());
    CHECK(p.dst_gid == b->local_gid());
    CHECK(p.src_port == 4791);
    CHECK_FALSE(p.icrc_checked);  // a socket sees no IPv4 ID: the engine checks
  }
  CHECK(a->counters().tx_packets == 100);
  CHECK(b->counters().rx_packets == 100);
  CHECK(b->counters().rx_bytes == 100 * 20 + 99 * 100 / 2);
  CHECK(b->counters().rx_kernel_drops == 0);
}

TEST_CASE("a receive that finds the socket drained says none may be left, a full burst says some may", "[udp]") {
  auto a = open_backend("127.83.38.1");
  auto b = open_backend("127.83.38.2");
  std::vector<core::TxPacket> burst;
  for (std::uint8_t i = 0; i < net::UdpBackend::kBurst + 3; ++i) burst.push_back(packet(*a, *b, i, 20 + i));
  REQUIRE(a->send(burst) == burst.size());  // over loopback, queued on b's socket when send returns
  CHECK(b->receive().size() == net::UdpBackend::kBurst);
  CHECK(b->may_have_more());
  CHECK(b->receive().size() == 3);
  CHECK_FALSE(b->may_have_more());
}

TEST_CASE("a backend on a port the kernel picks sends from that port", "[udp]") {
  net::UdpOpenResult r = net::UdpBackend::open("127.83.33.1", 0);
  REQUIRE(r.backend);
  auto b = open_backend("127.83.33.2");
  CHECK(r.backend->local_port() != 0);
  std::vector<core::TxPacket> one{packet(*r.backend, *b, 7, 30)};
  REQUIRE(r.backend->send(one) == 1);
  const auto got = receive(*b, 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].first.src_port == r.backend->local_port());
}

TEST_CASE("a destination of the other address family is counted, not sent", "[udp]") {
  auto a = open_backend("127.83.32.1");
  auto b = open_backend("127.83.32.2");
  std::vector<core::TxPacket> burst{packet(*a, *b, 1, 30), packet(*a, *b, 2, 30), packet(*a, *b, 3, 30)};
  burst[1].route.dst = core::Gid{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  CHECK(a->send(burst) == 3);
  CHECK(a->counters().tx_no_route == 1);
  CHECK(a->counters().tx_packets == 2);
  const auto got = receive(*b, 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].second[0] == 1);
  CHECK(got[1].second[0] == 3);
}

// A RoCE packet as the engine hands it over: BTH, payload, ICRC for IPv4 ID 0.
core::TxPacket roce_packet(const net::UdpBackend& from, const net::UdpBackend& to, std::uint32_t psn,
                           std::size_t payload) {
  core::TxPacket p = packet(from, to, 0, 0);
  wire::IbRepr h;
  h.opcode = wire::opcode(wire::Transport::rc, wire::Operation::write_middle);
  h.dest_qp = 0x11;
  h.psn = psn;
  const std::size_t header = wire::info(h.opcode).header_length;
  p.bytes.assign(header + payload + wire::kIcrcLength, static_cast<std::uint8_t>(psn));
  h.emit_headers(p.bytes.data(), payload);
  const std::span<const std::uint8_t> covered(p.bytes.data(), p.bytes.size() - wire::kIcrcLength);
  wire::store_icrc(p.bytes.data() + covered.size(), core::icrc_between(p.route, covered));
  return p;
}

std::uint32_t stored_icrc(std::span<const std::uint8_t> bytes) {
  return wire::load_icrc(bytes.data() + bytes.size() - wire::kIcrcLength);
}

TEST_CASE("equal packets to one address leave as one GSO datagram, numbered, and arrive split", "[udp]") {
  auto a = open_backend("127.83.34.1");
  auto b = open_backend("127.83.34.2");
  // A 40 KiB message in 4 KiB packets, the last shorter; then a packet of its own.
  std::vector<core::TxPacket> burst;
  for (std::uint32_t k = 0; k < 10; ++k) burst.push_back(roce_packet(*a, *b, k, 4096));
  burst.push_back(roce_packet(*a, *b, 10, 100));
  burst.push_back(roce_packet(*a, *b, 11, 4096));
  REQUIRE(a->send(burst) == burst.size());
  CHECK(a->counters().tx_gso_datagrams == 1);
  CHECK(a->counters().tx_packets == 12);
  for (std::uint16_t k = 0; k < 12; ++k) {
    // Segment k of the datagram leaves with IPv4 ID k (the packet alone with 0), and its
    // ICRC is the one for that ID: the capture writes the same ID from the route.
    const core::TxPacket& p = burst[k];
    const std::uint16_t id = k < 11 ? k : 0;
    CHECK(p.route.ipv4_id == id);
    core::Endpoints as_sent = p.route;
    as_sent.ipv4_id = id;
    CHECK(stored_icrc(p.bytes) ==
          core::icrc_between(as_sent, std::span(p.bytes).first(p.bytes.size() - wire::kIcrcLength)));
  }
  const auto got = receive(*b, 12);
  REQUIRE(got.size() == 12);
  for (std::size_t k = 0; k < 12; ++k) {
    INFO("packet " << k);
    CHECK(got[k].second == burst[k].bytes);                 // in order, intact, cut where they were joined
    CHECK(got[k].first.ipv4_id == burst[k].route.ipv4_id);  // the receiver's guess is the sender's ID
  }
  CHECK(b->counters().rx_gro_datagrams == 1);  // loopback never segments: the datagram came whole
  CHECK(b->counters().rx_packets == 12);

  // Sent again (a retransmission from a queue the socket could not take at once), a packet
  // is renumbered for its new place, never shifted twice.
  std::vector<core::TxPacket> again(burst.begin() + 5, burst.begin() + 8);
  REQUIRE(a->send(again) == 3);
  for (std::uint16_t k = 0; k < 3; ++k) {
    CHECK(again[k].route.ipv4_id == k);
    CHECK(
        stored_icrc(again[k].bytes) ==
        core::icrc_between(again[k].route, std::span(again[k].bytes).first(again[k].bytes.size() - wire::kIcrcLength)));
  }
}

TEST_CASE("with GSO off equal packets leave one datagram each, all with IPv4 ID 0", "[udp]") {
  auto a = open_backend("127.83.36.1");
  auto b = open_backend("127.83.36.2");
  a->set_gso(false);
  std::vector<core::TxPacket> burst;
  for (std::uint32_t k = 0; k < 10; ++k) burst.push_back(roce_packet(*a, *b, k, 4096));
  const std::vector<core::TxPacket> before = burst;
  REQUIRE(a->send(burst) == 10);
  CHECK(a->counters().tx_gso_datagrams == 0);
  for (std::size_t k = 0; k < 10; ++k) {
    CHECK(burst[k].route.ipv4_id == 0);
    CHECK(burst[k].bytes == before[k].bytes);  // the engine's ICRC, untouched
  }
  const auto got = receive(*b, 10);
  REQUIRE(got.size() == 10);
  CHECK(b->counters().rx_gro_datagrams == 0);
  for (const auto& [p, bytes] : got) CHECK(p.ipv4_id == 0);
}

TEST_CASE("a GSO datagram holds at most the kernel's 64 segments", "[udp]") {
  auto a = open_backend("127.83.35.1");
  auto b = open_backend("127.83.35.2");
  std::vector<core::TxPacket> burst;
  for (std::uint32_t k = 0; k < 65; ++k) burst.push_back(roce_packet(*a, *b, k, 1000));
  REQUIRE(a->send(burst) == 65);
  CHECK(a->counters().tx_gso_datagrams == 1);  // 64 of 1016 bytes (65,024 of 65,507), then 1 alone
  CHECK(a->counters().tx_errors == 0);
  CHECK(receive(*b, 65).size() == 65);
}

core::Gid gid(const char* address) {
  const auto g = net::parse_gid(address);
  REQUIRE(g);
  return *g;
}

core::TxPacket to_group(const net::UdpBackend& from, const core::Gid& group, std::uint8_t tag) {
  core::TxPacket p;
  p.route.src = from.local_gid();
  p.route.dst = group;
  p.route.src_port = from.local_port();
  p.bytes.assign(64, tag);
  return p;
}

TEST_CASE("udp backend: a joined group's datagrams arrive with the group as their destination", "[udp][multicast]") {
  auto a = open_backend("127.77.40.11");
  auto b = open_backend("127.77.40.12");
  const core::Gid group = gid("239.77.40.11");
  CHECK(b->joins_groups());
  CHECK(b->group_fd() == -1);                                   // nothing to wait on before a join
  CHECK(b->join_group(gid("ff0e::77:40:11")) == EAFNOSUPPORT);  // an IPv4 socket hears no IPv6 group
  REQUIRE(b->join_group(group) == 0);
  CHECK(b->join_group(group) == 0);  // joined already
  const int fd = b->group_fd();
  REQUIRE(fd >= 0);

  // Equal packets to one address would be one GSO datagram; to a group each goes alone.
  std::vector<core::TxPacket> burst;
  for (std::uint8_t i = 0; i < 4; ++i) burst.push_back(to_group(*a, group, i));
  REQUIRE(a->send(burst) == 4);
  CHECK(a->counters().tx_gso_datagrams == 0);
  pollfd readable{fd, POLLIN, 0};
  CHECK(poll(&readable, 1, 2000) == 1);  // the host's progress thread sleeps on this
  const auto got = receive(*b, 4);
  REQUIRE(got.size() == 4);
  for (std::uint8_t i = 0; i < 4; ++i) {
    CHECK(got[i].first.dst_gid == group);
    CHECK(got[i].first.src_gid == a->local_gid());
    CHECK(got[i].first.src_port == a->local_port());
    CHECK(got[i].second == std::vector<std::uint8_t>(64, i));
  }
  CHECK(receive(*a, 1, 200ms).empty());  // the sender has not joined

  // Two members on this machine each get a copy; the sender's own socket loops its to itself.
  REQUIRE(a->join_group(group) == 0);
  std::vector<core::TxPacket> one{to_group(*a, group, 9)};
  REQUIRE(a->send(one) == 1);
  CHECK(receive(*a, 1).size() == 1);
  CHECK(receive(*b, 1).size() == 1);

  REQUIRE(b->leave_group(group) == 0);
  CHECK(b->leave_group(group) == EINVAL);
  one = {to_group(*a, group, 10)};
  REQUIRE(a->send(one) == 1);
  CHECK(receive(*a, 1).size() == 1);
  CHECK(receive(*b, 1, 200ms).empty());
  CHECK(b->group_fd() == fd);  // the epoll set stays
}

}  // namespace
}  // namespace test
