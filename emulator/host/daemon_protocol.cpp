#include "emulator/host/daemon_protocol.hpp"

namespace softrdma::host::daemon {

// A SendWr field by field: its vectors travel as counted arrays.
void Writer::put_wr(const core::SendWr& wr) {
  put(wr.wr_id);
  put(wr.opcode);
  put(wr.flags);
  put_vector(std::span<const core::Sge>(wr.sg_list));
  put_vector(std::span<const std::uint8_t>(wr.inline_data));
  put(wr.imm_data);
  put(wr.invalidate_rkey);
  put(wr.remote_addr);
  put(wr.rkey);
  put(wr.compare_add);
  put(wr.swap);
  put(wr.ah);
  put(wr.remote_qpn);
  put(wr.remote_qkey);
  put(wr.xrc_remote_srq);
  put(wr.mw_rkey);
  put(wr.bind_new_rkey);
  put(wr.bind_mr_lkey);
  put(wr.bind_addr);
  put(wr.bind_length);
  put(wr.bind_access);
}

void Reader::get_wr(core::SendWr& wr) {
  wr.wr_id = get<std::uint64_t>();
  wr.opcode = get<core::WrOpcode>();
  // Not an opcode: a malformed message.
  if (wr.opcode > core::WrOpcode::send_with_inv && wr.opcode != core::WrOpcode::atomic_write) ok_ = false;
  wr.flags = get<std::uint32_t>();
  get_vector(wr.sg_list, kMaxSges);
  get_vector(wr.inline_data, kMaxInline);
  wr.imm_data = get<std::uint32_t>();
  wr.invalidate_rkey = get<std::uint32_t>();
  wr.remote_addr = get<std::uint64_t>();
  wr.rkey = get<std::uint32_t>();
  wr.compare_add = get<std::uint64_t>();
  wr.swap = get<std::uint64_t>();
  wr.ah = get<std::uint32_t>();
  wr.remote_qpn = get<std::uint32_t>();
  wr.remote_qkey = get<std::uint32_t>();
  wr.xrc_remote_srq = get<std::uint32_t>();
  wr.mw_rkey = get<std::uint32_t>();
  wr.bind_new_rkey = get<std::uint32_t>();
  wr.bind_mr_lkey = get<std::uint32_t>();
  wr.bind_addr = get<std::uint64_t>();
  wr.bind_length = get<std::uint64_t>();
  wr.bind_access = get<std::uint32_t>();
}

void Writer::put_wr(const core::RecvWr& wr) {
  put(wr.wr_id);
  put_vector(std::span<const core::Sge>(wr.sg_list));
}

void Reader::get_wr(core::RecvWr& wr) {
  wr.wr_id = get<std::uint64_t>();
  get_vector(wr.sg_list, kMaxSges);
}

void Writer::put_op(const core::SrqOp& op) {
  put(op.wr_id);
  put(op.opcode);
  put(op.flags);
  put(op.unexpected_cnt);
  put(op.handle);
  put(op.recv_wr_id);
  put_vector(std::span<const core::Sge>(op.sg_list));
  put(op.tag);
  put(op.mask);
}

void Reader::get_op(core::SrqOp& op) {
  op.wr_id = get<std::uint64_t>();
  op.opcode = get<core::SrqOpcode>();  // the engine answers EINVAL for one it does not have
  op.flags = get<std::uint32_t>();
  op.unexpected_cnt = get<std::uint32_t>();
  op.handle = get<std::uint32_t>();
  op.recv_wr_id = get<std::uint64_t>();
  get_vector(op.sg_list, kMaxSges);
  op.tag = get<std::uint64_t>();
  op.mask = get<std::uint64_t>();
}

}  // namespace softrdma::host::daemon
