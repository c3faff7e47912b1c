// The iWARP connection manager's requests and events on the daemon's socket
// (daemon_protocol.hpp): MPA offers and events hold private data, so they travel field by field.
#pragma once

#include "emulator/core/iwarp_cm.hpp"
#include "emulator/core/mpa_handshake.hpp"
#include "emulator/host/daemon_protocol.hpp"

namespace softrdma::host::daemon {

// RFC 5044 s7.1's most: an MPA Request, Reply or reject carries at most 512 bytes.
inline constexpr std::size_t kMaxMpaPrivateData = wire::iwarp::MpaFrame::max_private_data;

void put(Writer& out, const core::MpaOffer& offer);
// The event after its daemon::Event header (kind iwarp).
void put(Writer& out, const core::IwarpEvent& e);

void get(Reader& in, core::MpaOffer& offer);
// False when the bytes are not an event (an unknown type).
bool get(Reader& in, core::IwarpEvent& e);

}  // namespace softrdma::host::daemon
