// Fuzzes RoceFrame::check() on whole Ethernet frames, the IPv4 ID solver on what it accepts,
// and the build path behind it: a frame that checks must rebuild into a frame that checks,
// carries a valid ICRC and parses back to the same IB fields.
#include "wire/roce_frame.hpp"

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "wire/icrc_ipv4_id.hpp"
#include "wire/ipv4.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto frame = wire::RoceFrame::check({data, size});
  if (!frame) return 0;
  // Solving for the IPv4 ID must accept any frame, and a frame whose ICRC already verifies
  // needs no other ID than its own.
  const auto id = wire::solve_ipv4_identification(*frame);
  if (frame->icrc_ok() && frame->encapsulation() == wire::Encapsulation::rocev2_ipv4 &&
      id != wire::Ipv4::identification::get(frame->network_header().data()))
    std::abort();

  const auto repr = wire::RoceFrameRepr::parse(*frame);
  std::vector<std::uint8_t> rebuilt(repr.buffer_len());
  if (repr.emit(rebuilt.data()) != rebuilt.size()) std::abort();
  const auto again = wire::RoceFrame::check(rebuilt);
  if (!again || !again->icrc_ok()) std::abort();
  if (!(wire::IbRepr::parse(again->ib()) == repr.ib)) std::abort();
  return 0;
}
