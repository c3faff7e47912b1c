// The udp backend alone: bursts between two sockets, the addresses and ports a packet
// arrives with, and packets it cannot route.
#include <arpa/inet.h>
#include <fcntl.h>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/udp_backend.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/host/host_fixture.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"

namespace test {
namespace {

namespace net = softrdma::net;

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

// Receives until `n` packets came (copied out: the backend reuses its slots).
std::vector<std::pair<core::RxPacket, std::vector<std::uint8_t>>> receive(net::UdpBackend& b, std::size_t n) {
  std::vector<std::pair<core::RxPacket, std::vector<std::uint8_t>>> got;
  eventually([&] {
    for (const core::RxPacket& p : b.receive()) got.emplace_back(p, std::vector<std::uint8_t>(p.bytes.begin(), p.bytes.end()));
    return got.size() >= n;
  });
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

}  // namespace
}  // namespace test
