// Between rdma-core's structs and the engine's vocabulary (emulator/core/verbs_types.hpp).
// Enum and flag values are the same numbers on both sides (static_asserts in convert.cpp), so
// conversion is field by field; what differs is representation: handles for pointers, vectors
// for (pointer, count) pairs.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "emulator/core/verbs_types.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

// A send WR; 0, or EINVAL for an opcode the device does not have. Inline data (IBV_SEND_INLINE)
// is copied out of the application's buffers here, as the verb requires: they may be reused
// as soon as ibv_post_send returns. `ud`: the WR is for a UD QP (only then does it carry an AH).
// `out` may be reused: its vectors keep their capacity.
int to_core(const ibv_send_wr& wr, ibv_qp_type type, core::SendWr& out);
void to_core(const ibv_recv_wr& wr, core::RecvWr& out);
void to_core(const ibv_sge* sges, std::size_t count, std::vector<core::Sge>& out);
// A tag-matching list operation (ibv_post_srq_ops); EINVAL for an opcode it does not have.
int to_core(const ibv_ops_wr& wr, core::SrqOp& out);

// Hands an ibv_post_recv / ibv_post_srq_recv chain to `post(span<const RecvWr>, posted&)` (a
// call to the device returning 0 or an errno, with how many WRs it accepted); at a failure,
// *bad_wr names the first WR not posted.
template <class Post>
int post_recv_chain(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, Post&& post) {
  thread_local std::vector<core::RecvWr> wrs;  // reused: the WRs' vectors keep their capacity
  std::size_t n = 0;
  for (ibv_recv_wr* it = wr; it != nullptr; it = it->next, ++n) {
    if (n == wrs.size()) wrs.emplace_back();
    to_core(*it, wrs[n]);
  }
  std::size_t posted = 0;
  const int err = n > 0 ? post(std::span<const core::RecvWr>(wrs.data(), n), posted) : 0;
  if (err != 0) {
    ibv_recv_wr* it = wr;
    for (std::size_t i = 0; i < posted; ++i) it = it->next;
    *bad_wr = it;
  }
  return err;
}

ibv_wc to_ibv(const core::Wc& wc);

core::AddressVector to_core(const ibv_ah_attr& ah);
ibv_ah_attr to_ibv(const core::AddressVector& av);

core::QpCap to_core(const ibv_qp_cap& cap);
ibv_qp_cap to_ibv(const core::QpCap& cap);

core::QpAttr to_core(const ibv_qp_attr& attr);
ibv_qp_attr to_ibv(const core::QpAttr& attr);

}  // namespace softrdma::shim
