// Receive WQEs for arriving messages, from a QP's own receive queue or its SRQ: shared by the
// RoCE responder and the iWARP receiver.
#pragma once

#include <optional>

#include "emulator/core/device.hpp"

namespace softrdma::core {

// The receive WQE for a new message, taken off its queue; nullopt when the queue is empty.
// Raises the SRQ limit event when the SRQ drops below its armed limit (s10.2.9.3).
std::optional<RecvWqe> take_recv(Device& d, Qp& q);
bool recv_available(Device& d, const Qp& q);

}  // namespace softrdma::core
