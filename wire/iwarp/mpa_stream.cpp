#include "wire/iwarp/mpa_stream.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <limits>

#include "wire/crc32.hpp"

namespace wire::iwarp {

MpaStreamDecoder::MpaStreamDecoder() : buffer_(std::make_unique<std::uint8_t[]>(capacity)) {}

void MpaStreamDecoder::set_negotiated(bool markers, bool crc) {
  want_markers_ = markers;
  want_crc_ = crc;
  negotiated_ = true;
}

void MpaStreamDecoder::start_full_operation(bool markers, bool crc) {
  set_negotiated(markers, crc);
  phase_ = Phase::fpdu_length;
  need_ = Fpdu::length_field;
  fill_ = 0;
  marker_base_ = offset_;
  unit_started_ = false;
}

MpaStreamDecoder::Step MpaStreamDecoder::consume(std::span<const std::uint8_t> input) {
  Step s;
  if (failed()) {
    offset_ += input.size();
    s.consumed = input.size();
    return s;
  }
  while (s.consumed < input.size()) {
    if (!unit_started_) {
      markers_ = want_markers_;
      crc_ = want_crc_;
    }
    const std::span<const std::uint8_t> rest = input.subspan(s.consumed);
    if (const std::size_t whole = whole_fpdu_at(rest)) {
      s.consumed += whole;
      s.item = fpdu_in_place(rest.first(whole));
      return s;
    }
    if (marker_fill_ > 0 || marker_due()) {
      s.consumed += take_marker_bytes(rest);
      if (marker_fill_ == MpaMarker::length) {
        marker_fill_ = 0;
        if (!marker_points_to_unit()) {
          s.item = fail(Error::bad_mpa_marker);
          return s;
        }
      }
      continue;
    }
    s.consumed += take_unit_bytes(rest);
    if (fill_ == need_) {
      s.item = unit_complete();
      if (s.item) return s;
    }
  }
  return s;
}

// RFC 5044 s4.3: in full operation a marker sits at every 512th octet counted from the
// first octet after the MPA frame, the first one opening the first FPDU.
bool MpaStreamDecoder::marker_due() const {
  return markers_ && in_full_operation() && (offset_ - marker_base_) % MpaMarker::interval == 0;
}

void MpaStreamDecoder::start_unit() {
  unit_started_ = true;
  unit_start_ = offset_;
  fill_ = 0;
  unit_markers_ = 0;
  crc_running_ = 0;
  crc_field_at_ = std::numeric_limits<std::size_t>::max();
}

std::size_t MpaStreamDecoder::take_marker_bytes(std::span<const std::uint8_t> input) {
  if (!unit_started_) start_unit();  // a marker may open an FPDU
  const std::size_t n = std::min(input.size(), MpaMarker::length - marker_fill_);
  std::copy_n(input.data(), n, marker_ + marker_fill_);
  if (crc_) crc_running_ = crc32c(input.first(n), crc_running_);  // markers are under the CRC (s4.4)
  marker_fill_ += n;
  offset_ += n;
  if (marker_fill_ == MpaMarker::length) ++unit_markers_;
  return n;
}

// FPDUPTR counts back from the marker to the first octet of the FPDU holding it; its two low
// bits are read as zero, FPDUs being 4-aligned (s4.3). The reserved half is not looked at.
bool MpaStreamDecoder::marker_points_to_unit() const {
  const std::uint64_t marker_at = offset_ - MpaMarker::length;
  return (MpaMarker::fpdu_pointer::get(marker_) & ~3u) == marker_at - unit_start_;
}

std::size_t MpaStreamDecoder::bytes_to_boundary() const {
  if (!unit_started_ || failed() || markers_) return 0;
  return need_ - fill_;
}

std::size_t MpaStreamDecoder::take_unit_bytes(std::span<const std::uint8_t> input) {
  if (!unit_started_) start_unit();
  std::size_t n = std::min(input.size(), need_ - fill_);
  if (markers_ && in_full_operation())
    n = std::min<std::size_t>(n, MpaMarker::interval - (offset_ - marker_base_) % MpaMarker::interval);
  std::copy_n(input.data(), n, buffer_.get() + fill_);
  if (crc_ && fill_ < crc_field_at_)
    crc_running_ = crc32c(input.first(std::min(n, crc_field_at_ - fill_)), crc_running_);
  fill_ += n;
  offset_ += n;
  return n;
}

std::optional<MpaStreamItem> MpaStreamDecoder::unit_complete() {
  switch (phase_) {
    case Phase::frame_header: {
      const Result<std::size_t> total = MpaRequestReply::frame_length({buffer_.get(), fill_});
      if (!total) return fail(total.error());
      if (*total == fill_) return finish_frame();
      need_ = *total;
      phase_ = Phase::frame_body;
      return std::nullopt;
    }
    case Phase::frame_body:
      return finish_frame();
    case Phase::fpdu_length:
      need_ = fpdu_length(Fpdu::ulpdu_length::get(buffer_.get()));
      crc_field_at_ = need_ - Fpdu::crc_length;
      phase_ = Phase::fpdu_body;
      return std::nullopt;
    case Phase::fpdu_body:
      return finish_fpdu({buffer_.get(), fill_}, crc_running_);
    case Phase::failed:
      break;
  }
  return std::nullopt;
}

MpaStreamItem MpaStreamDecoder::finish_frame() {
  Result<MpaRequestReply> f = MpaRequestReply::parse({buffer_.get(), fill_});
  if (!f) return fail(f.error());
  MpaStreamItem item;
  item.kind = f->kind == MpaFrameKind::request ? MpaItemKind::request : MpaItemKind::reply;
  item.stream_offset = unit_start_;
  item.end_offset = offset_;
  if (!negotiated_) {
    want_markers_ = f->markers;
    want_crc_ = f->crc;
  }
  item.frame = std::move(f.value());
  phase_ = Phase::fpdu_length;
  need_ = Fpdu::length_field;
  marker_base_ = offset_;
  unit_started_ = false;
  return item;
}

// A whole marker-free FPDU at the start of `input`: its length, else 0.
std::size_t MpaStreamDecoder::whole_fpdu_at(std::span<const std::uint8_t> input) const {
  if (unit_started_ || phase_ != Phase::fpdu_length || markers_ || input.size() < Fpdu::length_field) return 0;
  const std::size_t length = fpdu_length(Fpdu::ulpdu_length::get(input.data()));
  return input.size() >= length ? length : 0;
}

// Checks and parses an FPDU where it lies in the caller's input: no copy into buffer_.
MpaStreamItem MpaStreamDecoder::fpdu_in_place(std::span<const std::uint8_t> fpdu) {
  start_unit();
  offset_ += fpdu.size();
  const std::uint32_t crc = crc_ ? crc32c(fpdu.first(fpdu.size() - Fpdu::crc_length)) : 0;
  return finish_fpdu(fpdu, crc);
}

MpaStreamItem MpaStreamDecoder::finish_fpdu(std::span<const std::uint8_t> bytes, std::uint32_t crc_computed) {
  const Result<FpduView> view = FpduView::check(bytes, crc_);
  if (!view) return fail(view.error());
  const Result<RdmapMessage> message = RdmapMessage::parse(view->ulpdu());
  // A header that fails to parse under a failed CRC is damage, not a protocol error
  // (RFC 5044 s4.4: the CRC covers the whole FPDU).
  if (!message) return fail(crc_ && view->received_crc() != crc_computed ? Error::bad_crc : message.error());
  MpaStreamItem item;
  item.kind = MpaItemKind::fpdu;
  item.stream_offset = unit_start_;
  item.end_offset = offset_;
  MpaFpduInfo& f = item.fpdu;
  f.ulpdu_length = view->ulpdu_length();
  f.markers = unit_markers_;
  f.crc_checked = crc_;
  f.crc_received = view->received_crc();
  if (crc_) {
    f.crc_computed = crc_computed;
    f.crc_ok = f.crc_received == f.crc_computed;
  }
  f.payload_length = message->payload.size();
  f.message = *message;
  phase_ = Phase::fpdu_length;
  need_ = Fpdu::length_field;
  unit_started_ = false;
  return item;
}

MpaStreamItem MpaStreamDecoder::fail(Error e) {
  MpaStreamItem item;
  item.kind = MpaItemKind::error;
  item.error = e;
  item.stream_offset = unit_started_ ? unit_start_ : offset_;
  item.end_offset = offset_;
  phase_ = Phase::failed;
  return item;
}

namespace {

__attribute__((format(printf, 1, 2))) std::string format(const char* fmt, ...) {
  char buf[160];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

std::string describe_frame(const MpaStreamItem& item) {
  const MpaRequestReply& f = item.frame;
  std::string s = format("MPA %s rev %u M%d C%d R%d", item.kind == MpaItemKind::request ? "Request" : "Reply",
                         unsigned{f.revision}, f.markers, f.crc, f.reject);
  if (f.enhanced) {
    const MpaEnhanced& e = *f.enhanced;
    s += format(" IRD %u ORD %u", unsigned{e.ird}, unsigned{e.ord});
    if (e.peer_to_peer) s += " p2p";
    if (e.send_rtr) s += " send-rtr";
    if (e.write_rtr) s += " write-rtr";
    if (e.read_rtr) s += " read-rtr";
  }
  return s + format(" private %zu", f.private_data.size());
}

std::string describe_message(const RdmapMessage& m) {
  const DdpHeader& d = m.ddp;
  std::string s = format("%s [%s]", std::string(m.info().name).c_str(), d.last ? "last" : "more");
  if (d.tagged) {
    s += format(" STag 0x%08" PRIx32 " TO 0x%" PRIx64, d.stag, d.tagged_offset);
  } else {
    s += format(" QN %" PRIu32 " MSN %" PRIu32 " MO %" PRIu32, d.queue_number, d.message_sequence_number,
                d.message_offset);
  }
  if (m.info().invalidates) s += format(" invalidate 0x%08" PRIx32, m.invalidate_stag);
  if (m.opcode == RdmapOpcode::read_request) {
    const RdmapReadRequest& r = m.read_request;
    s += format(" sink 0x%08" PRIx32 "@0x%" PRIx64 " size %" PRIu32 " source 0x%08" PRIx32 "@0x%" PRIx64, r.sink_stag,
                r.sink_tagged_offset, r.size, r.source_stag, r.source_tagged_offset);
  }
  if (m.opcode == RdmapOpcode::terminate) {
    const RdmapTerminate& t = m.terminate;
    s +=
        format(" layer %u type %u code 0x%02x%s%s%s", unsigned{t.layer}, unsigned{t.error_type}, unsigned{t.error_code},
               t.segment_length_valid ? " M" : "", t.has_ddp_header ? " D" : "", t.has_rdmap_header ? " R" : "");
  }
  return s;
}

}  // namespace

std::string MpaStreamItem::describe() const {
  switch (kind) {
    case MpaItemKind::request:
    case MpaItemKind::reply:
      return describe_frame(*this);
    case MpaItemKind::fpdu: {
      std::string s = "FPDU " + describe_message(fpdu.message);
      s += format(" payload %zu ulpdu %u", fpdu.payload_length, unsigned{fpdu.ulpdu_length});
      if (fpdu.markers) s += format(" markers %zu", fpdu.markers);
      if (!fpdu.crc_checked) return s + " CRC off";
      if (fpdu.crc_ok) return s + " CRC good";
      return s + format(" CRC bad (0x%08" PRIx32 ", should be 0x%08" PRIx32 ")", fpdu.crc_received, fpdu.crc_computed);
    }
    case MpaItemKind::error:
      break;
  }
  return format("error %s at stream offset %" PRIu64, std::string(name(error)).c_str(), stream_offset);
}

}  // namespace wire::iwarp
