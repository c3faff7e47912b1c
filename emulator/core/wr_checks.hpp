// What ibv_post_send and ibv_post_recv refuse with EINVAL before a WR is queued, as pure
// functions of the QP: the engine applies them (Device::post_send, post_recv), and so does a
// host that queues WRs before the engine sees them (the daemon client's work ring), so that
// both answer the same errno for the same WR.
#pragma once

#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

// A send WR on a QP of `type` in `state` with capabilities `cap`: 0 or EINVAL (s10.3.1: a send
// queue takes work from RTS on; s11.4.1.1: opcodes the transport lacks, SGE and inline limits).
int check_send_wr(QpType type, QpState state, const QpCap& cap, const SendWr& wr);
// A receive WR on a QP without SRQ: 0 or EINVAL (RESET takes no receives; SGE limit).
int check_recv_wr(QpState state, const QpCap& cap, const RecvWr& wr);

}  // namespace softrdma::core
