// TCP stream reassembly for capture decoding: segments in, in-order payload bytes out.
//
// Enough TCP (RFC 9293 s3.4) to follow a capture: a SYN takes one sequence number,
// retransmitted bytes are dropped, segments that arrive ahead of a gap are held (up to a
// bound per direction) until the gap fills, FIN (once reached in order) and RST end a
// direction, and sequence numbers wrap. A capture that starts after the SYN is followed from
// the first segment seen. Connections are keyed by their 4-tuple; a 4-tuple reused for a
// second connection in the same capture is not told apart.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace softrdma::dump {

struct TcpEndpoint {
  std::array<std::uint8_t, 16> address{};  // IPv4 in the first 4 bytes
  std::uint8_t address_length = 4;         // 4 or 16
  std::uint16_t port = 0;
  auto operator<=>(const TcpEndpoint&) const = default;
};

std::string to_string(const TcpEndpoint& e);  // "10.0.0.1:5001", "[fe80::1]:5001"

struct TcpSegment {
  TcpEndpoint source;
  TcpEndpoint destination;
  std::uint32_t seq = 0;
  std::uint8_t flags = 0;  // wire::Tcp::syn, fin, rst, ...
  std::span<const std::uint8_t> payload;
};

using TcpDeliver = std::function<void(std::span<const std::uint8_t>)>;

// One direction of one connection.
class TcpStreamReassembler {
 public:
  explicit TcpStreamReassembler(std::size_t max_held_bytes) : max_held_(max_held_bytes) {}

  // Passes the bytes this segment puts in order to `deliver`, in stream order (possibly in
  // several calls: its own bytes, then held segments it joined up with).
  void add(std::uint32_t seq, std::uint8_t flags, std::span<const std::uint8_t> payload, const TcpDeliver& deliver);

  bool closed() const { return closed_; }                   // FIN reached in order, or RST
  std::uint64_t delivered() const { return delivered_; }    // in-order bytes handed out
  std::size_t held_bytes() const { return held_bytes_; }    // waiting behind a gap
  std::uint64_t refused_bytes() const { return refused_; }  // not held: over the bound

 private:
  void hold(std::uint64_t at, std::span<const std::uint8_t> payload);
  void deliver_from(std::uint64_t at, std::span<const std::uint8_t> bytes, const TcpDeliver& deliver);
  void deliver_held(const TcpDeliver& deliver);

  std::size_t max_held_;
  bool started_ = false;
  bool closed_ = false;
  std::uint32_t next_seq_ = 0;  // sequence number of stream byte `delivered_`
  std::uint64_t delivered_ = 0;
  std::optional<std::uint64_t> fin_at_;                      // stream offset of the FIN
  std::map<std::uint64_t, std::vector<std::uint8_t>> held_;  // by stream offset
  std::size_t held_bytes_ = 0;
  std::uint64_t refused_ = 0;
};

// Which connection (numbered from 0 in order of first appearance, as tshark's tcp.stream)
// and which of its directions (0: the direction of the first segment seen) a segment took.
struct TcpDirection {
  std::size_t connection = 0;
  int side = 0;
};

class TcpReassembler {
 public:
  using Deliver = std::function<void(TcpDirection, std::span<const std::uint8_t>)>;

  explicit TcpReassembler(std::size_t max_held_bytes_per_direction = std::size_t{1} << 20)
      : max_held_(max_held_bytes_per_direction) {}

  // Passes the bytes `segment` puts in order to `deliver`, with the direction they belong to,
  // and returns that direction.
  TcpDirection add(const TcpSegment& segment, const Deliver& deliver);

  std::size_t connections() const { return connections_.size(); }
  const TcpStreamReassembler& stream(TcpDirection d) const { return connections_[d.connection].sides[d.side]; }
  // The sending endpoint of a direction.
  const TcpEndpoint& source(TcpDirection d) const { return connections_[d.connection].ends[d.side]; }

 private:
  struct Connection {
    std::array<TcpEndpoint, 2> ends;  // ends[0] sent the first segment seen
    std::array<TcpStreamReassembler, 2> sides;
  };
  std::size_t max_held_;
  std::map<std::pair<TcpEndpoint, TcpEndpoint>, std::size_t> index_;  // (lower, higher) end
  std::vector<Connection> connections_;
};

}  // namespace softrdma::dump
