#include "emulator/host/daemon_iwarp_codec.hpp"

namespace softrdma::host::daemon {

void put(Writer& out, const core::MpaOffer& offer) {
  out.put(static_cast<std::uint8_t>(offer.crc ? 1 : 0));  // a bool read back from any byte is undefined
  out.put(offer.ird);
  out.put(offer.ord);
  out.put_vector(std::span<const std::uint8_t>(offer.private_data));
}

void get(Reader& in, core::MpaOffer& offer) {
  offer.crc = in.get<std::uint8_t>() != 0;
  offer.ird = in.get<std::uint16_t>();
  offer.ord = in.get<std::uint16_t>();
  in.get_vector(offer.private_data, core::MpaOffer::max_private_data);
}

void put(Writer& out, const core::IwarpEvent& e) {
  out.put(e.type);
  out.put(e.id);
  out.put(e.listener);
  out.put(e.local);
  out.put(e.remote);
  out.put(static_cast<std::int32_t>(e.status));
  out.put(e.ird);
  out.put(e.ord);
  out.put_vector(std::span<const std::uint8_t>(e.private_data));
}

bool get(Reader& in, core::IwarpEvent& e) {
  const auto type = in.get<std::uint8_t>();
  if (type > static_cast<std::uint8_t>(core::IwarpEventType::disconnected)) return false;
  e.type = static_cast<core::IwarpEventType>(type);
  e.id = in.get<std::uint32_t>();
  e.listener = in.get<std::uint32_t>();
  e.local = in.get<core::TcpEndpoint>();
  e.remote = in.get<core::TcpEndpoint>();
  e.status = in.get<std::int32_t>();
  e.ird = in.get<std::uint16_t>();
  e.ord = in.get<std::uint16_t>();
  in.get_vector(e.private_data, kMaxMpaPrivateData);
  return in.done();
}

}  // namespace softrdma::host::daemon
