// The rules of ibv_modify_qp: which state transitions a QP may make, which attributes each one
// requires or allows, and which attribute values are in range. Pure functions of their
// arguments; the QP object calls check_modify_qp and, on 0, apply_modify_qp.
//
// Authority: IBTA vol. 1 s10.3.1 (the QP state machine) and s11.2.4.2 (Modify QP), as Linux
// encodes them (qp_state_table / ib_modify_qp_is_ok in drivers/infiniband/core/verbs.c, the
// checks of uverbs modify_qp and rxe_qp_chk_attr). rdma-core reports every refusal as EINVAL.
#pragma once

#include <cstdint>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

// What a modify is checked against (ibv_device_attr / ibv_port_attr of the device). The queue
// limits bound QpCap at create time; no modify of an RC, UC or UD QP may change cap.
struct DeviceLimits {
  std::uint32_t max_qp_wr = 16384, max_sge = 32, max_inline_data = 512;
  // Responder resources a QP may offer, and READs/atomics it may have outstanding: as many as
  // Linux rxe and siw allow (128), so that a peer's default depth is one this device takes.
  std::uint8_t max_qp_rd_atom = 128;
  std::uint8_t max_qp_init_rd_atom = 128;
  std::uint16_t pkey_table_len = 1;
  std::uint8_t gid_table_len = 16;  // port 1's GID table length
  std::uint8_t phys_port_cnt = 1;
};

// 0 when `mask`/`attr` is a legal modify of a `type` QP now in state `current`; else EINVAL.
// Without qp_attr::state in `mask` the modify is the transition current -> current, which only
// some states have (RTR and SQE have none). With qp_attr::cur_state, attr.cur_qp_state must be
// `current`. One rule needs more than the state and stays with the caller: a QP in SQD whose
// send queue is still draining may only be moved to ERR (as rxe; IBTA vol. 1 s10.3.1).
int check_modify_qp(QpType type, QpState current, const QpAttr& attr, std::uint32_t mask, const DeviceLimits& limits);

// Copies the attributes `mask` names from `attr` into `qp` (qp.qp_state included).
// qp_attr::cur_state is an assertion about the QP, not an attribute, and is not copied;
// alt_path and path_mig_state have no field in QpAttr; cap is modifiable on no transition.
void apply_modify_qp(QpAttr& qp, const QpAttr& attr, std::uint32_t mask);

}  // namespace softrdma::core
