// The connection manager's requests and events on the daemon's socket (daemon_protocol.hpp):
// its structs hold vectors and a MAD variant, so they travel field by field, the MAD as the
// 256 bytes wire/cm_mad.hpp emits and parses.
#pragma once

#include "emulator/core/cm_types.hpp"
#include "emulator/host/daemon_protocol.hpp"

namespace softrdma::host::daemon {

// Private data longer than any CM message carries (the REQ's 92 bytes are the most a consumer
// gives; SIDR_REQ 216) is a malformed message.
inline constexpr std::size_t kMaxPrivateData = 256;

void put(Writer& out, const core::CmConnect& c);
void put(Writer& out, const core::CmAccept& a);
void put(Writer& out, const core::CmServiceQuery& q);
void put(Writer& out, const core::CmServiceAnswer& a);
// The event after its daemon::Event header (kind cm).
void put(Writer& out, const core::CmEvent& e);

void get(Reader& in, core::CmConnect& c);
void get(Reader& in, core::CmAccept& a);
void get(Reader& in, core::CmServiceQuery& q);
void get(Reader& in, core::CmServiceAnswer& a);
// False when the bytes are not an event: an unknown type or a MAD that does not parse.
bool get(Reader& in, core::CmEvent& e);

}  // namespace softrdma::host::daemon
