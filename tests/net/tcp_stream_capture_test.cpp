// TcpStreamCapture's frames as TCP: the handshake, segments of at most one MSS numbered and
// acknowledged as RFC 9293 has them (across a sequence number wrap), valid IP and TCP
// checksums, each direction's bytes in order, the close and the reset.
#include "emulator/net/tcp_stream_capture.hpp"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/net/iwarp_exchange.hpp"
#include "wire/ethernet.hpp"
#include "wire/inet_checksum.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/tcp.hpp"

namespace {

using softrdma::net::TcpCaptureOptions;
using softrdma::net::TcpConnectionEnds;
using softrdma::net::TcpStreamCapture;
using test::Bytes;
using test::TcpSide;

constexpr std::uint8_t kSyn = wire::Tcp::syn, kAck = wire::Tcp::ack_flag, kFin = wire::Tcp::fin, kRst = wire::Tcp::rst,
                       kPsh = wire::Tcp::psh;

struct Segment {
  TcpSide from;
  std::uint32_t seq;
  std::uint32_t ack;
  std::uint8_t flags;
  Bytes payload;
};

// Checks one frame's Ethernet, IP and TCP headers and checksums between `ends`, and returns
// its segment.
Segment parse(const Bytes& frame, const TcpConnectionEnds& ends) {
  const auto eth = wire::EthernetView::check(frame);
  REQUIRE(eth);
  std::span<const std::uint8_t> l4, src, dst;
  wire::Ipv4Address src4{}, dst4{};
  wire::Ipv6Address src6{}, dst6{};
  if (eth->type() == wire::ethertype::ipv4) {
    const auto ip = wire::Ipv4View::check(eth->payload());
    REQUIRE(ip);
    CHECK(ip->checksum_ok());
    CHECK(ip->protocol() == wire::ip_proto::tcp);
    CHECK(ip->payload().size() == eth->payload().size() - wire::Ipv4::min_length);
    src4 = ip->src();
    dst4 = ip->dst();
    src = src4;
    dst = dst4;
    l4 = ip->payload();
  } else {
    REQUIRE(eth->type() == wire::ethertype::ipv6);
    const auto ip = wire::Ipv6View::check(eth->payload());
    REQUIRE(ip);
    CHECK(ip->next_header() == wire::ip_proto::tcp);
    src6 = ip->src();
    dst6 = ip->dst();
    src = src6;
    dst = dst6;
    l4 = ip->payload();
  }
  const auto tcp = wire::TcpView::check(l4);
  REQUIRE(tcp);
  const auto length = static_cast<std::uint32_t>(l4.size());
  CHECK(wire::inet_fold(wire::inet_sum(l4, wire::pseudo_header_sum(src, dst, wire::ip_proto::tcp, length))) == 0);
  const bool from_local = tcp->src_port() == ends.local_port;
  CHECK(tcp->dst_port() == (from_local ? ends.remote_port : ends.local_port));
  const std::span<const std::uint8_t> local = std::span<const std::uint8_t>(ends.local_address).last(src.size());
  const std::span<const std::uint8_t> local_in_frame = from_local ? src : dst;
  CHECK(std::equal(local.begin(), local.end(), local_in_frame.begin(), local_in_frame.end()));
  return {from_local ? TcpSide::local : TcpSide::remote, tcp->seq(), tcp->ack(), tcp->flags(),
          Bytes(tcp->payload().begin(), tcp->payload().end())};
}

struct Walk {
  std::vector<Segment> segments;
  std::size_t largest_payload = 0;
  Bytes carried[2];  // each direction's payload bytes, in order
};

// Parses every frame and checks the numbering: each segment starts at its sender's next
// sequence number, acknowledges all its peer sent (RFC 9293 s3.4), and stays within the
// window its peer advertised.
Walk walk(const std::vector<Bytes>& frames, const TcpConnectionEnds& ends, const TcpCaptureOptions& o) {
  Walk w;
  std::uint32_t next[2] = {o.local_isn, o.remote_isn};
  std::uint32_t acknowledged[2] = {o.local_isn, o.remote_isn};  // by the peer
  for (std::size_t i = 0; i < frames.size(); ++i) {
    INFO("frame " << i + 1);
    Segment s = parse(frames[i], ends);
    const auto me = static_cast<std::size_t>(s.from), peer = 1 - me;
    CHECK(s.seq == next[me]);
    if (s.flags & kAck) {
      CHECK(s.ack == next[peer]);
      acknowledged[peer] = s.ack;
    }
    next[me] += static_cast<std::uint32_t>(s.payload.size()) + ((s.flags & (kSyn | kFin)) ? 1 : 0);
    CHECK(next[me] - acknowledged[me] <= 0xFFFF);
    w.largest_payload = std::max(w.largest_payload, s.payload.size());
    w.carried[me].insert(w.carried[me].end(), s.payload.begin(), s.payload.end());
    w.segments.push_back(std::move(s));
  }
  return w;
}

std::vector<Bytes> capture(const TcpConnectionEnds& ends, const TcpCaptureOptions& o,
                           const std::function<void(TcpStreamCapture&)>& calls) {
  std::vector<Bytes> frames;
  TcpStreamCapture c(
      ends, [&](std::uint64_t, std::span<const std::uint8_t> f) { frames.emplace_back(f.begin(), f.end()); }, o);
  calls(c);
  return frames;
}

}  // namespace

TEST_CASE("TcpStreamCapture: handshake, numbered segments of one MSS, ACKs and the close", "[net][tcp_capture]") {
  const bool v6 = GENERATE(false, true);
  const std::uint16_t mss = GENERATE(std::uint16_t{0}, std::uint16_t{536});
  const TcpConnectionEnds ends = v6 ? test::ipv6_ends() : test::ipv4_ends();
  TcpCaptureOptions o;
  o.mss = mss;
  o.local_isn = 0xFFFFF000;  // wraps within the exchange
  o.remote_isn = 0x7FFFFFFF;
  INFO("IPv6 " << v6 << ", MSS option " << mss);
  const test::IwarpExchange x = test::iwarp_exchange(true);
  const std::vector<Bytes> frames = capture(ends, o, [&](TcpStreamCapture& c) {
    c.open(1);
    for (const test::StreamWrite& w : x.writes) c.data(2, w.from, w.bytes);
    c.close(3, TcpSide::local);
    CHECK_FALSE(c.ended());
    c.close(4, TcpSide::remote);
    CHECK(c.ended());
    c.data(5, TcpSide::local, Bytes{1, 2, 3});  // after both FINs: nothing
  });
  const std::uint16_t want_mss = mss != 0 ? mss : v6 ? 1440 : 1460;
  const Walk w = walk(frames, ends, o);

  REQUIRE(w.segments.size() > 7);
  const auto& s = w.segments;
  CHECK(s[0].from == TcpSide::local);
  CHECK(s[0].flags == kSyn);
  CHECK(s[1].flags == (kSyn | kAck));
  CHECK(s[2].flags == kAck);
  for (int i = 0; i < 2; ++i) {
    // The SYNs announce the MSS (RFC 9293 s3.7.1).
    const Bytes& f = frames[i];
    const std::size_t tcp_at = f.size() - 24;
    CHECK(Bytes(f.begin() + tcp_at + 20, f.end()) ==
          Bytes{0x02, 0x04, static_cast<std::uint8_t>(want_mss >> 8), static_cast<std::uint8_t>(want_mss)});
  }
  const std::size_t n = s.size();
  CHECK(s[n - 4].from == TcpSide::local);
  CHECK(s[n - 4].flags == (kFin | kAck));
  CHECK(s[n - 3].flags == kAck);
  CHECK(s[n - 2].from == TcpSide::remote);
  CHECK(s[n - 2].flags == (kFin | kAck));
  CHECK(s[n - 1].from == TcpSide::local);
  CHECK(s[n - 1].flags == kAck);

  CHECK(w.largest_payload == want_mss);
  Bytes sent[2];
  for (const test::StreamWrite& wr : x.writes) {
    Bytes& to = sent[static_cast<std::size_t>(wr.from)];
    to.insert(to.end(), wr.bytes.begin(), wr.bytes.end());
  }
  CHECK(w.carried[0] == sent[0]);
  CHECK(w.carried[1] == sent[1]);

  // Each write's last segment has PSH; the receiver ACKs at least every second full segment.
  std::size_t pushed = 0, full_unacked = 0;
  for (const Segment& seg : s) {
    if (seg.flags & kPsh) ++pushed;
    if (seg.payload.size() == want_mss) ++full_unacked;
    if (seg.payload.empty() && seg.flags == kAck) full_unacked = 0;
    CHECK(full_unacked <= 2);
  }
  CHECK(pushed == x.writes.size());
}

TEST_CASE("TcpStreamCapture: a write is cut into MSS-sized segments, then acknowledged", "[net][tcp_capture]") {
  TcpCaptureOptions o;
  o.mss = 100;
  const std::vector<Bytes> frames = capture(test::ipv4_ends(), o, [](TcpStreamCapture& c) {
    CHECK(c.mss() == 100);
    c.data(1, TcpSide::remote, Bytes(250, 0xAB));
  });
  const Walk w = walk(frames, test::ipv4_ends(), o);  // no handshake: numbering starts at the ISNs
  REQUIRE(w.segments.size() == 5);
  const auto& s = w.segments;
  CHECK((s[0].from == TcpSide::remote && s[0].payload.size() == 100 && s[0].flags == kAck));
  CHECK((s[1].from == TcpSide::remote && s[1].payload.size() == 100 && s[1].flags == kAck));
  CHECK((s[2].from == TcpSide::local && s[2].payload.empty() && s[2].ack == 200));
  CHECK((s[3].from == TcpSide::remote && s[3].payload.size() == 50 && s[3].flags == (kPsh | kAck)));
  CHECK((s[4].from == TcpSide::local && s[4].payload.empty() && s[4].ack == 250));
}

TEST_CASE("TcpStreamCapture: the remote side opens, and a reset ends the connection", "[net][tcp_capture]") {
  TcpConnectionEnds ends = test::ipv6_ends();
  ends.opener = TcpSide::remote;
  const TcpCaptureOptions o;
  bool ended = false;
  const std::vector<Bytes> frames = capture(ends, o, [&](TcpStreamCapture& c) {
    c.open(1);
    c.data(2, TcpSide::local, Bytes{1, 2, 3});
    c.reset(3, TcpSide::remote);
    ended = c.ended();
    c.data(4, TcpSide::local, Bytes{4});  // nothing after the RST
    c.close(5, TcpSide::local);
    c.reset(6, TcpSide::local);
  });
  CHECK(ended);
  const Walk w = walk(frames, ends, o);
  REQUIRE(w.segments.size() == 6);
  CHECK((w.segments[0].from == TcpSide::remote && w.segments[0].flags == kSyn));
  CHECK((w.segments[1].from == TcpSide::local && w.segments[1].flags == (kSyn | kAck)));
  CHECK((w.segments[5].from == TcpSide::remote && w.segments[5].flags == (kRst | kAck)));
  CHECK(w.carried[0] == Bytes{1, 2, 3});
}

TEST_CASE("TcpStreamCapture: an MSS too large for IPv4 is cut to the largest that fits", "[net][tcp_capture]") {
  TcpCaptureOptions o;
  o.mss = 65535;
  const std::vector<Bytes> frames = capture(test::ipv4_ends(), o, [](TcpStreamCapture& c) {
    CHECK(c.mss() == TcpStreamCapture::kMaxMss);
    c.data(1, TcpSide::local, Bytes(70000, 0x01));
  });
  const Walk w = walk(frames, test::ipv4_ends(), o);  // each segment ACKed: two overfill the window
  REQUIRE(w.segments.size() == 4);
  CHECK(w.largest_payload == TcpStreamCapture::kMaxMss);
  CHECK(w.carried[0].size() == 70000);
}
