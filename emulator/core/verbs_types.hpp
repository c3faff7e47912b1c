// The verbs vocabulary of the transport engine: QP types and states, work requests, work
// completions, attributes and their masks, access flags, async events.
//
// The engine includes no rdma-core header (emulator/core links wire/ and the standard library
// only), so these are its own definitions. Their numeric values are those of libibverbs'
// ABI (infiniband/verbs.h, rdma-core 44), so the verbs shim passes them through unchanged and
// a static_assert there checks every one.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

namespace softrdma::core {

// Nanoseconds since an epoch the caller chooses. All time comes in as arguments.
using Time = std::uint64_t;

using Gid = std::array<std::uint8_t, 16>;

// XRC (IBTA vol. 1 annex A14) splits a reliable connection in two: an initiator (xrc_send)
// is an RC requester without a responder, a target (xrc_recv) an RC responder without a
// requester, whose requests land in the XRC SRQ each one names.
enum class QpType : std::uint8_t { rc = 2, uc = 3, ud = 4, xrc_send = 9, xrc_recv = 10 };

// The reliable connected service (s9.7): acknowledged, in order, with READs and atomics.
constexpr bool is_reliable(QpType t) { return t == QpType::rc || t == QpType::xrc_send || t == QpType::xrc_recv; }
constexpr bool has_requester(QpType t) { return t != QpType::xrc_recv; }
constexpr bool has_responder(QpType t) { return t != QpType::xrc_send; }

// IBTA vol. 1 s10.3.1 figure 124.
enum class QpState : std::uint8_t { reset = 0, init = 1, rtr = 2, rts = 3, sqd = 4, sqe = 5, err = 6 };

// Path MTU codes (IBTA vol. 1 s7.7.8 / ibv_mtu): 256 << (code - 1) bytes.
enum class Mtu : std::uint8_t { mtu256 = 1, mtu512 = 2, mtu1024 = 3, mtu2048 = 4, mtu4096 = 5 };
constexpr std::uint32_t mtu_bytes(Mtu m) { return 128u << static_cast<unsigned>(m); }

enum class WrOpcode : std::uint8_t {
  rdma_write = 0,
  rdma_write_with_imm = 1,
  send = 2,
  send_with_imm = 3,
  rdma_read = 4,
  atomic_cmp_and_swp = 5,
  atomic_fetch_and_add = 6,
  local_inv = 7,
  bind_mw = 8,
  send_with_inv = 9,
  // IBTA vol. 1 release 1.5: the 8 bytes to place travel in SendWr::compare_add, as memory.
  atomic_write = 15,
};

namespace send_flags {
inline constexpr std::uint32_t fence = 1u << 0;
inline constexpr std::uint32_t signaled = 1u << 1;
inline constexpr std::uint32_t solicited = 1u << 2;
inline constexpr std::uint32_t inline_data = 1u << 3;
}  // namespace send_flags

namespace access {
inline constexpr std::uint32_t local_write = 1u << 0;
inline constexpr std::uint32_t remote_write = 1u << 1;
inline constexpr std::uint32_t remote_read = 1u << 2;
inline constexpr std::uint32_t remote_atomic = 1u << 3;
inline constexpr std::uint32_t mw_bind = 1u << 4;
inline constexpr std::uint32_t zero_based = 1u << 5;
// On-demand paging: the region's memory need not be mapped while registered; touching an
// unmapped byte is an access error, never a fault (Memory::on_demand).
inline constexpr std::uint32_t on_demand = 1u << 6;
}  // namespace access

enum class WcStatus : std::uint8_t {
  success = 0,
  loc_len_err = 1,
  loc_qp_op_err = 2,
  loc_eec_op_err = 3,
  loc_prot_err = 4,
  wr_flush_err = 5,
  mw_bind_err = 6,
  bad_resp_err = 7,
  loc_access_err = 8,
  rem_inv_req_err = 9,
  rem_access_err = 10,
  rem_op_err = 11,
  retry_exc_err = 12,
  rnr_retry_exc_err = 13,
  loc_rdd_viol_err = 14,
  rem_inv_rd_req_err = 15,
  rem_abort_err = 16,
  inv_eecn_err = 17,
  inv_eec_state_err = 18,
  fatal_err = 19,
  resp_timeout_err = 20,
  general_err = 21,
  tm_err = 22,              // a tag operation failed: IBV_WR_TAG_DEL of a tag already consumed
  tm_rndv_incomplete = 23,  // a matched rendezvous left for software to finish
};

enum class WcOpcode : std::uint8_t {
  send = 0,
  rdma_write = 1,
  rdma_read = 2,
  comp_swap = 3,
  fetch_add = 4,
  bind_mw = 5,
  local_inv = 6,
  atomic_write = 9,
  recv = 128,
  recv_rdma_with_imm = 129,
  // Tag matching (tag_matching.hpp): list operations, then receives on a tag-matching SRQ.
  tm_add = 130,
  tm_del = 131,
  tm_sync = 132,
  tm_recv = 133,
  tm_no_tag = 134,
};

namespace wc_flags {
inline constexpr std::uint32_t grh = 1u << 0;
inline constexpr std::uint32_t with_imm = 1u << 1;
inline constexpr std::uint32_t with_inv = 1u << 3;
inline constexpr std::uint32_t tm_sync_req = 1u << 4;    // software must report its unexpected count
inline constexpr std::uint32_t tm_match = 1u << 5;       // a tagged buffer was matched
inline constexpr std::uint32_t tm_data_valid = 1u << 6;  // the matched message's data is in place
}  // namespace wc_flags

// ibv_qp_attr_mask bits.
namespace qp_attr {
inline constexpr std::uint32_t state = 1u << 0;
inline constexpr std::uint32_t cur_state = 1u << 1;
inline constexpr std::uint32_t en_sqd_async_notify = 1u << 2;
inline constexpr std::uint32_t access_flags = 1u << 3;
inline constexpr std::uint32_t pkey_index = 1u << 4;
inline constexpr std::uint32_t port = 1u << 5;
inline constexpr std::uint32_t qkey = 1u << 6;
inline constexpr std::uint32_t av = 1u << 7;
inline constexpr std::uint32_t path_mtu = 1u << 8;
inline constexpr std::uint32_t timeout = 1u << 9;
inline constexpr std::uint32_t retry_cnt = 1u << 10;
inline constexpr std::uint32_t rnr_retry = 1u << 11;
inline constexpr std::uint32_t rq_psn = 1u << 12;
inline constexpr std::uint32_t max_qp_rd_atomic = 1u << 13;
inline constexpr std::uint32_t alt_path = 1u << 14;
inline constexpr std::uint32_t min_rnr_timer = 1u << 15;
inline constexpr std::uint32_t sq_psn = 1u << 16;
inline constexpr std::uint32_t max_dest_rd_atomic = 1u << 17;
inline constexpr std::uint32_t path_mig_state = 1u << 18;
inline constexpr std::uint32_t cap = 1u << 19;
inline constexpr std::uint32_t dest_qpn = 1u << 20;
inline constexpr std::uint32_t rate_limit = 1u << 25;
}  // namespace qp_attr

enum class AsyncEventType : std::uint8_t {
  cq_err = 0,
  qp_fatal = 1,
  qp_req_err = 2,
  qp_access_err = 3,
  comm_est = 4,
  sq_drained = 5,
  path_mig = 6,
  path_mig_err = 7,
  device_fatal = 8,
  port_active = 9,
  port_err = 10,
  srq_err = 14,
  srq_limit_reached = 15,
  qp_last_wqe_reached = 16,
};

struct Sge {
  std::uint64_t addr = 0;  // in the MR's address space (its iova)
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

// ibv_send_wr.imm_data and ibv_wc.imm_data are __be32: their bytes in memory are ImmDt's on
// the wire (IBTA vol. 1 s9.3.5). The header codecs take numbers: this is the number those bytes
// make, and applied to that number gives the __be32 back.
constexpr std::uint32_t imm_number(std::uint32_t network_order) {
  if constexpr (std::endian::native == std::endian::big) return network_order;
  return (network_order >> 24) | ((network_order >> 8) & 0xff00) | ((network_order << 8) & 0xff0000) |
         (network_order << 24);
}

struct SendWr {
  std::uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::send;
  std::uint32_t flags = 0;  // send_flags
  std::vector<Sge> sg_list;
  std::vector<std::uint8_t> inline_data;  // with send_flags::inline_data: the bytes, copied at post time
  std::uint32_t imm_data = 0;             // network byte order value, as ibv_send_wr.imm_data
  std::uint32_t invalidate_rkey = 0;      // send_with_inv, local_inv
  // RDMA and atomics.
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t compare_add = 0;
  std::uint64_t swap = 0;
  // UD.
  std::uint32_t ah = 0;
  std::uint32_t remote_qpn = 0;
  std::uint32_t remote_qkey = 0;
  // XRC initiators: the peer's XRC SRQ the message lands in (XRCETH, annex A14).
  std::uint32_t xrc_remote_srq = 0;
  // bind_mw.
  std::uint32_t mw_rkey = 0;  // the MW's current rkey
  std::uint32_t bind_new_rkey = 0;
  std::uint32_t bind_mr_lkey = 0;
  std::uint64_t bind_addr = 0;
  std::uint64_t bind_length = 0;
  std::uint32_t bind_access = 0;
};

struct RecvWr {
  std::uint64_t wr_id = 0;
  std::vector<Sge> sg_list;
};

struct Wc {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::success;
  WcOpcode opcode = WcOpcode::send;
  std::uint32_t vendor_err = 0;
  std::uint32_t byte_len = 0;
  std::uint32_t imm_data = 0;  // or the invalidated rkey with wc_flags::with_inv
  std::uint32_t qp_num = 0;
  std::uint32_t src_qp = 0;
  std::uint32_t wc_flags = 0;
  std::uint16_t pkey_index = 0;
  std::uint8_t sl = 0;
  std::uint32_t tm_priv = 0;  // a matched tag-matching receive: the TMH's app_ctx and tag
  std::uint64_t tm_tag = 0;
  // When the engine made the completion: the latest time a call gave it (Device::clock_).
  Time timestamp = 0;
};

// Tag-matching list operations (ibv_post_srq_ops; tag_matching.hpp).
enum class SrqOpcode : std::uint8_t { tag_add = 0, tag_del = 1, tag_sync = 2 };

namespace srq_op_flags {
inline constexpr std::uint32_t signaled = 1u << 0;
inline constexpr std::uint32_t tm_sync = 1u << 1;  // unexpected_cnt is what software has handled
}  // namespace srq_op_flags

struct SrqOp {
  std::uint64_t wr_id = 0;
  SrqOpcode opcode = SrqOpcode::tag_add;
  std::uint32_t flags = 0;  // srq_op_flags
  std::uint32_t unexpected_cnt = 0;
  std::uint32_t handle = 0;  // tag_del's input; tag_add's output
  // tag_add: the tagged buffer, the wr_id its receive completions carry, and what it matches.
  std::uint64_t recv_wr_id = 0;
  std::vector<Sge> sg_list;
  std::uint64_t tag = 0;
  std::uint64_t mask = 0;
};

// What a device offers for tag matching (ibv_tm_caps); all 0 where it has none.
struct TmCaps {
  std::uint32_t max_rndv_hdr_size = 0;
  std::uint32_t max_num_tags = 0;
  std::uint32_t max_ops = 0;
  std::uint32_t max_sge = 0;
};

struct QpCap {
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_send_sge = 0;
  std::uint32_t max_recv_sge = 0;
  std::uint32_t max_inline_data = 0;
};

// Where a QP's (or an AH's) packets go: the peer's GID and what the GRH fields say.
struct AddressVector {
  Gid dgid{};
  std::uint8_t sgid_index = 0;
  std::uint32_t flow_label = 0;
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;
  std::uint8_t sl = 0;
  std::uint8_t port_num = 1;
};

struct QpAttr {
  QpState qp_state = QpState::reset;
  QpState cur_qp_state = QpState::reset;
  Mtu path_mtu = Mtu::mtu1024;
  std::uint32_t qkey = 0;
  std::uint32_t rq_psn = 0;
  std::uint32_t sq_psn = 0;
  std::uint32_t dest_qp_num = 0;
  std::uint32_t qp_access_flags = 0;
  QpCap cap;
  AddressVector ah_attr;
  std::uint16_t pkey_index = 0;
  bool sq_draining = false;
  std::uint8_t en_sqd_async_notify = 0;
  std::uint8_t max_rd_atomic = 0;
  std::uint8_t max_dest_rd_atomic = 0;
  std::uint8_t min_rnr_timer = 0;
  std::uint8_t port_num = 1;
  std::uint8_t timeout = 0;    // 4.096 us * 2^timeout; 0 = infinite (IBTA vol. 1 s9.7.6.1.3)
  std::uint8_t retry_cnt = 0;  // 0..7
  std::uint8_t rnr_retry = 0;  // 0..7, 7 = infinite
};

struct QpInitAttr {
  QpType qp_type = QpType::rc;
  std::uint32_t pd = 0;
  std::uint32_t send_cq = 0;
  std::uint32_t recv_cq = 0;
  std::uint32_t srq = 0;   // 0: none
  std::uint32_t xrcd = 0;  // an XRC target's domain; 0 for every other type
  QpCap cap;
  bool sq_sig_all = false;
};

// Whether a QP takes receive WRs of its own: not on an SRQ, and not XRC (an initiator receives
// nothing, a target receives into the XRC SRQs of its domain).
constexpr bool has_own_receive_queue(const QpInitAttr& a) {
  return a.srq == 0 && a.qp_type != QpType::xrc_send && a.qp_type != QpType::xrc_recv;
}

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::port_active;
  std::uint32_t element = 0;  // QPN, CQ handle, SRQ handle or port number, by type
};

}  // namespace softrdma::core
