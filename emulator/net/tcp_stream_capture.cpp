#include "emulator/net/tcp_stream_capture.hpp"

#include <algorithm>
#include <utility>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/capture_stage.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/tcp.hpp"

namespace softrdma::net {
namespace {

constexpr std::uint16_t kDefaultMssIpv4 = 1460;  // 1500 - 20 (IPv4) - 20 (TCP)
constexpr std::uint16_t kDefaultMssIpv6 = 1440;  // 1500 - 40 (IPv6) - 20 (TCP)
constexpr std::size_t kWindow = 0xFFFF;          // what both ends advertise: the largest without window scaling
constexpr std::size_t kMaxHeaders =
    wire::Ethernet::length + wire::Ipv6::length + wire::Tcp::min_length + wire::Tcp::mss_option_length;

// The address as the pseudo-header and the IP header hold it: 4 bytes for IPv4, else 16.
std::span<const std::uint8_t> ip_bytes(const core::Gid& address, bool ipv4) {
  return ipv4 ? std::span<const std::uint8_t>(address).last(4) : std::span<const std::uint8_t>(address);
}

}  // namespace

TcpStreamCapture::TcpStreamCapture(const TcpConnectionEnds& ends, FrameSink sink, TcpCaptureOptions options)
    : opener_(ends.opener),
      ipv4_(core::is_ipv4_mapped(ends.local_address)),
      mss_(options.mss == 0 ? (ipv4_ ? kDefaultMssIpv4 : kDefaultMssIpv6) : std::min(options.mss, kMaxMss)),
      sink_(std::move(sink)) {
  end(TcpSide::local) = {ends.local_address, ends.local_port, mac_for(ends.local_address), options.local_isn};
  end(TcpSide::remote) = {ends.remote_address, ends.remote_port, mac_for(ends.remote_address), options.remote_isn};
  frame_.reserve(kMaxHeaders + mss_);
}

bool TcpStreamCapture::ended() const { return reset_ || (ends_[0].closed && ends_[1].closed); }

void TcpStreamCapture::open(std::uint64_t now) {
  const TcpSide responder = peer(opener_);
  segment(now, opener_, wire::Tcp::syn);
  segment(now, responder, wire::Tcp::syn | wire::Tcp::ack_flag);
  segment(now, opener_, wire::Tcp::ack_flag);
}

void TcpStreamCapture::data(std::uint64_t now, TcpSide from, std::span<const std::uint8_t> bytes) {
  if (reset_ || end(from).closed) return;
  int full_segments = 0;           // since the peer's last ACK
  std::size_t unacknowledged = 0;  // bytes since the peer's last ACK
  while (!bytes.empty()) {
    const std::size_t n = std::min<std::size_t>(bytes.size(), mss_);
    const bool last = n == bytes.size();
    segment(now, from, last ? wire::Tcp::psh | wire::Tcp::ack_flag : wire::Tcp::ack_flag, bytes.first(n));
    bytes = bytes.subspan(n);
    full_segments += n == mss_ ? 1 : 0;
    unacknowledged += n;
    // The window must hold the next segment too: with an MSS over half the window (loopback's
    // is 65483) the peer ACKs every segment.
    if (last || full_segments == 2 || unacknowledged + mss_ > kWindow) {
      segment(now, peer(from), wire::Tcp::ack_flag);
      full_segments = 0;
      unacknowledged = 0;
    }
  }
}

void TcpStreamCapture::close(std::uint64_t now, TcpSide from) {
  if (reset_ || end(from).closed) return;
  segment(now, from, wire::Tcp::fin | wire::Tcp::ack_flag);
  end(from).closed = true;
  segment(now, peer(from), wire::Tcp::ack_flag);
}

void TcpStreamCapture::reset(std::uint64_t now, TcpSide from) {
  if (ended()) return;
  segment(now, from, wire::Tcp::rst | wire::Tcp::ack_flag);
  reset_ = true;
}

void TcpStreamCapture::segment(std::uint64_t now, TcpSide from, std::uint8_t flags,
                               std::span<const std::uint8_t> payload) {
  End& src = end(from);
  const End& dst = end(peer(from));
  const bool syn = flags & wire::Tcp::syn;
  wire::TcpRepr tcp;
  tcp.src_port = src.port;
  tcp.dst_port = dst.port;
  tcp.seq = src.next_seq;
  tcp.ack = (flags & wire::Tcp::ack_flag) ? dst.next_seq : 0;
  tcp.flags = flags;
  tcp.window = kWindow;
  tcp.mss = syn ? mss_ : 0;
  const std::size_t ip_length = ipv4_ ? wire::Ipv4::min_length : wire::Ipv6::length;
  const std::size_t tcp_length = tcp.header_length() + payload.size();

  frame_.resize(wire::Ethernet::length + ip_length + tcp_length);
  std::uint8_t* ip = frame_.data() + wire::Ethernet::length;
  std::uint8_t* header = ip + ip_length;
  wire::EthernetRepr{dst.mac, src.mac, -1}.emit(frame_.data(), ipv4_ ? wire::ethertype::ipv4 : wire::ethertype::ipv6);
  const std::span<const std::uint8_t> src_ip = ip_bytes(src.address, ipv4_), dst_ip = ip_bytes(dst.address, ipv4_);
  if (ipv4_) {
    wire::Ipv4Repr v4;
    std::copy(src_ip.begin(), src_ip.end(), v4.src.begin());
    std::copy(dst_ip.begin(), dst_ip.end(), v4.dst.begin());
    v4.protocol = wire::ip_proto::tcp;
    v4.emit(ip, tcp_length);
  } else {
    wire::Ipv6Repr v6{src.address, dst.address, wire::ip_proto::tcp};
    v6.emit(ip, tcp_length);
  }
  std::uint8_t* data = header + tcp.header_length();
  std::copy(payload.begin(), payload.end(), data);
  tcp.emit(header, src_ip, dst_ip, {data, payload.size()});
  sink_(now, frame_);

  // A SYN and a FIN each take a sequence number of their own (RFC 9293 s3.4).
  src.next_seq += static_cast<std::uint32_t>(payload.size()) + (syn || (flags & wire::Tcp::fin) ? 1 : 0);
}

}  // namespace softrdma::net
