// Tests that need a network namespace of their own (in_netns.sh creates it; the tags are
// hidden so that only that wrapper runs them): IPv6 between two hosts, what the kernel really
// puts on the wire, and an exhausted 127.0.0.0/24.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/host/host_fixture.hpp"
#include "wire/ib_packet.hpp"
#include "wire/roce_frame.hpp"

namespace test {
namespace {

constexpr const char* kV6a = "fd53:7264:6d61::1";
constexpr const char* kV6b = "fd53:7264:6d61::2";

// SEND, RDMA WRITE, RDMA READ and FETCH_ADD from a to b, byte-exact.
void exercise(Node& a, Node& b) {
  RcPair p(a, b);
  fill_pattern(a.buffer, 0, 3000, 11);
  b.post_recv(p.qb, 1, 0, 4096);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 3000)}));
  CHECK(b.wait(b.recv_cq, 1).at(0).byte_len == 3000);
  CHECK(a.wait(a.send_cq, 1).at(0).status == core::WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), 3000) == 0);

  fill_pattern(a.buffer, 10000, 9000, 12);
  a.post_send(p.qa, remote_wr(core::WrOpcode::rdma_write, 2, {a.sge(10000, 9000)}, b.addr(20000), b.mr.rkey));
  fill_pattern(b.buffer, 40000, 5000, 13);
  a.post_send(p.qa, remote_wr(core::WrOpcode::rdma_read, 3, {a.sge(60000, 5000)}, b.addr(40000), b.mr.rkey));
  std::uint64_t word = 41;
  std::memcpy(b.buffer.data() + 80000, &word, 8);
  core::SendWr add = remote_wr(core::WrOpcode::atomic_fetch_and_add, 4, {a.sge(90000, 8)}, b.addr(80000), b.mr.rkey);
  add.compare_add = 1;
  a.post_send(p.qa, add);
  const std::vector<core::Wc> done = a.wait(a.send_cq, 3);
  CHECK(done.size() == 3);
  for (const core::Wc& wc : done) CHECK(wc.status == core::WcStatus::success);
  CHECK(std::memcmp(a.buffer.data() + 10000, b.buffer.data() + 20000, 9000) == 0);
  CHECK(std::memcmp(a.buffer.data() + 60000, b.buffer.data() + 40000, 5000) == 0);
  std::memcpy(&word, b.buffer.data() + 80000, 8);
  CHECK(word == 42);
  std::memcpy(&word, a.buffer.data() + 90000, 8);
  CHECK(word == 41);
  for (Node* n : {&a, &b}) {
    const host::HostStats s = n->host->stats();
    CHECK(s.device.icrc_err == 0);
    CHECK(s.device.malformed == 0);
  }
}

TEST_CASE("RC between two hosts on two IPv6 addresses", "[.netns][ipv6]") {
  Node a(kV6a), b(kV6b);
  CHECK(a.host->address() == kV6a);
  in6_addr ip{};
  inet_pton(AF_INET6, kV6b, &ip);
  CHECK(std::memcmp(b.host->gid().data(), ip.s6_addr, 16) == 0);
  exercise(a, b);
}

// Frames on the loopback interface, as an AF_PACKET socket sees them leave.
class LoopbackCapture {
 public:
  LoopbackCapture() : fd_(socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL))) {
    REQUIRE(fd_ >= 0);
    sockaddr_ll at{};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ALL);
    at.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    const timeval limit{0, 200'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  LoopbackCapture(const LoopbackCapture&) = delete;
  LoopbackCapture& operator=(const LoopbackCapture&) = delete;
  ~LoopbackCapture() { close(fd_); }

  // The outgoing frames until the interface has been quiet for 200 ms. (Loopback shows each
  // frame twice, leaving and arriving; the leaving copy is what the sender built.)
  std::vector<std::vector<std::uint8_t>> frames() {
    std::vector<std::vector<std::uint8_t>> out;
    std::vector<std::uint8_t> buffer(70000);
    for (;;) {
      sockaddr_ll from{};
      socklen_t length = sizeof from;
      const ssize_t n = recvfrom(fd_, buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&from), &length);
      if (n < 0) return out;
      if (from.sll_pkttype == PACKET_OUTGOING) out.emplace_back(buffer.begin(), buffer.begin() + n);
    }
  }

 private:
  int fd_;
};

// One 1500-byte SEND (two packets at MTU 1024) and its ACK, as the frames leave a.
std::vector<std::vector<std::uint8_t>> capture_a_send(const char* ip_a, const char* ip_b, bool gso) {
  host::HostConfig ca = config_at(ip_a), cb = config_at(ip_b);
  ca.udp_gso = cb.udp_gso = gso;
  Node a(ca), b(cb);
  RcPair p(a, b);
  LoopbackCapture capture;
  b.post_recv(p.qb, 1, 0, 4096);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 1500)}));
  b.wait(b.recv_cq, 1);
  a.wait(a.send_cq, 1);
  return capture.frames();
}

// The frames of a capture_a_send without GSO, each checked as a whole RoCEv2 frame: what
// docs/backends.md says the kernel sends from an unconnected IP_PMTUDISC_DO socket.
std::vector<wire::RoceFrame> roce_frames_of_a_send(const char* ip_a, const char* ip_b,
                                                   std::vector<std::vector<std::uint8_t>>& storage) {
  storage = capture_a_send(ip_a, ip_b, false);
  std::vector<wire::RoceFrame> roce;
  for (const auto& f : storage) {
    const auto frame = wire::RoceFrame::check(f);
    if (frame) roce.push_back(*frame);
  }
  REQUIRE(roce.size() >= 3);  // SEND first and last, an ACK
  return roce;
}

TEST_CASE("without GSO the kernel sends IPv4 with DF, ID 0 and UDP checksum 0, so the ICRC holds on the wire",
          "[.netns][wire]") {
  std::vector<std::vector<std::uint8_t>> storage;
  for (const wire::RoceFrame& f : roce_frames_of_a_send("127.0.0.1", "127.0.0.2", storage)) {
    REQUIRE(f.encapsulation() == wire::Encapsulation::rocev2_ipv4);
    const std::uint8_t* ip = f.network_header().data();
    CHECK(wire::Ipv4::identification::get(ip) == 0);
    CHECK(wire::Ipv4::dont_fragment::get(ip));
    CHECK(wire::Ipv4::ttl::get(ip) == 1);                         // the QP's hop limit, through IP_TTL
    CHECK(wire::Udp::checksum::get(f.udp_header().data()) == 0);  // SO_NO_CHECK
    CHECK(wire::Udp::src_port::get(f.udp_header().data()) == 4791);
    CHECK(f.icrc_ok());  // over the headers the kernel wrote, not the ones the engine assumed
  }
}

core::Gid gid_at(const char* ipv4) {
  in_addr a{};
  inet_pton(AF_INET, ipv4, &a);
  return softrdma::net::gid_of(a);
}

// With GSO the SEND's two packets leave as one datagram, which loopback never segments: its
// UDP payload is the two packets back to back. Where a device segments it, the kernel gives
// segment k IPv4 ID k (DF set, first ID 0): each packet's ICRC must hold for that ID.
TEST_CASE("with GSO a message's packets share one datagram, each with the ICRC for its segment's IPv4 ID",
          "[.netns][wire]") {
  bool seen = false;
  for (const auto& f : capture_a_send("127.0.0.1", "127.0.0.2", true)) {
    constexpr std::size_t kEthernet = 14;
    if (f.size() < kEthernet + wire::Ipv4::min_length + wire::Udp::length) continue;
    const std::uint8_t* ip = f.data() + kEthernet;
    const std::uint8_t* udp = ip + wire::Ipv4::min_length;
    if (wire::Ipv4::version::get(ip) != 4 || wire::Udp::dst_port::get(udp) != wire::kRoceV2Port) continue;
    const std::span<const std::uint8_t> payload(udp + wire::Udp::length,
                                                wire::Udp::total_length::get(udp) - wire::Udp::length);
    if (payload.size() < 1500) continue;  // the ACK
    seen = true;
    CHECK(wire::Ipv4::identification::get(ip) == 0);
    CHECK(wire::Ipv4::dont_fragment::get(ip));
    CHECK(wire::Udp::checksum::get(udp) != 0);  // the kernel refuses GSO without checksums
    // MTU 1024: a SEND_FIRST of 12 + 1024 + 4 bytes, then a SEND_LAST with the other 476.
    constexpr std::size_t kFirst = 12 + 1024 + 4;
    REQUIRE(payload.size() == kFirst + 12 + 476 + 4);
    core::Endpoints e{gid_at("127.0.0.1"), gid_at("127.0.0.2"), 4791};
    for (std::uint16_t k = 0; k < 2; ++k) {
      const std::span<const std::uint8_t> packet = k == 0 ? payload.first(kFirst) : payload.subspan(kFirst);
      const auto parsed = wire::IbPacket::check(packet);
      REQUIRE(parsed);
      e.ipv4_id = k;
      CHECK(core::icrc_between(e, parsed->covered()) == parsed->icrc());
      e.ipv4_id = static_cast<std::uint16_t>(1 - k);
      CHECK(core::icrc_between(e, parsed->covered()) != parsed->icrc());  // the ID matters
    }
  }
  CHECK(seen);
}

TEST_CASE("without GSO the kernel sends IPv6 with a UDP checksum, and the ICRC holds on the wire",
          "[.netns][wire][ipv6]") {
  std::vector<std::vector<std::uint8_t>> storage;
  for (const wire::RoceFrame& f : roce_frames_of_a_send(kV6a, kV6b, storage)) {
    REQUIRE(f.encapsulation() == wire::Encapsulation::rocev2_ipv6);
    CHECK(wire::Ipv6::hop_limit::get(f.network_header().data()) == 1);
    CHECK(wire::Udp::checksum::get(f.udp_header().data()) != 0);  // RFC 8200 s8.1
    CHECK(wire::Udp::src_port::get(f.udp_header().data()) == 4791);
    CHECK(f.icrc_ok());
  }
}

TEST_CASE("with port 4791 taken on every 127.0.0.N, a host without an address says so", "[.netns][address]") {
  std::vector<int> fds;
  for (int n = 1; n <= 254; ++n) {
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(4791);
    inet_pton(AF_INET, ("127.0.0." + std::to_string(n)).c_str(), &at.sin_addr);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    fds.push_back(fd);
  }
  const host::HostStart s = host::EmbeddedHost::start({});
  CHECK_FALSE(s.host);
  CHECK(s.error ==
        "no free address: port 4791 is in use on every address from 127.0.0.1 to 127.0.0.254 (the rdma_rxe module "
        "binds it on all addresses); choose an address explicitly");
  for (const int fd : fds) close(fd);
}

}  // namespace
}  // namespace test
