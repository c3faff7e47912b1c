// One TCP connection as a packet capture would show it, made up from what a host that carries
// the connection through kernel sockets sees: its two ends and the bytes each direction
// carries, in the order the host writes and reads them. The kernel's segments are out of
// reach (that takes a raw socket and root), so this writes the frames a capture on the wire
// would hold, for Wireshark and `softrdma dump` to follow the stream and decode what it
// carries (MPA/DDP/RDMAP for iWARP):
// - open(): SYN, SYN-ACK, ACK, each SYN with the MSS option (RFC 9293 s3.5, s3.7.1);
// - data(): segments of at most one MSS, the last of each call with PSH, every one numbered
//   and acknowledging all the peer sent; the receiver ACKs every second full segment and
//   the end of each call, as delayed ACKs do (RFC 9293 s3.8.6.3), and sooner when the
//   65535-byte window both ends advertise could not take another segment;
// - close(): one side's FIN and the peer's ACK (each side closes on its own, RFC 9293 s3.6);
// - reset(): one side's RST, after which the connection has ended.
// Frames are Ethernet with the MACs the capture stage gives addresses (mac_for()), IPv4 with
// DF, ID 0 and TTL 64, or IPv6 with hop limit 64, and TCP with window 65535 and no option
// but the SYNs' MSS; IP and TCP checksums computed.
//
// Sans-I/O: time comes in as an argument and frames go to the sink with their time; the sink
// writes them (PcapWriter) or queues them. Not thread-safe: one caller at a time.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "emulator/core/verbs_types.hpp"
#include "wire/ethernet.hpp"

namespace softrdma::net {

enum class TcpSide : std::uint8_t { local, remote };

struct TcpConnectionEnds {
  // IPv4 addresses IPv4-mapped (::ffff:a.b.c.d), as core::Endpoints holds them; both ends of
  // one family.
  core::Gid local_address{};
  core::Gid remote_address{};
  std::uint16_t local_port = 0;
  std::uint16_t remote_port = 0;
  TcpSide opener = TcpSide::local;  // which side sent the SYN
};

struct TcpCaptureOptions {
  // The largest segment, at most kMaxMss; 0: 1460 over IPv4, 1440 over IPv6 (a 1500-byte MTU
  // less the IP and TCP headers).
  std::uint16_t mss = 0;
  std::uint32_t local_isn = 0;  // initial sequence numbers: any will do, readers count from them
  std::uint32_t remote_isn = 0;
};

class TcpStreamCapture {
 public:
  // IPv4's total length is 16 bits: a 20-byte IP and a 20-byte TCP header leave this much.
  static constexpr std::uint16_t kMaxMss = 65535 - 40;

  // `frame` is valid during the call only.
  using FrameSink = std::function<void(std::uint64_t time_ns, std::span<const std::uint8_t> frame)>;

  TcpStreamCapture(const TcpConnectionEnds& ends, FrameSink sink, TcpCaptureOptions options = {});

  std::uint16_t mss() const { return mss_; }
  bool ended() const;  // reset, or closed by both sides: later calls write nothing

  // The three-way handshake. A connection whose capture starts later needs none: readers
  // follow a stream from its first segment.
  void open(std::uint64_t now);
  // `bytes` sent by `from` (written by the host when local, read by it when remote). Nothing
  // once `from` has closed.
  void data(std::uint64_t now, TcpSide from, std::span<const std::uint8_t> bytes);
  void close(std::uint64_t now, TcpSide from);
  void reset(std::uint64_t now, TcpSide from);

 private:
  struct End {
    core::Gid address{};
    std::uint16_t port = 0;
    wire::MacAddress mac{};
    std::uint32_t next_seq = 0;  // the sequence number of its next byte, or of its SYN or FIN
    bool closed = false;         // sent its FIN
  };

  End& end(TcpSide side) { return ends_[static_cast<std::size_t>(side)]; }
  static TcpSide peer(TcpSide side) { return side == TcpSide::local ? TcpSide::remote : TcpSide::local; }
  // One segment from `from`, acknowledging all the peer sent; advances from's next_seq.
  void segment(std::uint64_t now, TcpSide from, std::uint8_t flags, std::span<const std::uint8_t> payload = {});

  std::array<End, 2> ends_;  // by TcpSide
  TcpSide opener_;
  bool ipv4_;
  std::uint16_t mss_;
  FrameSink sink_;
  bool reset_ = false;
  std::vector<std::uint8_t> frame_;  // the frame being built, reused
};

}  // namespace softrdma::net
