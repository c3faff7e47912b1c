// Fuzzes EthernetLink (the dpdk backend's frame sorting and ARP) with a stream of frames: each
// input is frames prefixed by a one-byte length, taken in at advancing times, with packets
// routed to the peers the frames talk about. Whatever comes in, a packet handed on must lie
// inside its frame, the link's counters must account for every frame, and the frames it sends
// must be whole ARP frames.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "emulator/net/ethernet_link.hpp"
#include "wire/arp.hpp"

using namespace softrdma;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  net::EthernetLink link({0x02, 0, 0, 0, 0, 1}, {10, 77, 1, 1});
  std::span<const std::uint8_t> rest(data, size);
  std::uint64_t now = 0;
  std::uint64_t frames = 0;
  while (!rest.empty()) {
    const std::size_t length = std::min<std::size_t>(rest[0], rest.size() - 1);
    const std::span<const std::uint8_t> frame = rest.subspan(1, length);
    rest = rest.subspan(1 + length);
    ++frames;
    now += 50'000'000;
    if (const auto p = link.receive(frame)) {
      if (p->bytes.data() < frame.data() || p->bytes.data() + p->bytes.size() > frame.data() + frame.size()) std::abort();
    }
    // Route a packet to the frame's sender IP (bytes 26..29 of an IPv4 frame, 28..31 of ARP).
    if (frame.size() >= 32) {
      core::TxPacket packet;
      packet.route.dst[10] = packet.route.dst[11] = 0xff;
      for (int i = 0; i < 4; ++i) packet.route.dst[12 + i] = frame[28 + i];
      packet.bytes.assign(frame.begin(), frame.end());
      (void)link.route(packet, now);
    }
    link.advance(now);
    for (const auto& f : link.take_frames()) {
      if (f.size() < wire::Ethernet::length + wire::Arp::length) std::abort();
      if (!wire::ArpRepr::parse(std::span(f).subspan(wire::Ethernet::length))) std::abort();
    }
    (void)link.take_released();
  }
  const net::LinkCounters& c = link.counters();
  if (c.rx_roce + c.rx_arp + c.rx_not_ours + c.rx_malformed != frames) std::abort();
  return 0;
}
