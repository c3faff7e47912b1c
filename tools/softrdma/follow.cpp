#include "tools/softrdma/follow.hpp"

#include <algorithm>

#include "emulator/core/psn.hpp"
#include "emulator/core/rnr_timer.hpp"

namespace softrdma::dump {
namespace {

using wire::OpFlag;

// How far behind the furthest PSN the packets seen are remembered. Half the 24-bit space is
// the most that can be told apart at all (s9.7.1); a requester's window of outstanding PSNs
// is far smaller in practice, and 2^18 of them keep the memory of a long capture near 16 MB.
// A resend from further back would be called late, not a retransmission.
constexpr std::int64_t kPsnWindow = 1 << 18;
constexpr std::uint32_t kMinMtu = 256, kMaxMtu = 4096;  // path MTUs, s9.7 / s7.7.8

std::uint32_t packets_for(std::uint32_t length, std::uint32_t mtu) {
  return length == 0 ? 1 : (length + mtu - 1) / mtu;
}

// Packets that end neither a message nor a READ response carry exactly one path MTU.
bool carries_full_mtu(const wire::OpcodeInfo& i) { return i.is(OpFlag::payload) && !i.is(OpFlag::last); }

std::optional<NakKind> nak_of(std::uint8_t syndrome) {
  switch (wire::ack_kind(syndrome)) {
    case wire::AckKind::ack:
      return std::nullopt;
    case wire::AckKind::rnr_nak:
      return NakKind::rnr;
    case wire::AckKind::reserved:
      return NakKind::other;
    case wire::AckKind::nak:
      break;
  }
  switch (static_cast<wire::NakCode>(wire::syndrome_value(syndrome))) {
    case wire::NakCode::psn_sequence_error:
      return NakKind::psn_sequence_error;
    case wire::NakCode::invalid_request:
      return NakKind::invalid_request;
    case wire::NakCode::remote_access_error:
      return NakKind::remote_access_error;
    case wire::NakCode::remote_operational_error:
      return NakKind::remote_operational_error;
    default:
      return NakKind::other;
  }
}

}  // namespace

const char* name(NakKind k) {
  switch (k) {
    case NakKind::psn_sequence_error:
      return "PSN_SEQUENCE_ERROR";
    case NakKind::rnr:
      return "RNR";
    case NakKind::invalid_request:
      return "INVALID_REQUEST";
    case NakKind::remote_access_error:
      return "REMOTE_ACCESS_ERROR";
    case NakKind::remote_operational_error:
      return "REMOTE_OPERATIONAL_ERROR";
    case NakKind::other:
    case NakKind::count:
      break;
  }
  return "OTHER";
}

std::int64_t Follower::PsnSpace::unwrap(std::uint32_t psn) const {
  const std::optional<std::int64_t> ref = furthest ? furthest : furthest_response;
  if (!ref) return psn;
  const auto ref24 = static_cast<std::uint32_t>(*ref) & core::kPsnMask;
  return *ref + core::psn_diff(psn, ref24);
}

std::uint32_t Follower::PsnSpace::span(const Request& r) const {
  if (!r.read) return r.span;
  return packets_for(r.read_length, mtu ? mtu : kMaxMtu);
}

std::uint32_t Follower::PsnSpace::max_span(const Request& r) const {
  if (!r.read || mtu) return span(r);
  return packets_for(r.read_length, kMinMtu);
}

std::optional<std::pair<std::int64_t, Follower::Request>> Follower::PsnSpace::request_holding(std::int64_t psn) const {
  auto it = requests.upper_bound(psn);
  if (it == requests.begin()) return std::nullopt;
  --it;
  if (psn >= it->first + span(it->second)) return std::nullopt;
  return *it;
}

void Follower::PsnSpace::forget_old() {
  const std::optional<std::int64_t> ref = furthest ? furthest : furthest_response;
  if (!ref) return;
  const std::int64_t oldest = *ref - kPsnWindow;
  while (!requests.empty() && requests.begin()->first < oldest) requests.erase(requests.begin());
  while (!responses.empty() && *responses.begin() < oldest) responses.erase(responses.begin());
}

PacketFlags Follower::feed(Direction d, const wire::IbPacket& p, bool icrc_ok) {
  PacketFlags f;
  // A copy made on the way (a switch, a fault stage) arrives right behind its original; a
  // resend comes after the peer has answered or a timer has run. The ICRC is not compared: it
  // covers the IPv4 ID too, and a copy queued behind its original in one GSO send leaves with
  // the next ID, so with another ICRC.
  const std::span<const std::uint8_t> bytes = p.covered();
  f.duplicate = last_direction_ == d && std::equal(bytes.begin(), bytes.end(), last_bytes_.begin(), last_bytes_.end());
  last_direction_ = d;
  last_bytes_.assign(bytes.begin(), bytes.end());
  f.bad_icrc = !icrc_ok;

  const wire::OpcodeInfo& info = p.info();
  if (const std::uint8_t* aeth = p.ext(wire::Ext::aeth)) {
    const std::uint8_t syndrome = wire::Aeth::syndrome::get(aeth);
    f.nak = nak_of(syndrome);
    if (f.nak == NakKind::rnr) f.rnr_delay_ns = core::rnr_delay(wire::syndrome_value(syndrome));
  }
  if (!f.duplicate && !f.bad_icrc) {
    if (info.is(OpFlag::request)) judge_request(spaces_[index(d)], p, f);
    if (info.is(OpFlag::response)) judge_response(spaces_[index(opposite(d))], p, f);
  }
  count(d, f);
  return f;
}

void Follower::judge_request(PsnSpace& s, const wire::IbPacket& p, PacketFlags& f) {
  const wire::OpcodeInfo& info = p.info();
  if (carries_full_mtu(info)) s.mtu = static_cast<std::uint32_t>(p.payload().size());
  Request r;
  if (info.is(OpFlag::read)) {
    r.read = true;
    r.read_length = wire::Reth::dma_length::get(p.ext(wire::Ext::reth));
  }
  const std::int64_t psn = s.unwrap(p.psn());
  bool ahead = true;
  if (s.furthest) {
    const std::int64_t next = *s.furthest + 1;
    if (psn > next + s.slack) {
      f.gap = static_cast<std::uint32_t>(psn - (next + s.slack));
    } else if (psn < next) {
      ahead = false;
      (s.request_holding(psn) ? f.retransmission : f.late) = true;
    } else if (s.request_holding(psn)) {
      // Within the slack of a READ sent before the path MTU was known, and inside it now
      // that the MTU is: a restart of that READ from a later response PSN.
      ahead = false;
      f.retransmission = true;
    }
  }
  s.requests[psn] = r;
  if (ahead) {
    s.furthest = psn + s.span(r) - 1;
    s.slack = s.max_span(r) - s.span(r);
  }
  s.forget_old();
}

void Follower::judge_response(PsnSpace& s, const wire::IbPacket& p, PacketFlags& f) {
  const wire::OpcodeInfo& info = p.info();
  const bool read = info.is(OpFlag::read), atomic = info.is(OpFlag::atomic);
  if (!read && !atomic) return;  // plain ACKs: coalesced ones skip PSNs, and that is normal (s9.7.5.1)
  if (carries_full_mtu(info)) s.mtu = static_cast<std::uint32_t>(p.payload().size());
  const std::int64_t psn = s.unwrap(p.psn());
  if (s.responses.contains(psn)) {
    f.retransmission = true;  // the responder executed a duplicate READ again, or replayed an atomic's result
  } else if (s.furthest_response && psn < *s.furthest_response) {
    f.late = true;
  } else if (read) {
    // Every READ response PSN follows the one before it, from the READ request's own PSN on.
    const std::optional<std::int64_t> open = s.read_next;
    std::int64_t missing = 0;
    if (info.is(OpFlag::first)) {
      if (open) {  // the READ before ended without its LAST
        const auto req = s.request_holding(*open - 1);
        std::int64_t end = req ? req->first + s.span(req->second) : *open;
        if (psn >= *open && psn < end) end = psn;  // the READ resumed inside itself
        missing = end - *open;
      }
    } else if (open) {
      missing = psn - *open;
    } else if (const auto req = s.request_holding(psn); req && req->second.read) {
      missing = psn - req->first;  // its FIRST never came
    }
    if (missing > 0) f.read_gap = static_cast<std::uint32_t>(missing);
  }
  s.responses.insert(psn);
  if (!s.furthest_response || psn > *s.furthest_response) s.furthest_response = psn;
  if (read && !info.is(OpFlag::last))
    s.read_next = psn + 1;
  else if (read)
    s.read_next.reset();
  s.forget_old();
}

void Follower::count(Direction d, const PacketFlags& f) {
  DirectionSummary& s = summaries_[index(d)];
  ++s.packets;
  s.gaps += f.gap > 0;
  s.missing_psns += f.gap;
  s.read_gaps += f.read_gap > 0;
  s.missing_read_psns += f.read_gap;
  s.retransmissions += f.retransmission;
  s.late += f.late;
  s.duplicates += f.duplicate;
  s.bad_icrc += f.bad_icrc;
  if (f.nak) ++s.naks[static_cast<std::size_t>(*f.nak)];
}

}  // namespace softrdma::dump
