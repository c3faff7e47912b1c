// The iWARP transport of an RC QP (RFC 5040 RDMAP over RFC 5041 DDP over RFC 5044 MPA), split
// as the RoCE transport is (transport.hpp): the sender turns send WQEs, Read Responses and a
// Terminate into FPDUs; the receiver places the peer's FPDUs and completes WQEs. Both work on
// the Device's objects; device_stream.cpp is the Device's stream API around them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "emulator/core/device.hpp"

namespace softrdma::core {

struct IwarpSender {
  // Appends the QP's next FPDU to `out`; false when it has nothing to send now.
  static bool next(Device& d, Qp& q, UninitialisedBytes& out);
};

struct IwarpReceiver {
  // In-order bytes of the peer's half of the stream.
  static void on_bytes(Device& d, Qp& q, std::span<const std::uint8_t> bytes);
};

// Ends the stream after an error found in the peer's FPDU `in_error` (or in none): queues a
// Terminate naming `cause` and that FPDU's headers (RFC 5040 s4.8, s7.1) and moves the QP to
// ERR, flushing its WRs; the stream closes once the Terminate is sent.
void iwarp_terminate(Device& d, Qp& q, wire::iwarp::TerminateCause cause, const wire::iwarp::RdmapMessage* in_error);
// The status of the requester's WQE that a peer's Terminate ends.
WcStatus terminate_status(const wire::iwarp::RdmapTerminate& t);

// Whether an iWARP QP can carry a send WR of this opcode: RDMAP has no immediate data, and
// the RFC 7306 atomics and memory windows are not implemented (as Linux siw).
bool iwarp_supports(WrOpcode op);

}  // namespace softrdma::core
