#include "emulator/core/wr_checks.hpp"

#include <cerrno>

namespace softrdma::core {

namespace {

bool valid_opcode(QpType type, WrOpcode op) {
  switch (op) {
    case WrOpcode::send:
    case WrOpcode::send_with_imm:
      return true;
    case WrOpcode::rdma_write:
    case WrOpcode::rdma_write_with_imm:
    case WrOpcode::local_inv:
    case WrOpcode::bind_mw:
      return type != QpType::ud;
    case WrOpcode::send_with_inv:  // reliable only: UC has no SEND-with-Invalidate opcode
    case WrOpcode::rdma_read:
    case WrOpcode::atomic_cmp_and_swp:
    case WrOpcode::atomic_fetch_and_add:
      return is_reliable(type);
    case WrOpcode::atomic_write:  // release 1.5 gave it an RC opcode only (0x1D)
      return type == QpType::rc;
  }
  return false;
}

}  // namespace

int check_send_wr(QpType type, QpState state, const QpCap& cap, const SendWr& wr) {
  // A send queue accepts work from RTS on (and in SQD/SQE/ERR, where it waits or is
  // flushed); before RTS there is nowhere to send it (s10.3.1).
  if (state == QpState::reset || state == QpState::init || state == QpState::rtr) return EINVAL;
  if (!has_requester(type)) return EINVAL;  // an XRC target has no send queue (annex A14)
  if (!valid_opcode(type, wr.opcode)) return EINVAL;
  const bool inline_data = (wr.flags & send_flags::inline_data) != 0;
  if (inline_data ? wr.inline_data.size() > cap.max_inline_data : wr.sg_list.size() > cap.max_send_sge) return EINVAL;
  return 0;
}

int check_recv_wr(QpState state, const QpCap& cap, const RecvWr& wr) {
  if (state == QpState::reset) return EINVAL;
  if (wr.sg_list.size() > cap.max_recv_sge) return EINVAL;
  return 0;
}

}  // namespace softrdma::core
