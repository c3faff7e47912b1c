// Fuzzes how softrdmad decodes a client's CM request bodies, and how a client decodes the
// daemon's CM events (emulator/host/daemon_cm_codec.hpp): a client may send any bytes. The
// first input byte picks what is decoded from the rest. Whatever decodes must encode into
// bytes that decode and encode to the same bytes again.
#include "emulator/host/daemon_cm_codec.hpp"

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

namespace daemon = softrdma::host::daemon;
namespace core = softrdma::core;

// Decodes a T from `in`; if that succeeds, checks that encoding it is stable.
template <class T>
void round_trip(std::span<const std::uint8_t> in) {
  const auto decode = [](std::span<const std::uint8_t> bytes, T& value) {
    daemon::Reader r(bytes);
    if constexpr (std::is_same_v<T, core::CmEvent>) {
      return daemon::get(r, value) && r.ok();
    } else {
      daemon::get(r, value);
      return r.ok();
    }
  };
  const auto encode = [](const T& value) {
    std::vector<std::uint8_t> bytes;
    daemon::Writer w(bytes);
    daemon::put(w, value);
    return bytes;
  };
  T first{};
  if (!decode(in, first)) return;
  const std::vector<std::uint8_t> once = encode(first);
  T second{};
  if (!decode(once, second)) std::abort();
  if (encode(second) != once) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      round_trip<core::CmConnect>(rest);
      break;
    case 1:
      round_trip<core::CmAccept>(rest);
      break;
    case 2:
      round_trip<core::CmServiceQuery>(rest);
      break;
    case 3:
      round_trip<core::CmServiceAnswer>(rest);
      break;
    default:
      round_trip<core::CmEvent>(rest);
      break;
  }
  return 0;
}
