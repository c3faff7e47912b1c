// Fuzzes parse_cm_mad() on what a UD packet to QP1 carries, and the IP CM header parser on a
// REQ's private data. Whatever parses must re-emit into a MAD that parses to the same values
// (reserved bits go out as zero, so the bytes may differ from the input only there), and
// emitting that again must give the same bytes.
#include "wire/cm_mad.hpp"

#include <cstdint>
#include <cstdlib>

namespace {

void ip_cm_header(std::span<const std::uint8_t> private_data) {
  const auto h = wire::parse_ip_cm_header(private_data);
  if (!h) return;
  std::array<std::uint8_t, wire::kIpCmHeaderLength> out{};
  wire::emit_ip_cm_header(*h, out);
  const auto again = wire::parse_ip_cm_header(out);
  if (!again || !(*again == *h)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto mad = wire::parse_cm_mad({data, size});
  if (!mad) return 0;
  if (mad->header.attribute_id != static_cast<std::uint16_t>(wire::attribute_of(mad->message))) std::abort();
  if (wire::name(wire::attribute_of(mad->message)).empty()) std::abort();

  std::array<std::uint8_t, wire::kMadLength> once{};
  wire::emit_cm_mad(*mad, once);
  const auto again = wire::parse_cm_mad(once);
  if (!again || !(*again == *mad)) std::abort();
  std::array<std::uint8_t, wire::kMadLength> twice{};
  wire::emit_cm_mad(*again, twice);
  if (twice != once) std::abort();

  if (const auto* req = std::get_if<wire::CmReq>(&mad->message)) {
    (void)wire::ip_cm_service(req->service_id);
    ip_cm_header(req->private_data);
  }
  if (const auto* rej = std::get_if<wire::CmRej>(&mad->message)) (void)wire::rej_reason_name(rej->reason);
  return 0;
}
