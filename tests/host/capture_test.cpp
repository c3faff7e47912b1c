// SOFTRDMA_CAPTURE's stage (emulator/net/capture_stage.hpp) in a host: every packet a host
// sends and receives, in a pcap file whose frames are whole RoCEv2 frames with a valid ICRC.
// The stage alone, without a host: tests/net/capture_stage_test.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "tests/host/host_fixture.hpp"
#include "tests/net/capture_files.hpp"
#include "wire/inet_checksum.hpp"
#include "wire/roce_frame.hpp"

namespace test {
namespace {

namespace net = softrdma::net;
using core::WcStatus;
using core::WrOpcode;

TEST_CASE("a capture holds every packet sent and received, as valid RoCEv2 frames", "[host][capture]") {
  const bool gso = GENERATE(true, false);
  INFO("UDP GSO " << (gso ? "on" : "off"));
  const std::string path = temp_capture_path("capture-rc");
  host::HostConfig config = config_at("127.83.60.1");
  config.capture_path = path;
  config.udp_gso = gso;
  Node a(config), b("127.83.60.2");
  RcPair p(a, b);

  fill_pattern(a.buffer, 0, 3000, 1);  // SEND: 3 packets at MTU 1024
  b.post_recv(p.qb, 7, 0, 4096);
  a.post_send(p.qa, make_wr(WrOpcode::send, 1, {a.sge(0, 3000)}));
  CHECK(b.wait(b.recv_cq, 1).at(0).status == WcStatus::success);
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  fill_pattern(a.buffer, 100, 5000, 2);  // WRITE: 5 packets
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 2, {a.sge(100, 5000)}, b.addr(8192), b.mr.rkey));
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  fill_pattern(b.buffer, 40000, 7777, 3);  // READ: 8 response packets
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_read, 3, {a.sge(0, 7777)}, b.addr(40000), b.mr.rkey));
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data() + 40000, 7777) == 0);

  a.host->stop();  // no more packets in or out of a: its counters and file are final
  const host::HostStats s = a.host->stats();
  CHECK(s.udp.tx_errors == 0);
  CHECK(s.udp.tx_no_route == 0);
  CHECK(s.capture.frames_dropped == 0);
  const Frames f = read_capture(path);
  CHECK(f.link_type == net::kLinkEthernet);
  CHECK(f.data.size() == s.udp.tx_packets + s.udp.rx_packets);
  CHECK(s.capture.frames_written == f.data.size());

  const wire::MacAddress mac_a{0x02, 0x00, 127, 83, 60, 1}, mac_b{0x02, 0x00, 127, 83, 60, 2};
  std::size_t sent = 0, received = 0, sends = 0, writes = 0, read_responses = 0;
  // IPv4 IDs as the frames left each side: 0 for a datagram of its own, k for segment k of a
  // GSO datagram, so each ID is 0 or one more than the previous frame's in its direction.
  std::uint16_t last_id[2] = {0, 0}, top_id = 0;
  for (const auto& bytes : f.data) {
    const auto frame = wire::RoceFrame::check(bytes);
    REQUIRE(frame);
    CHECK(frame->encapsulation() == wire::Encapsulation::rocev2_ipv4);
    CHECK(frame->icrc_ok());
    const std::span<const std::uint8_t> ip = frame->network_header();
    CHECK(wire::inet_checksum(ip) == 0);  // the header checksum holds
    CHECK(wire::Ipv4::dont_fragment::get(ip.data()));
    CHECK(wire::Udp::checksum::get(frame->udp_header().data()) == 0);  // none written, which IPv4 allows
    CHECK(wire::Udp::dst_port::get(frame->udp_header().data()) == wire::kRoceV2Port);
    const bool from_a = frame->ethernet().src() == mac_a;
    const std::uint16_t id = wire::Ipv4::identification::get(ip.data());
    CHECK((id == 0 || id == last_id[from_a] + 1));
    last_id[from_a] = id;
    if (from_a) top_id = std::max(top_id, id);
    CHECK(frame->ethernet().dst() == (from_a ? mac_b : mac_a));
    (from_a ? sent : received) += 1;
    const auto op = static_cast<std::uint8_t>(wire::operation_of(frame->ib().opcode()));
    if (from_a && op <= 0x05) ++sends;                 // send_first .. send_only_imm
    if (from_a && op >= 0x06 && op <= 0x0B) ++writes;  // write_first .. write_only_imm
    if (!from_a && op >= 0x0D && op <= 0x10) ++read_responses;
  }
  CHECK(sent == s.udp.tx_packets);
  CHECK(received == s.udp.rx_packets);
  CHECK(sends == 3);
  CHECK(writes == 5);
  CHECK(read_responses == 8);
  // a's GSO on: its 3-packet SEND and 5-packet WRITE left numbered (b's READ responses always do).
  CHECK((s.udp.tx_gso_datagrams > 0) == gso);
  CHECK((top_id > 0) == gso);
  std::remove(path.c_str());
}

TEST_CASE("a capture file that cannot be created stops the host from starting, with one line", "[host][capture]") {
  host::HostConfig config = config_at("127.83.61.1");
  config.capture_path = "/nonexistent-softrdma-dir/x.pcap";
  const host::HostStart s = host::EmbeddedHost::start(config);
  CHECK_FALSE(s.host);
  CHECK(s.error == "cannot write capture /nonexistent-softrdma-dir/x.pcap: No such file or directory");

  config.capture_path = "/dev/full";  // opens, but takes no byte: the file header fails
  const host::HostStart full = host::EmbeddedHost::start(config);
  CHECK_FALSE(full.host);
  CHECK(full.error == "cannot write capture /dev/full: No space left on device");
}

TEST_CASE("two QPs of one device talk through its loopback: no UDP, and the capture sees both directions",
          "[host][capture]") {
  const std::string path = temp_capture_path("capture-loopback");
  host::HostConfig config = config_at("127.83.62.1");
  config.capture_path = path;
  Node a(config);
  RcPair p(a, a);  // both QPs on a: every packet is to a's own address

  fill_pattern(a.buffer, 0, 3000, 1);  // SEND: 3 packets at MTU 1024, and an ACK
  a.post_recv(p.qb, 7, 8192, 4096);
  a.post_send(p.qa, make_wr(WrOpcode::send, 1, {a.sge(0, 3000)}));
  CHECK(a.wait(a.recv_cq, 1).at(0).status == WcStatus::success);
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), a.buffer.data() + 8192, 3000) == 0);
  fill_pattern(a.buffer, 100, 5000, 2);  // WRITE: 5 packets
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 2, {a.sge(100, 5000)}, a.addr(20000), a.mr.rkey));
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data() + 100, a.buffer.data() + 20000, 5000) == 0);

  a.host->stop();
  const host::HostStats s = a.host->stats();
  CHECK(s.udp.tx_packets == 0);
  CHECK(s.udp.rx_packets == 0);
  CHECK(s.udp.loopback_packets >= 3 + 5 + 2);  // the data packets and at least an ACK each
  const Frames f = read_capture(path);
  CHECK(f.data.size() == 2 * s.udp.loopback_packets);  // each recorded as sent and as received
  for (const auto& frame : f.data) {
    const auto checked = wire::RoceFrame::check(frame);
    REQUIRE(checked);
    CHECK(checked->icrc_ok());
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace test
