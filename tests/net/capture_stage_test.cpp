// The capture stage alone (emulator/net/capture_stage.hpp), without a host: the frame it
// writes for a packet is the one the socket sends, byte for byte. In a host:
// tests/host/capture_test.cpp.
#include "emulator/net/capture_stage.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emulator/core/roce_headers.hpp"
#include "tests/net/capture_files.hpp"
#include "wire/roce_frame.hpp"

namespace test {
namespace {

namespace core = softrdma::core;
namespace net = softrdma::net;

TEST_CASE("the stage writes an IPv6 packet as the socket sends it, UDP checksum computed", "[capture][ipv6]") {
  // The frame wire's builder makes for these endpoints, with the stage's MACs and hop limit.
  const std::vector<std::uint8_t> data(300, 0x5A);
  wire::RoceFrameRepr r;
  wire::Ipv6Repr ip6;
  ip6.src = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x01};
  ip6.dst = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x02};
  ip6.traffic_class = 0x28;
  ip6.flow_label = 0x12345;
  ip6.hop_limit = 17;
  r.network = ip6;
  r.src_port = wire::kRoceV2Port;
  r.udp_checksum = wire::RoceFrameRepr::UdpChecksum::computed;
  r.ib.dest_qp = 0x11;
  r.ib.psn = 5;
  r.ib.payload = data;
  core::Endpoints e;
  std::memcpy(e.src.data(), ip6.src.data(), 16);
  std::memcpy(e.dst.data(), ip6.dst.data(), 16);
  e.src_port = wire::kRoceV2Port;
  e.traffic_class = ip6.traffic_class;
  e.flow_label = ip6.flow_label;
  e.hop_limit = ip6.hop_limit;
  r.ethernet.src = net::mac_for(e.src);
  r.ethernet.dst = net::mac_for(e.dst);
  CHECK(r.ethernet.src == wire::MacAddress{0x02, 0, 0, 0, 0x12, 0x01});
  std::vector<std::uint8_t> expected(r.buffer_len());
  r.emit(expected.data());
  const std::size_t ib_offset = wire::Ethernet::length + wire::Ipv6::length + wire::Udp::length;

  const std::string path = temp_capture_path("capture-v6");
  {
    net::CaptureOpen opened = net::CaptureStage::open(path);
    REQUIRE(opened.stage);
    core::TxPacket p{e, {expected.begin() + static_cast<std::ptrdiff_t>(ib_offset), expected.end()}};
    opened.stage->record_tx({&p, 1});
    opened.stage->flush();
    CHECK(opened.stage->counters().frames_written == 1);
    CHECK(opened.stage->counters().frames_dropped == 0);
    // flush() waits for the writer thread: the frame is in the file before the stage closes.
    const Frames f = read_capture(path);
    REQUIRE(f.data.size() == 1);
    CHECK(f.data[0] == expected);
    const auto frame = wire::RoceFrame::check(f.data[0]);
    REQUIRE(frame);
    CHECK(frame->icrc_ok());
    CHECK(wire::Udp::checksum::get(frame->udp_header().data()) != 0);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace test
