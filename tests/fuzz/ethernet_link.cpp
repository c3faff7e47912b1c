// Fuzzes EthernetLink (the dpdk backend's frame sorting, ARP and neighbour discovery) with a
// stream of frames. The first byte picks the device's address: even, IPv4 10.77.1.1 (ARP);
// odd, IPv6 fd77:1::1 (ND). The rest is frames prefixed by a one-byte length, taken in at
// advancing times, with packets routed to the peers the frames talk about. Whatever comes in,
// a packet handed on must lie inside its frame, the link's counters must account for every
// frame, and the frames it sends must be whole ARP frames (IPv4) or neighbour solicitations
// and advertisements that pass RFC 4861's checks (IPv6).
#include "emulator/net/ethernet_link.hpp"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

#include "emulator/net/udp_gid.hpp"
#include "wire/arp.hpp"
#include "wire/icmpv6.hpp"
#include "wire/ipv6.hpp"

using namespace softrdma;

namespace {

const core::Gid kIpv6{0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// The peer a frame talks about: the sender IP of an IPv4 frame or ARP (bytes 26..29 or 28..31;
// 28..31 covers both often enough), the source address of an IPv6 frame (22..37).
std::optional<core::Gid> peer_of(std::span<const std::uint8_t> frame, bool ipv6) {
  core::Gid dst{};
  if (ipv6) {
    if (frame.size() < 38) return std::nullopt;
    for (int i = 0; i < 16; ++i) dst[i] = frame[22 + i];
    return dst;
  }
  if (frame.size() < 32) return std::nullopt;
  dst[10] = dst[11] = 0xff;
  for (int i = 0; i < 4; ++i) dst[12 + i] = frame[28 + i];
  return dst;
}

void check_sent(const std::vector<std::uint8_t>& f, bool ipv6) {
  if (!ipv6) {
    if (f.size() < wire::Ethernet::length + wire::Arp::length) std::abort();
    if (!wire::ArpRepr::parse(std::span(f).subspan(wire::Ethernet::length))) std::abort();
    return;
  }
  const auto ip = wire::Ipv6View::check(std::span(f).subspan(wire::Ethernet::length));
  if (!ip || !wire::NdRepr::parse(*ip)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool ipv6 = (data[0] & 1) != 0;
  net::EthernetLink link({0x02, 0, 0, 0, 0, 1}, ipv6 ? kIpv6 : net::gid_of(wire::Ipv4Address{10, 77, 1, 1}));
  std::span<const std::uint8_t> rest(data + 1, size - 1);
  std::uint64_t now = 0;
  std::uint64_t frames = 0;
  while (!rest.empty()) {
    const std::size_t length = std::min<std::size_t>(rest[0], rest.size() - 1);
    const std::span<const std::uint8_t> frame = rest.subspan(1, length);
    rest = rest.subspan(1 + length);
    ++frames;
    now += 50'000'000;
    if (const auto p = link.receive(frame)) {
      if (p->bytes.data() < frame.data() || p->bytes.data() + p->bytes.size() > frame.data() + frame.size())
        std::abort();
    }
    if (const std::optional<core::Gid> peer = peer_of(frame, ipv6)) {
      core::TxPacket packet;
      packet.route.dst = *peer;
      packet.bytes.assign(frame.begin(), frame.end());
      (void)link.route(packet, now);
    }
    link.advance(now);
    for (const auto& f : link.take_frames()) check_sent(f, ipv6);
    (void)link.take_released();
  }
  const net::LinkCounters& c = link.counters();
  if (c.rx_roce + c.rx_arp + c.rx_nd + c.rx_not_ours + c.rx_malformed != frames) std::abort();
  return 0;
}
