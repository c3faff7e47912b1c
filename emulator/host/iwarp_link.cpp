#include "emulator/host/iwarp_link.hpp"

namespace softrdma::host {

using core::Device;
using core::Time;

int IwarpLink::req_notify_cq(std::uint32_t cq, bool solicited_only) {
  return host_.call([&](Device& d, Time) { return d.req_notify_cq(cq, solicited_only); });
}

int IwarpLink::destroy_qp(std::uint32_t qpn) {
  return host_.call([&](Device& d, Time) { return d.destroy_qp(qpn); });
}

// One lock for the whole list; its FPDUs are written before the call returns, as far as the
// socket takes them.
int IwarpLink::post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) {
  return host_.call([&](Device& d, Time now) {
    for (posted = 0; posted < wrs.size(); ++posted) {
      if (const int err = d.post_send(now, qpn, wrs[posted])) return err;
    }
    return 0;
  });
}

}  // namespace softrdma::host
