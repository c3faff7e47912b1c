#include "emulator/host/iwarp_link.hpp"

namespace softrdma::host {

using core::Device;
using core::Time;

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

// The iWARP CM: each call under the host's lock, its socket actions carried out before it
// returns.
int IwarpLink::iw_stop_listening(std::uint32_t listener) {
  return host_.call([&](Device&, core::IwarpConnectionManager& cm) { return cm.stop_listening(listener); });
}

core::Expected<std::uint32_t> IwarpLink::iw_connect(const core::TcpEndpoint& remote, std::uint32_t qpn,
                                                    const core::MpaOffer& offer) {
  return host_.call([&](Device&, core::IwarpConnectionManager& cm) { return cm.connect(remote, qpn, offer); });
}

int IwarpLink::iw_accept(std::uint32_t id, std::uint32_t qpn, const core::MpaOffer& offer) {
  return host_.call([&](Device&, core::IwarpConnectionManager& cm) { return cm.accept(id, qpn, offer); });
}

int IwarpLink::iw_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return host_.call([&](Device&, core::IwarpConnectionManager& cm) { return cm.reject(id, private_data); });
}

int IwarpLink::iw_disconnect(std::uint32_t id) {
  return host_.call([&](Device&, core::IwarpConnectionManager& cm) { return cm.disconnect(id); });
}

void IwarpLink::iw_destroy(std::uint32_t id) {
  host_.call([&](Device&, core::IwarpConnectionManager& cm) { cm.destroy(id); });
}

}  // namespace softrdma::host
