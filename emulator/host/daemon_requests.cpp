// DaemonServer::handle: one client request, run by the handler its op names in a table, as
// rdma-core finds a verb's implementation in its provider's ops table. The handlers live by
// subject: daemon_object_requests.cpp, daemon_memory_requests.cpp, daemon_post_requests.cpp,
// daemon_cm_requests.cpp and daemon_iwarp_requests.cpp.
//
// Each handle a request names must be the client's (DaemonServer::Client's sets), else EINVAL
// without touching the engine: the kernel's uverbs answers a handle of another process the
// same way. Objects join the client's sets when created and leave when destroyed.
#include <array>
#include <cerrno>
#include <cstddef>
#include <mutex>

#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::Op;

namespace {

// The key index of an MR or MW (Device keeps both in one table, key = index << 8 | key byte).
std::uint32_t index_of(std::uint32_t key) { return key >> 8; }

}  // namespace

bool DaemonServer::handle(Client& c, std::span<const std::uint8_t> request, int& passed,
                          std::vector<std::uint8_t>& reply) {
  constexpr std::size_t kOps = static_cast<std::size_t>(Op::end_of_ops);
  // Which entries are set is kept beside the pointers: comparing a member function pointer
  // with null is not a constant expression under -fsanitize.
  struct Table {
    std::array<Handler, kOps> handlers{};
    std::array<bool, kOps> set{};
  };
  static constexpr Table kTable = [] {
    Table table;
    auto set = [&](Op op, Handler handler) {
      table.handlers[static_cast<std::size_t>(op)] = handler;
      table.set[static_cast<std::size_t>(op)] = true;
    };
    set(Op::alloc_pd, &DaemonServer::handle_alloc_pd);
    set(Op::dealloc_pd, &DaemonServer::handle_dealloc_pd);
    set(Op::reg_mr, &DaemonServer::handle_reg_mr);
    set(Op::rereg_mr, &DaemonServer::handle_rereg_mr);
    set(Op::dereg_mr, &DaemonServer::handle_dereg_mr);
    set(Op::alloc_mw, &DaemonServer::handle_alloc_mw);
    set(Op::dealloc_mw, &DaemonServer::handle_dealloc_mw);
    set(Op::bind_mw, &DaemonServer::handle_bind_mw);
    set(Op::create_cq, &DaemonServer::handle_create_cq);
    set(Op::destroy_cq, &DaemonServer::handle_destroy_cq);
    set(Op::resize_cq, &DaemonServer::handle_resize_cq);
    set(Op::poll_cq, &DaemonServer::handle_poll_cq);
    set(Op::req_notify_cq, &DaemonServer::handle_req_notify_cq);
    set(Op::create_srq, &DaemonServer::handle_create_srq);
    set(Op::modify_srq, &DaemonServer::handle_modify_srq);
    set(Op::query_srq, &DaemonServer::handle_query_srq);
    set(Op::destroy_srq, &DaemonServer::handle_destroy_srq);
    set(Op::create_ah, &DaemonServer::handle_create_ah);
    set(Op::destroy_ah, &DaemonServer::handle_destroy_ah);
    set(Op::create_qp, &DaemonServer::handle_create_qp);
    set(Op::modify_qp, &DaemonServer::handle_modify_qp);
    set(Op::query_qp, &DaemonServer::handle_query_qp);
    set(Op::destroy_qp, &DaemonServer::handle_destroy_qp);
    set(Op::alloc_xrcd, &DaemonServer::handle_alloc_xrcd);
    set(Op::dealloc_xrcd, &DaemonServer::handle_dealloc_xrcd);
    set(Op::create_xrc_srq, &DaemonServer::handle_create_xrc_srq);
    set(Op::open_qp, &DaemonServer::handle_open_qp);
    set(Op::create_tm_srq, &DaemonServer::handle_create_tm_srq);
    set(Op::post_srq_ops, &DaemonServer::handle_post_srq_ops);
    set(Op::post_send, &DaemonServer::handle_post_send);
    set(Op::post_recv, &DaemonServer::handle_post_recv);
    set(Op::post_srq_recv, &DaemonServer::handle_post_srq_recv);
    set(Op::drain_cq, &DaemonServer::handle_drain_cq);
    set(Op::attach_work_ring, &DaemonServer::handle_attach_work_ring);
    set(Op::queue_room, &DaemonServer::handle_queue_room);
    set(Op::cm_listen, &DaemonServer::handle_cm_listen);
    set(Op::cm_stop_listening, &DaemonServer::handle_cm_stop_listening);
    set(Op::cm_connect, &DaemonServer::handle_cm_connect);
    set(Op::cm_accept, &DaemonServer::handle_cm_accept);
    set(Op::cm_ready, &DaemonServer::handle_cm_ready);
    set(Op::cm_reject, &DaemonServer::handle_cm_reject);
    set(Op::cm_disconnect, &DaemonServer::handle_cm_disconnect);
    set(Op::cm_resolve_service, &DaemonServer::handle_cm_resolve_service);
    set(Op::cm_answer_service, &DaemonServer::handle_cm_answer_service);
    set(Op::cm_destroy, &DaemonServer::handle_cm_destroy);
    set(Op::attach_mcast, &DaemonServer::handle_attach_mcast);
    set(Op::detach_mcast, &DaemonServer::handle_detach_mcast);
    set(Op::iw_listen, &DaemonServer::handle_iw_listen);
    set(Op::iw_stop_listening, &DaemonServer::handle_iw_stop_listening);
    set(Op::iw_connect, &DaemonServer::handle_iw_connect);
    set(Op::iw_accept, &DaemonServer::handle_iw_accept);
    set(Op::iw_reject, &DaemonServer::handle_iw_reject);
    set(Op::iw_disconnect, &DaemonServer::handle_iw_disconnect);
    set(Op::iw_destroy, &DaemonServer::handle_iw_destroy);
    return table;
  }();
  static_assert(
      [] {
        for (std::size_t op = static_cast<std::size_t>(Op::alloc_pd); op < kOps; ++op) {
          if (!kTable.set[op]) return false;
        }
        return true;
      }(),
      "every op has a handler");

  daemon::Reader in(request);
  daemon::Writer out(reply);
  const auto op = static_cast<std::size_t>(in.get<Op>());
  // A number that names no op (or a message too short to hold one) is not a request.
  if (op >= kOps || !kTable.set[op]) return false;
  return (this->*kTable.handlers[op])(c, in, out, passed);
}

bool DaemonServer::owns(Client& c, Handles set, std::uint32_t handle) {
  std::lock_guard lock(mutex_);
  return (c.*set).contains(handle);
}

void DaemonServer::adopt(Client& c, Handles set, std::uint32_t handle) {
  std::lock_guard lock(mutex_);
  (c.*set).insert(handle);
}

void DaemonServer::forget(Client& c, Handles set, std::uint32_t handle) {
  std::lock_guard lock(mutex_);
  (c.*set).erase(handle);
}

bool DaemonServer::owns(Client& c, Keys set, std::uint32_t key) {
  std::lock_guard lock(mutex_);
  return (c.*set).contains(index_of(key));
}

void DaemonServer::adopt(Client& c, Keys set, std::uint32_t key) {
  std::lock_guard lock(mutex_);
  (c.*set)[index_of(key)] = key;
}

void DaemonServer::forget(Client& c, Keys set, std::uint32_t key) {
  std::lock_guard lock(mutex_);
  (c.*set).erase(index_of(key));
}

template <class Set>
bool DaemonServer::destroy_owned(Client& c, daemon::Reader& in, daemon::Writer& out, Set set, Destroy destroy) {
  const auto handle = in.get<std::uint32_t>();
  if (!in.done()) return false;
  const int err = owns(c, set, handle) ? ((*link_).*destroy)(handle) : EINVAL;
  if (err == 0) forget(c, set, handle);
  daemon::put_status(out, err);
  return true;
}
template bool DaemonServer::destroy_owned(Client&, daemon::Reader&, daemon::Writer&, Handles, Destroy);
template bool DaemonServer::destroy_owned(Client&, daemon::Reader&, daemon::Writer&, Keys, Destroy);

}  // namespace softrdma::host
