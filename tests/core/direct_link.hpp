// What a wire with no faults and no kernel in between delivers for a packet an engine sent:
// the same bytes, between the same addresses, the ICRC left for the receiver to check.
#pragma once

#include "emulator/core/device.hpp"

namespace test {

inline softrdma::core::RxPacket as_received(const softrdma::core::TxPacket& sent) {
  softrdma::core::RxPacket rx;
  rx.bytes = sent.bytes;
  rx.src_gid = sent.route.src;
  rx.dst_gid = sent.route.dst;
  rx.src_port = sent.route.src_port;
  return rx;
}

}  // namespace test
