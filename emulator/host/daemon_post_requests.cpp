// softrdmad's posts: WRs to a QP's send or receive queue or to an SRQ, whether they come as
// requests or through the client's work ring (work_ring.hpp), the work ring's attachment, and
// the room a queue has left.
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <vector>

#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::put_status;

namespace {

// A post's WRs: their count, then each; false for a malformed list or one longer than kMaxWrs.
template <class Wr>
bool get_wrs(daemon::Reader& in, std::vector<Wr>& wrs) {
  const auto count = in.get<std::uint32_t>();
  if (!in.ok() || count > daemon::kMaxWrs) return false;
  wrs.resize(count);
  for (Wr& wr : wrs) in.get_wr(wr);
  return in.done();
}

}  // namespace

void DaemonServer::count_taken(Client& c, std::uint32_t qpn, int queue, std::size_t n) {
  if (n == 0) return;  // nothing taken: no entry (a QP number the client made up among them)
  std::lock_guard lock(mutex_);
  c.taken[qpn][static_cast<std::size_t>(queue)] += static_cast<std::uint32_t>(n);
}

bool DaemonServer::handle_post_send(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto qpn = in.get<std::uint32_t>();
  thread_local std::vector<core::SendWr> wrs;
  if (!get_wrs(in, wrs)) return false;
  // The objects a WR names beyond its SGEs (whose lkeys the engine checks against the QP's
  // PD). A UD WR's AH must be the client's own: else the post fails with EINVAL and the WRs
  // before it are posted, as bad_wr semantics require. A bind's or a local invalidation's
  // key that is not the client's becomes key 0, which names nothing, and the engine
  // completes the WR with the error a NIC gives for a key the QP may not use (MW bind
  // error, local protection error; IBTA vol. 1 s10.6.7.2, s10.6.5): an EINVAL for a post
  // that came through the work ring would reach no one, and the client would wait forever.
  auto own_keys_only = [&](core::SendWr& wr) {
    if (wr.opcode == core::WrOpcode::bind_mw) {
      if (!owns(c, &Client::mws, wr.mw_rkey)) wr.mw_rkey = 0;
      if (!owns(c, &Client::mrs, wr.bind_mr_lkey)) wr.bind_mr_lkey = 0;
    }
    if (wr.opcode == core::WrOpcode::local_inv && !owns(c, &Client::mrs, wr.invalidate_rkey) &&
        !owns(c, &Client::mws, wr.invalidate_rkey))
      wr.invalidate_rkey = 0;
    return wr.ah == 0 || owns(c, &Client::ahs, wr.ah);
  };
  const bool qp_owned = owns(c, &Client::qps, qpn);
  std::size_t checked = 0;
  while (qp_owned && checked < wrs.size() && own_keys_only(wrs[checked])) ++checked;
  std::size_t posted = 0;
  int err = qp_owned ? link_->post_send(qpn, std::span<const core::SendWr>(wrs.data(), checked), posted) : EINVAL;
  if (err == 0 && checked < wrs.size()) err = EINVAL;
  count_taken(c, qpn, 0, posted);
  put_status(out, err);
  out.put(static_cast<std::uint32_t>(posted));
  return true;
}

bool DaemonServer::handle_post_recv(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto qpn = in.get<std::uint32_t>();
  thread_local std::vector<core::RecvWr> wrs;
  if (!get_wrs(in, wrs)) return false;
  std::size_t posted = 0;
  int err = EINVAL;
  if (owns(c, &Client::qps, qpn)) {
    err = link_->post_recv(qpn, wrs, posted);
    count_taken(c, qpn, 1, posted);
  }
  put_status(out, err);
  out.put(static_cast<std::uint32_t>(posted));
  return true;
}

bool DaemonServer::handle_post_srq_recv(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto srq = in.get<std::uint32_t>();
  thread_local std::vector<core::RecvWr> wrs;
  if (!get_wrs(in, wrs)) return false;
  std::size_t posted = 0;
  const int err = owns(c, &Client::srqs, srq) ? link_->post_srq_recv(srq, wrs, posted) : EINVAL;
  put_status(out, err);
  out.put(static_cast<std::uint32_t>(posted));
  return true;
}

bool DaemonServer::handle_attach_work_ring(Client& c, daemon::Reader& in, daemon::Writer& out, int& passed) {
  if (!in.done()) return false;
  std::unique_ptr<WorkRing> ring = passed >= 0 ? WorkRing::adopt(passed) : nullptr;
  if (passed >= 0) ::close(passed);
  passed = -1;
  if (roce() == nullptr) {
    put_status(out, EOPNOTSUPP);  // only srdma0's progress thread drains work rings
    return true;
  }
  std::lock_guard ring_lock(ring_clients_mutex_);
  std::lock_guard work_lock(c.work_mutex);
  if (!ring || c.work) {
    put_status(out, EINVAL);  // no ring, or a second one
    return true;
  }
  // Asleep until the progress thread says otherwise: it may be asleep already, having
  // announced it to the rings it knew, and the client's first post must then wake it.
  ring->set_asleep(true);
  c.work = std::move(ring);
  ring_clients_.push_back(&c);
  put_status(out, 0);
  return true;
}

bool DaemonServer::handle_queue_room(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto which = in.get<core::Device::WorkQueue>();
  const auto handle = in.get<std::uint32_t>();
  if (!in.done() || which > core::Device::WorkQueue::srq) return false;
  const bool owned =
      which == core::Device::WorkQueue::srq ? owns(c, &Client::srqs, handle) : owns(c, &Client::qps, handle);
  const auto room =
      owned ? on_engine([&](core::Device& d, core::Time) { return d.room(which, handle); }) : std::nullopt;
  put_status(out, room ? 0 : EINVAL);
  if (room) out.put(*room);
  return true;
}

}  // namespace softrdma::host
