// softrdmad's requests for PDs, CQs, SRQs, AHs, QPs and QPs' multicast groups: each checks that the handles it names
// are the client's (EINVAL for another's, daemon_requests.cpp), runs the verb on the engine,
// and adds what it creates to the client's sets or drops what it destroys.
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <vector>

#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::put_created;
using daemon::put_status;

bool DaemonServer::handle_alloc_pd(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  if (!in.done()) return false;
  const auto pd = link_->alloc_pd();
  if (pd) adopt(c, &Client::pds, *pd);
  put_created(out, pd);
  return true;
}

bool DaemonServer::handle_dealloc_pd(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return destroy_owned(c, in, out, &Client::pds, &DeviceLink::dealloc_pd);
}

// With the client's ring attached (cq_ring.hpp), completions go there; without one the client
// polls with requests.
bool DaemonServer::handle_create_cq(Client& c, daemon::Reader& in, daemon::Writer& out, int& passed) {
  const auto cqe = in.get<std::uint32_t>();
  if (!in.done()) return false;
  std::unique_ptr<CqRing> ring;
  if (passed >= 0) {
    ring = CqRing::adopt(passed);
    ::close(passed);
    passed = -1;
    if (!ring) {
      put_status(out, EINVAL);
      return true;
    }
  }
  const auto cq = link_->create_cq(cqe);
  if (cq) {
    adopt(c, &Client::cqs, *cq);
    if (ring) {
      std::lock_guard lock(rings_mutex_);
      rings_[*cq] = OwnedRing{std::move(ring), &c};
    }
  }
  put_created(out, cq);
  return true;
}

bool DaemonServer::handle_drain_cq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto cq = in.get<std::uint32_t>();
  if (!in.done()) return false;
  if (!owns(c, &Client::cqs, cq)) {
    put_status(out, EINVAL);
    return true;
  }
  on_engine([&](core::Device& d, core::Time) {
    std::lock_guard lock(rings_mutex_);
    fill_ring(d, cq);
  });
  put_status(out, 0);
  return true;
}

bool DaemonServer::handle_destroy_cq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto cq = in.get<std::uint32_t>();
  if (!in.done()) return false;
  const int err = owns(c, &Client::cqs, cq) ? link_->destroy_cq(cq) : EINVAL;
  if (err == 0) {
    forget(c, &Client::cqs, cq);
    forget_ring(cq);
  }
  put_status(out, err);
  return true;
}

bool DaemonServer::handle_resize_cq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto cq = in.get<std::uint32_t>();
  const auto cqe = in.get<std::uint32_t>();
  if (!in.done()) return false;
  if (!owns(c, &Client::cqs, cq)) {
    put_status(out, EINVAL);
    return true;
  }
  // The posts the client made before this request complete first (taken from its work ring,
  // then sent: a call sends what the engine has ready), as an embedded device's have when the
  // post returns. Completions already in the client's ring are still the CQ's, and a size below
  // them fails as one below the engine's does (ibv_resize_cq: EINVAL).
  drain_work(c);
  on_engine([](core::Device&, core::Time) {});
  put_status(out, on_engine([&](core::Device& d, core::Time) {
               std::lock_guard lock(rings_mutex_);
               const auto ring = rings_.find(cq);
               const std::uint32_t unread = ring != rings_.end() ? ring->second.ring->unread() : 0;
               return unread > cqe ? EINVAL : d.resize_cq(cq, cqe);
             }));
  return true;
}

bool DaemonServer::handle_poll_cq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto cq = in.get<std::uint32_t>();
  const auto max = in.get<std::uint32_t>();
  if (!in.done() || max > daemon::kMaxPolled) return false;
  thread_local std::vector<core::Wc> wcs;
  wcs.resize(max);
  const int n = owns(c, &Client::cqs, cq) ? link_->poll_cq(cq, wcs) : -EINVAL;
  put_status(out, n < 0 ? -n : 0);
  if (n >= 0) out.put_vector(std::span<const core::Wc>(wcs.data(), static_cast<std::size_t>(n)));
  return true;
}

bool DaemonServer::handle_req_notify_cq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto cq = in.get<std::uint32_t>();
  const auto solicited_only = in.get<std::uint8_t>();
  if (!in.done()) return false;
  put_status(out, owns(c, &Client::cqs, cq) ? link_->req_notify_cq(cq, solicited_only != 0) : EINVAL);
  return true;
}

bool DaemonServer::handle_create_srq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto pd = in.get<std::uint32_t>();
  const auto max_wr = in.get<std::uint32_t>();
  const auto max_sge = in.get<std::uint32_t>();
  const auto limit = in.get<std::uint32_t>();
  if (!in.done()) return false;
  if (!owns(c, &Client::pds, pd)) {
    put_status(out, EINVAL);
    return true;
  }
  const auto srq = link_->create_srq(pd, max_wr, max_sge, limit);
  if (srq) adopt(c, &Client::srqs, *srq);
  put_created(out, srq);
  return true;
}

bool DaemonServer::handle_modify_srq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto srq = in.get<std::uint32_t>();
  const auto max_wr = in.get<std::uint32_t>();
  const auto limit = in.get<std::uint32_t>();
  const auto set_max_wr = in.get<std::uint8_t>();
  const auto set_limit = in.get<std::uint8_t>();
  if (!in.done()) return false;
  put_status(out, owns(c, &Client::srqs, srq) ? link_->modify_srq(srq, max_wr, limit, set_max_wr != 0, set_limit != 0)
                                              : EINVAL);
  return true;
}

bool DaemonServer::handle_query_srq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto srq = in.get<std::uint32_t>();
  if (!in.done()) return false;
  std::uint32_t max_wr = 0, max_sge = 0, limit = 0;
  const int err = owns(c, &Client::srqs, srq) ? link_->query_srq(srq, max_wr, max_sge, limit) : EINVAL;
  put_status(out, err);
  if (err == 0) {
    out.put(max_wr);
    out.put(max_sge);
    out.put(limit);
  }
  return true;
}

bool DaemonServer::handle_destroy_srq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return destroy_owned(c, in, out, &Client::srqs, &DeviceLink::destroy_srq);
}

bool DaemonServer::handle_create_ah(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto pd = in.get<std::uint32_t>();
  const auto av = in.get<core::AddressVector>();
  if (!in.done()) return false;
  if (!owns(c, &Client::pds, pd)) {
    put_status(out, EINVAL);
    return true;
  }
  const auto ah = link_->create_ah(pd, av);
  if (ah) adopt(c, &Client::ahs, *ah);
  put_created(out, ah);
  return true;
}

bool DaemonServer::handle_destroy_ah(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return destroy_owned(c, in, out, &Client::ahs, &DeviceLink::destroy_ah);
}

bool DaemonServer::handle_create_qp(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto init = in.get<core::QpInitAttr>();
  if (!in.done()) return false;
  // An XRC target names only its domain; an initiator no receive CQ (annex A14).
  const bool owned = init.qp_type == core::QpType::xrc_recv
                         ? owns(c, &Client::xrcds, init.xrcd)
                         : owns(c, &Client::pds, init.pd) && owns(c, &Client::cqs, init.send_cq) &&
                               (init.qp_type == core::QpType::xrc_send || owns(c, &Client::cqs, init.recv_cq)) &&
                               (init.srq == 0 || owns(c, &Client::srqs, init.srq));
  if (!owned) {
    put_status(out, EINVAL);
    return true;
  }
  const auto qp = link_->create_qp(init);
  if (qp) adopt(c, &Client::qps, qp->qpn);
  put_created(out, qp);
  return true;
}

bool DaemonServer::handle_modify_qp(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto qpn = in.get<std::uint32_t>();
  const auto attr = in.get<core::QpAttr>();
  const auto mask = in.get<std::uint32_t>();
  if (!in.done()) return false;
  put_status(out, holds_qp(c, qpn) ? link_->modify_qp(qpn, attr, mask) : EINVAL);
  return true;
}

bool DaemonServer::handle_query_qp(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto qpn = in.get<std::uint32_t>();
  if (!in.done()) return false;
  core::QpAttr attr;
  core::QpInitAttr init;
  const int err = holds_qp(c, qpn) ? link_->query_qp(qpn, attr, init) : EINVAL;
  put_status(out, err);
  if (err == 0) {
    out.put(attr);
    out.put(init);
  }
  return true;
}

bool DaemonServer::handle_destroy_qp(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto qpn = in.get<std::uint32_t>();
  if (!in.done()) return false;
  if (const auto closed = close_opened_qp(c, qpn)) {
    put_status(out, *closed);
    return true;
  }
  const int err = owns(c, &Client::qps, qpn) ? link_->destroy_qp(qpn) : EINVAL;
  if (err == 0) {
    forget(c, &Client::qps, qpn);
    std::lock_guard lock(mutex_);
    c.taken.erase(qpn);  // a QP that takes this QPN next counts from 0
  }
  put_status(out, err);
  return true;
}

// A group joined through a QP is left when the QP is destroyed, by the client or by release().
bool DaemonServer::handle_attach_mcast(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return change_membership(c, in, out, &DeviceLink::attach_mcast);
}

bool DaemonServer::handle_detach_mcast(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return change_membership(c, in, out, &DeviceLink::detach_mcast);
}

bool DaemonServer::change_membership(Client& c, daemon::Reader& in, daemon::Writer& out, Membership change) {
  const auto qpn = in.get<std::uint32_t>();
  const auto group = in.get<core::Gid>();
  if (!in.done()) return false;
  put_status(out, owns(c, &Client::qps, qpn) ? ((*link_).*change)(qpn, group) : EINVAL);
  return true;
}

}  // namespace softrdma::host
