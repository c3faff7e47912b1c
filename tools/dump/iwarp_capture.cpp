#include "tools/dump/iwarp_capture.hpp"

#include <algorithm>
#include <string_view>

#include "wire/ethernet.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/tcp.hpp"

namespace softrdma::dump {
namespace {

using wire::iwarp::MpaItemKind;
using wire::iwarp::MpaStreamDecoder;
using wire::iwarp::MpaStreamItem;

// The part both MPA keys share ("MPA ID Req Frame", "MPA ID Rep Frame"): a stream that does
// not start with it is not MPA and gets no decoder.
constexpr std::string_view kKeyPrefix = "MPA ID Re";

bool starts_like_mpa(std::span<const std::uint8_t> first_bytes) {
  const std::size_t n = std::min(first_bytes.size(), kKeyPrefix.size());
  return std::equal(first_bytes.begin(), first_bytes.begin() + static_cast<std::ptrdiff_t>(n), kKeyPrefix.begin(),
                    [](std::uint8_t b, char k) { return b == static_cast<std::uint8_t>(k); });
}

template <std::size_t N>
void set_address(TcpEndpoint& e, const std::array<std::uint8_t, N>& a) {
  std::copy(a.begin(), a.end(), e.address.begin());
  e.address_length = static_cast<std::uint8_t>(N);
}

std::optional<TcpSegment> tcp_segment(std::span<const std::uint8_t> frame) {
  const auto eth = wire::EthernetView::check(frame);
  if (!eth) return std::nullopt;
  TcpSegment s;
  std::span<const std::uint8_t> l4;
  if (eth->type() == wire::ethertype::ipv4) {
    const auto ip = wire::Ipv4View::check(eth->payload());
    if (!ip || ip->protocol() != wire::ip_proto::tcp || ip->is_fragment()) return std::nullopt;
    set_address(s.source, ip->src());
    set_address(s.destination, ip->dst());
    l4 = ip->payload();
  } else if (eth->type() == wire::ethertype::ipv6) {
    const auto ip = wire::Ipv6View::check(eth->payload());
    if (!ip || ip->next_header() != wire::ip_proto::tcp) return std::nullopt;
    set_address(s.source, ip->src());
    set_address(s.destination, ip->dst());
    l4 = ip->payload();
  } else {
    return std::nullopt;
  }
  const auto tcp = wire::TcpView::check(l4);
  if (!tcp) return std::nullopt;
  s.source.port = tcp->src_port();
  s.destination.port = tcp->dst_port();
  s.seq = tcp->seq();
  s.flags = tcp->flags();
  s.payload = tcp->payload();
  return s;
}

TcpDirection other(TcpDirection d) { return {d.connection, 1 - d.side}; }

}  // namespace

bool IwarpCaptureDecoder::add_frame(std::uint64_t frame_number, const net::CapturedPacket& packet, const Sink& sink) {
  if (packet.truncated()) {
    // Part of its payload is not in the file: following it would invent bytes.
    cut_frames_.push_back(frame_number);
    return false;
  }
  const std::optional<TcpSegment> s = tcp_segment(packet.data);
  if (!s) return false;
  const TcpDirection d = tcp_.add(
      *s, [&](TcpDirection dir, std::span<const std::uint8_t> bytes) { deliver(dir, bytes, frame_number, sink); });
  if (tcp_.stream(d).closed()) connection(d.connection).sides[d.side].decoder.reset();  // no more bytes come
  return true;
}

IwarpCaptureDecoder::Connection& IwarpCaptureDecoder::connection(std::size_t index) {
  if (connections_.size() <= index) connections_.resize(index + 1);
  return connections_[index];
}

void IwarpCaptureDecoder::deliver(TcpDirection d, std::span<const std::uint8_t> bytes, std::uint64_t frame_number,
                                  const Sink& sink) {
  Side& side = connection(d.connection).sides[d.side];
  if (!side.decoder) {
    if (side.state != SideState::unknown) return;  // ignored, stopped, or its stream closed
    if (!starts_like_mpa(bytes)) {
      side.state = SideState::not_mpa;
      return;
    }
    side.decoder = std::make_unique<MpaStreamDecoder>();
  }
  side.decoder->feed(bytes, [&](const MpaStreamItem& item) { on_item(d, item, frame_number, sink); });
  if (side.state == SideState::not_mpa || side.state == SideState::stopped) side.decoder.reset();
}

void IwarpCaptureDecoder::on_item(TcpDirection d, const MpaStreamItem& item, std::uint64_t frame_number,
                                  const Sink& sink) {
  Side& side = connections_[d.connection].sides[d.side];
  Side& peer = connections_[d.connection].sides[1 - d.side];
  if (item.kind == MpaItemKind::error) {
    // A stream that merely looked like MPA for a few bytes is not an error, unless its peer
    // did speak MPA.
    const bool not_mpa =
        item.error == wire::Error::bad_mpa_key && item.stream_offset == 0 && peer.state != SideState::mpa;
    side.state = not_mpa ? SideState::not_mpa : SideState::stopped;
    if (not_mpa) return;
  } else if (item.kind != MpaItemKind::fpdu) {
    side.state = SideState::mpa;
    side.frame = item.frame;
    if (peer.frame) negotiate(connections_[d.connection]);
  }
  sink(IwarpCaptureFrame{frame_number, d.connection, tcp_.source(d), tcp_.source(other(d)), item});
}

// RFC 5044 s7.1: a side sends markers when the peer's frame asked for them (M), and both
// sides use CRCs when either frame asked (C).
void IwarpCaptureDecoder::negotiate(Connection& c) {
  const bool crc = c.sides[0].frame->crc || c.sides[1].frame->crc;
  for (int i = 0; i < 2; ++i) {
    if (c.sides[i].decoder) c.sides[i].decoder->set_negotiated(c.sides[1 - i].frame->markers, crc);
  }
}

std::vector<std::string> IwarpCaptureDecoder::notes() const {
  std::vector<std::string> out;
  for (std::uint64_t f : cut_frames_)
    out.push_back("frame " + std::to_string(f) + ": cut by the snaplen, not followed");
  for (std::size_t c = 0; c < connections_.size(); ++c) {
    for (int i = 0; i < 2; ++i) {
      const TcpDirection d{c, i};
      const TcpStreamReassembler& st = tcp_.stream(d);
      if (connections_[c].sides[i].state != SideState::mpa) continue;
      if (st.held_bytes() == 0 && st.refused_bytes() == 0) continue;
      out.push_back(to_string(tcp_.source(d)) + " > " + to_string(tcp_.source(other(d))) + ": " +
                    std::to_string(st.held_bytes() + st.refused_bytes()) +
                    " bytes behind a gap that never filled, not decoded");
    }
  }
  return out;
}

IwarpCaptureResult decode_iwarp_capture(const std::string& path) {
  IwarpCaptureResult r;
  std::string error;
  std::optional<net::PcapReader> reader = net::PcapReader::open(path, error);
  if (!reader) {
    r.errors.push_back("cannot read " + path + ": " + error);
    return r;
  }
  if (reader->link_type() != net::kLinkEthernet) {
    r.errors.push_back(path + ": link type " + std::to_string(reader->link_type()) + " is not Ethernet");
    return r;
  }
  IwarpCaptureDecoder decoder;
  while (const std::optional<net::CapturedPacket> p = reader->next()) {
    decoder.add_frame(++r.packets, *p, [&](const IwarpCaptureFrame& f) {
      r.frames.push_back(f);
      r.frames.back().item.fpdu.message.payload = {};
    });
  }
  if (!reader->error().empty()) r.errors.push_back(path + ": " + reader->error());
  for (std::string& n : decoder.notes()) r.errors.push_back(std::move(n));
  return r;
}

}  // namespace softrdma::dump
