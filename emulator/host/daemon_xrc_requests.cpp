// softrdmad's XRC requests (IBTA vol. 1 annex A14): XRC domains, XRC SRQs and XRC targets
// opened again. A client's domains are its own; a target it opens must be in one of them.
#include <cerrno>
#include <mutex>

#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::put_created;
using daemon::put_status;

bool DaemonServer::handle_alloc_xrcd(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  if (!in.done()) return false;
  const auto xrcd = link_->alloc_xrcd();
  if (xrcd) adopt(c, &Client::xrcds, *xrcd);
  put_created(out, xrcd);
  return true;
}

bool DaemonServer::handle_dealloc_xrcd(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return destroy_owned(c, in, out, &Client::xrcds, &DeviceLink::dealloc_xrcd);
}

bool DaemonServer::handle_create_xrc_srq(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto pd = in.get<std::uint32_t>();
  const auto max_wr = in.get<std::uint32_t>();
  const auto max_sge = in.get<std::uint32_t>();
  const auto limit = in.get<std::uint32_t>();
  const core::Device::XrcSrq xrc{in.get<std::uint32_t>(), in.get<std::uint32_t>()};
  if (!in.done()) return false;
  if (!owns(c, &Client::pds, pd) || !owns(c, &Client::xrcds, xrc.xrcd) || !owns(c, &Client::cqs, xrc.cq)) {
    put_status(out, EINVAL);
    return true;
  }
  const auto srq = link_->create_xrc_srq(pd, max_wr, max_sge, limit, xrc);
  if (srq) adopt(c, &Client::srqs, *srq);
  put_created(out, srq);
  return true;
}

bool DaemonServer::handle_open_qp(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto xrcd = in.get<std::uint32_t>();
  const auto qpn = in.get<std::uint32_t>();
  if (!in.done()) return false;
  const int err = owns(c, &Client::xrcds, xrcd) ? link_->open_qp(xrcd, qpn) : EINVAL;
  if (err == 0) {
    std::lock_guard lock(mutex_);
    ++c.opened_qps[qpn];
  }
  put_status(out, err);
  return true;
}

bool DaemonServer::holds_qp(Client& c, std::uint32_t qpn) {
  if (owns(c, &Client::qps, qpn)) return true;
  std::lock_guard lock(mutex_);
  return c.opened_qps.contains(qpn);
}

std::optional<int> DaemonServer::close_opened_qp(Client& c, std::uint32_t qpn) {
  {
    std::lock_guard lock(mutex_);
    if (!c.opened_qps.contains(qpn)) return std::nullopt;
  }
  const int err = link_->destroy_qp(qpn);
  if (err != 0) return err;
  std::lock_guard lock(mutex_);
  if (--c.opened_qps[qpn] == 0) c.opened_qps.erase(qpn);
  return 0;
}

}  // namespace softrdma::host
