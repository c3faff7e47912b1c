// `softrdma dump --follow`'s analysis: one QP conversation's packets, fed in capture order,
// each judged against what came before it in its direction with IBTA vol. 1 ch. 9's rules
// (s9.7.1 PSNs, s9.7.5.1 the AETH). A state machine with no I/O, so tests can feed
// it hand-built packets.
//
// Each side's requests have a PSN space of their own (s9.7.1); the responses to them travel
// the other way in the same space. So the requests of one direction and the responses of the
// other are judged together.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "wire/ib_packet.hpp"

namespace softrdma::dump {

// in: addressed to the followed QP; out: sent by the followed QP's side to its peer.
enum class Direction : std::uint8_t { in = 0, out = 1 };
constexpr Direction opposite(Direction d) { return d == Direction::in ? Direction::out : Direction::in; }
constexpr const char* name(Direction d) { return d == Direction::in ? "in" : "out"; }

// The NAKs of an AETH syndrome (s9.7.5.1 table 44, NAK codes of table 45).
enum class NakKind : std::uint8_t {
  psn_sequence_error,
  rnr,
  invalid_request,
  remote_access_error,
  remote_operational_error,
  other,  // invalid RD request, reserved codes
  count,
};
const char* name(NakKind k);

struct PacketFlags {
  std::uint32_t gap = 0;        // request PSNs skipped: its PSN is beyond the next expected one (s9.7.1)
  std::uint32_t read_gap = 0;   // READ response PSNs missing before this one
  bool retransmission = false;  // a PSN already seen in this direction: a go-back-N resend
  bool late = false;  // behind the furthest PSN, never seen: fills an earlier gap (reordered, or resent after a loss
                      // before the capture point)
  bool duplicate = false;  // the same bytes as the packet just before it, in the same direction
  std::optional<NakKind> nak;
  std::uint64_t rnr_delay_ns = 0;  // when nak is rnr: the timer field's delay (table 45)
  bool bad_icrc = false;           // the receiver drops it (s9.6.1.1), so it takes no part in the PSN analysis
};

struct DirectionSummary {
  std::uint64_t packets = 0;
  std::uint64_t gaps = 0, missing_psns = 0;
  std::uint64_t read_gaps = 0, missing_read_psns = 0;
  std::uint64_t retransmissions = 0;
  std::uint64_t late = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t bad_icrc = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(NakKind::count)> naks{};
  std::uint64_t nak_count(NakKind k) const { return naks[static_cast<std::size_t>(k)]; }
};

class Follower {
 public:
  // Judges the next packet of the conversation, travelling in direction `d`.
  PacketFlags feed(Direction d, const wire::IbPacket& p, bool icrc_ok);
  const DirectionSummary& summary(Direction d) const { return summaries_[index(d)]; }

 private:
  static constexpr std::size_t index(Direction d) { return static_cast<std::size_t>(d); }

  struct Request {
    std::uint32_t span = 1;         // PSNs the request takes: a READ one per response packet
    std::uint32_t read_length = 0;  // a READ's DMA length: its span once the path MTU is known
    bool read = false;
  };

  // One requester's PSNs, unwrapped to 64 bits around the furthest seen so that 24-bit wrap
  // (s9.7.1) never reorders them.
  struct PsnSpace {
    std::optional<std::int64_t> furthest;      // last PSN of the furthest request
    std::uint32_t slack = 0;                   // a READ of unknown span: the next request may start this much later
    std::map<std::int64_t, Request> requests;  // by first PSN
    std::uint32_t mtu = 0;  // the path MTU, learned from FIRST/MIDDLE payloads (exactly one MTU each, ch. 9.7)

    std::optional<std::int64_t> read_next;          // inside a READ response: the next PSN due
    std::optional<std::int64_t> furthest_response;  // of READ responses and atomic ACKs
    std::set<std::int64_t> responses;               // READ response and atomic ACK PSNs seen

    std::int64_t unwrap(std::uint32_t psn) const;
    std::uint32_t span(const Request& r) const;
    std::uint32_t max_span(const Request& r) const;  // at the smallest MTU, 256
    // The request whose PSNs hold `psn`, with its first PSN.
    std::optional<std::pair<std::int64_t, Request>> request_holding(std::int64_t psn) const;
    void forget_old();
  };

  void judge_request(PsnSpace& s, const wire::IbPacket& p, PacketFlags& f);
  void judge_response(PsnSpace& s, const wire::IbPacket& p, PacketFlags& f);
  void count(Direction d, const PacketFlags& f);

  std::array<PsnSpace, 2> spaces_;  // indexed by the direction the space's requests travel
  std::array<DirectionSummary, 2> summaries_;
  std::optional<Direction> last_direction_;
  std::vector<std::uint8_t> last_bytes_;
};

}  // namespace softrdma::dump
