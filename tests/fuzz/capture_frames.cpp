// Fuzzes what `softrdma dump` does with each frame of a capture: the RoCE judgement (which
// parses, verifies and rebuilds), ARP, and the TCP reassembly and iWARP decoding that run
// across frames. The input is a sequence of frames, each prefixed by a 2-byte length.
#include <algorithm>
#include <cstdint>

#include "tools/dump/iwarp_capture.hpp"
#include "tools/softrdma/frame_judge.hpp"
#include "wire/arp.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  softrdma::dump::IwarpCaptureDecoder iwarp;
  std::uint64_t frame = 0;
  while (size >= 2) {
    const std::size_t len = std::min<std::size_t>(size - 2, std::size_t{data[0]} << 8 | data[1]);
    softrdma::net::CapturedPacket pkt;
    pkt.data = {data + 2, len};
    pkt.original_length = static_cast<std::uint32_t>(len);
    (void)softrdma::dump::judge_roce(pkt);
    if (len > wire::Ethernet::length) (void)wire::ArpRepr::parse(pkt.data.subspan(wire::Ethernet::length));
    iwarp.add_frame(++frame, pkt, [](const softrdma::dump::IwarpCaptureFrame& f) { (void)f.item.describe(); });
    data += 2 + len;
    size -= 2 + len;
  }
  (void)iwarp.notes();
  return 0;
}
