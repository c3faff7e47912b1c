// softrdmad's tag-matching requests (rdma-core's Documentation/tag_matching.md): TM-SRQs and
// their list operations (ibv_post_srq_ops). A client creates them on its own PD and CQ, and
// operates only on its own SRQs; a tagged buffer's SGEs are checked by the engine, against the
// SRQ's PD, as a post_srq_recv's are.
#include <cerrno>
#include <vector>

#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::put_created;
using daemon::put_status;

bool DaemonServer::handle_create_tm_srq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto pd = in.get<std::uint32_t>();
  const auto max_wr = in.get<std::uint32_t>();
  const auto max_sge = in.get<std::uint32_t>();
  const auto limit = in.get<std::uint32_t>();
  const core::Device::TmSrq tm{in.get<std::uint32_t>(), in.get<std::uint32_t>(), in.get<std::uint32_t>()};
  if (!in.done()) return false;
  if (!owns(c, &Client::pds, pd) || !owns(c, &Client::cqs, tm.cq)) {
    put_status(out, EINVAL);
    return true;
  }
  const auto srq = link_->create_tm_srq(pd, max_wr, max_sge, limit, tm);
  if (srq) adopt(c, &Client::srqs, *srq);
  put_created(out, srq);
  return true;
}

// One list operation; the reply carries the handle an ADD was given.
bool DaemonServer::handle_post_srq_ops(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto srq = in.get<std::uint32_t>();
  thread_local core::SrqOp op;  // reused: its SGE vector keeps its capacity
  in.get_op(op);
  if (!in.done()) return false;
  const int err = owns(c, &Client::srqs, srq) ? link_->post_srq_ops(srq, op) : EINVAL;
  put_status(out, err);
  if (err == 0) out.put(op.handle);
  return true;
}

}  // namespace softrdma::host
