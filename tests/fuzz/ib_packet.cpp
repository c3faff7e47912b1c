// Fuzzes IbPacket::check() on what a UDP socket hands the engine (the UDP payload), and the
// repr round trip: headers and payload must come back byte-identical (pad bytes are always
// emitted as zero and the ICRC is not the repr's, so those are not compared).
#include "wire/ib_packet.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto packet = wire::IbPacket::check({data, size});
  if (!packet) return 0;
  (void)packet->icrc();

  const auto repr = wire::IbRepr::parse(*packet);
  std::vector<std::uint8_t> rebuilt(repr.buffer_len());
  if (repr.emit(rebuilt.data()) != size) std::abort();
  const std::size_t unpadded = packet->info().header_length + packet->payload().size();
  if (std::memcmp(rebuilt.data(), data, unpadded) != 0) std::abort();
  return 0;
}
