#include "wire/iwarp/mpa.hpp"

#include <algorithm>
#include <cstring>

#include "wire/crc32.hpp"

namespace wire::iwarp {
namespace {

bool key_is(std::span<const std::uint8_t> bytes, std::string_view key) {
  return std::equal(key.begin(), key.end(), bytes.begin(),
                    [](char k, std::uint8_t b) { return static_cast<std::uint8_t>(k) == b; });
}

bool enhanced_frame(const std::uint8_t* header) {
  return MpaFrame::revision::get(header) == 2 && MpaFrame::enhanced::get(header);
}

}  // namespace

Result<std::size_t> MpaRequestReply::frame_length(std::span<const std::uint8_t> header) {
  if (header.size() < MpaFrame::header_length) return Error::truncated;
  if (!key_is(header, mpa_request_key) && !key_is(header, mpa_reply_key)) return Error::bad_mpa_key;
  const std::uint8_t* p = header.data();
  // RFC 5044 s7.1 defines revision 1; RFC 6581 adds revision 2.
  const unsigned revision = MpaFrame::revision::get(p);
  if (revision != 1 && revision != 2) return Error::bad_version;
  const std::size_t pd = MpaFrame::pd_length::get(p);
  if (pd > MpaFrame::max_private_data) return Error::oversized;  // RFC 5044 s7.1
  if (enhanced_frame(p) && pd < MpaIrdOrd::length) return Error::bad_length;
  return MpaFrame::header_length + pd;
}

Result<MpaRequestReply> MpaRequestReply::parse(std::span<const std::uint8_t> bytes) {
  const Result<std::size_t> total = frame_length(bytes);
  if (!total) return total.error();
  if (bytes.size() < *total) return Error::truncated;
  const std::uint8_t* p = bytes.data();
  MpaRequestReply f;
  f.kind = key_is(bytes, mpa_request_key) ? MpaFrameKind::request : MpaFrameKind::reply;
  f.markers = MpaFrame::markers::get(p);
  f.crc = MpaFrame::crc::get(p);
  f.reject = MpaFrame::reject::get(p);
  f.revision = MpaFrame::revision::get(p);
  std::span<const std::uint8_t> pd = bytes.subspan(MpaFrame::header_length, *total - MpaFrame::header_length);
  if (enhanced_frame(p)) {
    const std::uint8_t* w = pd.data();
    f.enhanced = MpaEnhanced{MpaIrdOrd::ird::get(w),      MpaIrdOrd::ord::get(w),       MpaIrdOrd::peer_to_peer::get(w),
                             MpaIrdOrd::send_rtr::get(w), MpaIrdOrd::write_rtr::get(w), MpaIrdOrd::read_rtr::get(w)};
    pd = pd.subspan(MpaIrdOrd::length);
  }
  f.private_data.assign(pd.begin(), pd.end());
  return f;
}

void MpaRequestReply::emit(std::uint8_t* out) const {
  const std::string_view key = kind == MpaFrameKind::request ? mpa_request_key : mpa_reply_key;
  std::memcpy(out, key.data(), MpaFrame::key_length);
  out[16] = 0;  // Res bits are sent as zero (RFC 5044 s7.1)
  MpaFrame::markers::set(out, markers);
  MpaFrame::crc::set(out, crc);
  MpaFrame::reject::set(out, reject);
  const bool with_ird_ord = enhanced && revision == 2;
  MpaFrame::enhanced::set(out, with_ird_ord);
  MpaFrame::revision::set(out, revision);
  MpaFrame::pd_length::set(out, (with_ird_ord ? MpaIrdOrd::length : 0) + private_data.size());
  std::uint8_t* pd = out + MpaFrame::header_length;
  if (with_ird_ord) {
    MpaIrdOrd::ird::set(pd, enhanced->ird);
    MpaIrdOrd::ord::set(pd, enhanced->ord);
    MpaIrdOrd::peer_to_peer::set(pd, enhanced->peer_to_peer);
    MpaIrdOrd::send_rtr::set(pd, enhanced->send_rtr);
    MpaIrdOrd::write_rtr::set(pd, enhanced->write_rtr);
    MpaIrdOrd::read_rtr::set(pd, enhanced->read_rtr);
    pd += MpaIrdOrd::length;
  }
  std::copy(private_data.begin(), private_data.end(), pd);
}

std::uint32_t fpdu_crc_from_wire(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

Result<FpduView> FpduView::check(std::span<const std::uint8_t> bytes, bool crc) {
  if (bytes.size() < Fpdu::length_field) return Error::truncated;
  const std::size_t total = fpdu_length(Fpdu::ulpdu_length::get(bytes.data()));
  if (bytes.size() < total) return Error::truncated;
  return FpduView(bytes.first(total), crc);
}

std::uint32_t FpduView::received_crc() const {
  return fpdu_crc_from_wire(bytes_.data() + bytes_.size() - Fpdu::crc_length);
}

std::uint32_t FpduView::computed_crc() const { return crc32c(bytes_.first(bytes_.size() - Fpdu::crc_length)); }

std::size_t seal_fpdu(std::uint8_t* out, std::size_t ulpdu_length, bool crc) {
  Fpdu::ulpdu_length::set(out, ulpdu_length);
  const std::size_t end = Fpdu::length_field + ulpdu_length;
  const std::size_t pad = fpdu_pad_length(ulpdu_length);
  std::fill_n(out + end, pad, std::uint8_t{0});
  const std::uint32_t c = crc ? crc32c({out, end + pad}) : 0;
  for (std::size_t i = 0; i < Fpdu::crc_length; ++i) out[end + pad + i] = static_cast<std::uint8_t>(c >> (8 * i));
  return end + pad + Fpdu::crc_length;
}

std::size_t emit_fpdu(std::uint8_t* out, std::span<const std::uint8_t> ulpdu, bool crc) {
  std::copy(ulpdu.begin(), ulpdu.end(), out + Fpdu::length_field);
  return seal_fpdu(out, ulpdu.size(), crc);
}

}  // namespace wire::iwarp
