// Fuzzes MpaStreamDecoder on one direction of a connection, cut into chunks. Header bytes:
//   0: bit 0 markers, bit 1 CRC, bit 2 whether to call set_negotiated() with those (from the
//      sink, once the MPA frame is out; otherwise the frame's own bits are used)
//   1..4: chunk sizes (each + 1), used in turn
// then the stream. Checks what the decoder promises: progress on every call, items in
// stream order within what was fed, nothing after an error.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "wire/iwarp/mpa_stream.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t header = 5;
  if (size < header) return 0;
  const bool markers = data[0] & 1, crc = data[0] & 2, negotiate = data[0] & 4;
  std::span<const std::uint8_t> stream(data + header, size - header);

  using Kind = wire::iwarp::MpaItemKind;
  wire::iwarp::MpaStreamDecoder d;
  std::uint64_t fed = 0, last_end = 0;
  bool errored = false;
  for (std::size_t turn = 0; !stream.empty(); ++turn) {
    const std::size_t chunk = std::min<std::size_t>(stream.size(), data[1 + turn % 4] + 1u);
    std::span<const std::uint8_t> input = stream.first(chunk);
    stream = stream.subspan(chunk);
    fed += chunk;
    while (!input.empty()) {
      auto step = d.consume(input);
      if (step.consumed == 0 || step.consumed > input.size()) std::abort();
      input = input.subspan(step.consumed);
      if (!step.item) continue;
      const wire::iwarp::MpaStreamItem& item = *step.item;
      // An item ends with the last byte consumed, after the previous one.
      if (errored || item.stream_offset < last_end || item.end_offset != fed - input.size()) std::abort();
      last_end = item.end_offset;
      errored = item.kind == Kind::error;
      if (negotiate && (item.kind == Kind::request || item.kind == Kind::reply)) d.set_negotiated(markers, crc);
      if (item.describe().empty()) std::abort();
    }
  }
  if (d.stream_offset() != fed) std::abort();
  return 0;
}
