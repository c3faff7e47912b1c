#include "emulator/core/mpa_handshake.hpp"

#include <algorithm>
#include <utility>

namespace softrdma::core {
namespace {

using wire::iwarp::MpaEnhanced;
using wire::iwarp::MpaFrame;
using wire::iwarp::MpaFrameKind;
using wire::iwarp::MpaRequestReply;

MpaRequestReply frame_of(MpaFrameKind kind, const MpaOffer& offer, std::uint8_t revision) {
  MpaRequestReply f;
  f.kind = kind;
  f.crc = offer.crc;
  f.revision = revision;
  if (revision == 2) f.enhanced = MpaEnhanced{offer.ird, offer.ord};
  f.private_data = offer.private_data;
  return f;
}

}  // namespace

MpaHandshake MpaHandshake::initiate(const MpaOffer& offer) {
  MpaHandshake h(State::awaiting_reply);
  h.offer_ = offer;
  h.send_frame(frame_of(MpaFrameKind::request, offer, 2));
  return h;
}

MpaHandshake MpaHandshake::respond() { return MpaHandshake(State::awaiting_request); }

std::size_t MpaHandshake::receive(std::span<const std::uint8_t> bytes) {
  if (state_ != State::awaiting_request && state_ != State::awaiting_reply) return 0;
  // The fixed header first, to learn the frame's length; then the rest of the frame.
  std::size_t used = take(bytes, MpaFrame::header_length);
  if (inbound_.size() < MpaFrame::header_length) return used;
  const auto length = MpaRequestReply::frame_length(inbound_);
  if (!length) {
    fail(length.error() == wire::Error::bad_mpa_key ? "the peer's first bytes are not an MPA frame"
                                                    : "the peer's MPA frame has a bad revision or length");
    return used;
  }
  used += take(bytes.subspan(used), *length);
  if (inbound_.size() < *length) return used;
  auto frame = MpaRequestReply::parse(inbound_);
  if (!frame) {
    fail("the peer's MPA frame is malformed");
    return used;
  }
  on_frame(std::move(frame.value()));
  return used;
}

std::size_t MpaHandshake::take(std::span<const std::uint8_t> bytes, std::size_t up_to) {
  const std::size_t n = std::min(up_to - std::min(up_to, inbound_.size()), bytes.size());
  inbound_.insert(inbound_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
  return n;
}

void MpaHandshake::on_frame(MpaRequestReply frame) {
  peer_ = std::move(frame);
  const bool want_request = state_ == State::awaiting_request;
  if ((peer_.kind == MpaFrameKind::request) != want_request)
    return fail(want_request ? "the peer sent an MPA Reply where a Request belongs"
                             : "the peer sent an MPA Request where a Reply belongs");
  want_request ? on_request() : on_reply();
}

void MpaHandshake::on_request() {
  if (peer_.markers) {
    // RFC 5044 s7.1.3: a responder that cannot meet the Request rejects it.
    MpaRequestReply r;
    r.kind = MpaFrameKind::reply;
    r.reject = true;
    r.revision = peer_.revision;
    send_frame(r);
    return fail("the peer asked for MPA markers, which softrdma does not implement");
  }
  state_ = State::request_received;
}

void MpaHandshake::on_reply() {
  if (peer_.reject) {
    state_ = State::rejected;
    return;
  }
  if (peer_.markers) return fail("the peer's MPA Reply asks for markers, which softrdma does not implement");
  // RFC 6581 s5: we may have no more reads in flight than the responder accepts.
  settled_ord_ = peer_.enhanced ? std::min(offer_.ord, peer_.enhanced->ird) : offer_.ord;
  state_ = State::established;
}

void MpaHandshake::accept(const MpaOffer& offer) {
  if (state_ != State::request_received) return;
  offer_ = offer;
  offer_.crc = offer.crc || peer_.crc;  // RFC 5044 s7.1: CRCs if either side asks
  settled_ord_ = peer_.enhanced ? std::min(offer.ord, peer_.enhanced->ird) : offer.ord;
  MpaOffer answer = offer_;
  answer.ord = settled_ord_;
  send_frame(frame_of(MpaFrameKind::reply, answer, peer_.revision));
  state_ = State::established;
}

void MpaHandshake::reject(std::span<const std::uint8_t> private_data) {
  if (state_ != State::request_received) return;
  MpaRequestReply r;
  r.kind = MpaFrameKind::reply;
  r.reject = true;
  r.revision = peer_.revision;
  if (r.revision == 2) r.enhanced = MpaEnhanced{};
  r.private_data.assign(private_data.begin(), private_data.end());
  send_frame(r);
  state_ = State::rejected;
}

std::vector<std::uint8_t> MpaHandshake::take_output() { return std::exchange(output_, {}); }

StreamParams MpaHandshake::settled(std::uint32_t max_fpdu) const {
  StreamParams p;
  p.crc = offer_.crc || peer_.crc;
  p.max_fpdu = max_fpdu;
  p.ird = offer_.ird;
  p.ord = settled_ord_;
  return p;
}

void MpaHandshake::send_frame(const MpaRequestReply& frame) {
  const std::size_t at = output_.size();
  output_.resize(at + frame.length());
  frame.emit(output_.data() + at);
}

void MpaHandshake::fail(std::string_view why) {
  state_ = State::failed;
  failure_ = why;
}

}  // namespace softrdma::core
