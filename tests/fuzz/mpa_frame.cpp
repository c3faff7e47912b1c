// Fuzzes the one-unit iWARP parsers: MPA Request/Reply frames, and a marker-free FPDU down to
// DDP and RDMAP. Whatever parses must re-emit into bytes that parse to the same thing
// (reserved bits aside, re-emitting twice gives the same bytes), and an RDMAP message must
// account for every ULPDU byte.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "wire/iwarp/mpa.hpp"
#include "wire/iwarp/rdmap.hpp"

namespace {

using namespace wire::iwarp;

void frame(std::span<const std::uint8_t> bytes) {
  const auto f = MpaRequestReply::parse(bytes);
  if (!f) return;
  std::vector<std::uint8_t> out(f->length());
  f->emit(out.data());
  const auto again = MpaRequestReply::parse(out);
  if (!again || !(*again == *f)) std::abort();
}

std::vector<std::uint8_t> emit(const RdmapMessage& m, bool crc) {
  std::vector<std::uint8_t> out(fpdu_length(m.length()));
  m.emit(out.data() + Fpdu::length_field);
  if (seal_fpdu(out.data(), m.length(), crc) != out.size()) std::abort();
  return out;
}

void fpdu(std::span<const std::uint8_t> bytes, bool crc) {
  const auto view = FpduView::check(bytes, crc);
  if (!view) return;
  (void)view->crc_ok();
  const auto m = RdmapMessage::parse(view->ulpdu());
  if (!m) return;
  if (m->length() != view->ulpdu().size()) std::abort();
  const std::vector<std::uint8_t> once = emit(*m, crc);
  const auto view2 = FpduView::check(once, crc);
  if (!view2 || !view2->crc_ok()) std::abort();
  const auto m2 = RdmapMessage::parse(view2->ulpdu());
  if (!m2 || emit(*m2, crc) != once) std::abort();
}

}  // namespace

// Byte 0 picks whether CRCs are negotiated; the rest is tried as a frame and as an FPDU.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::span<const std::uint8_t> bytes(data + 1, size - 1);
  frame(bytes);
  fpdu(bytes, data[0] & 1);
  return 0;
}
