// XRC domains and the handles open on XRC targets (IBTA vol. 1 annex A14): a target belongs to
// its domain rather than to the process that created it, so that others in the domain can
// open it and it lives until the last of them closes it.
#include <cerrno>

#include "emulator/core/device.hpp"

namespace softrdma::core {

Expected<std::uint32_t> Device::alloc_xrcd() {
  if (config_.iwarp) return Expected<std::uint32_t>::error(EOPNOTSUPP);  // XRC is an InfiniBand transport
  const auto h = xrcds_.insert(Xrcd{});
  if (!h) return Expected<std::uint32_t>::error(ENOMEM);
  return *h;
}

int Device::dealloc_xrcd(std::uint32_t xrcd) {
  const Xrcd* x = xrcds_.find(xrcd);
  if (!x) return EINVAL;
  if (x->users) return EBUSY;
  xrcds_.erase(xrcd);
  return 0;
}

int Device::open_qp(std::uint32_t xrcd, std::uint32_t qpn) {
  Qp* q = find_qp(qpn);
  if (!q || q->init.qp_type != QpType::xrc_recv || q->init.xrcd != xrcd) return EINVAL;
  ++q->handles;
  return 0;
}

}  // namespace softrdma::core
