// How softrdmad's request handlers begin a reply (daemon_protocol.hpp): its errno, then the results.
#pragma once

#include <cstdint>

#include "emulator/core/expected.hpp"
#include "emulator/host/daemon_protocol.hpp"

namespace softrdma::host::daemon {

inline void put_status(Writer& out, int err) { out.put(static_cast<std::int32_t>(err)); }

// A verb that creates an object: its errno, then the object on success.
template <class T>
void put_created(Writer& out, const core::Expected<T>& result) {
  put_status(out, result.error());
  if (result) out.put(*result);
}

}  // namespace softrdma::host::daemon
