#include "emulator/host/embedded_link.hpp"

namespace softrdma::host {

using core::Device;
using core::Time;

// One lock for the whole list, as a NIC takes a doorbell for a chain of WQEs.
int EmbeddedLink::post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) {
  return host_.post([&](Device& d, Time now) {
    for (posted = 0; posted < wrs.size(); ++posted) {
      if (const int err = d.post_send(now, qpn, wrs[posted])) return err;
    }
    return 0;
  });
}

// The connection manager: each call under the host's lock, its MADs sent before it returns.
core::Expected<std::uint32_t> EmbeddedLink::cm_listen(std::uint64_t service_id) {
  return host_.call([&](Device& d, Time) { return d.cm().listen(service_id); });
}

int EmbeddedLink::cm_stop_listening(std::uint32_t listener) {
  return host_.call([&](Device& d, Time now) { return d.cm().stop_listening(now, listener); });
}

core::Expected<std::uint32_t> EmbeddedLink::cm_connect(const core::CmConnect& request) {
  return host_.call([&](Device& d, Time now) { return d.cm().connect(now, request); });
}

int EmbeddedLink::cm_accept(std::uint32_t id, const core::CmAccept& reply) {
  return host_.call([&](Device& d, Time now) { return d.cm().accept(now, id, reply); });
}

int EmbeddedLink::cm_ready(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return host_.call([&](Device& d, Time now) { return d.cm().ready(now, id, private_data); });
}

int EmbeddedLink::cm_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return host_.call([&](Device& d, Time now) { return d.cm().reject(now, id, private_data); });
}

int EmbeddedLink::cm_disconnect(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return host_.call([&](Device& d, Time now) { return d.cm().disconnect(now, id, private_data); });
}

core::Expected<std::uint32_t> EmbeddedLink::cm_resolve_service(const core::CmServiceQuery& query) {
  return host_.call([&](Device& d, Time now) { return d.cm().resolve_service(now, query); });
}

int EmbeddedLink::cm_answer_service(std::uint32_t id, const core::CmServiceAnswer& answer) {
  return host_.call([&](Device& d, Time now) { return d.cm().answer_service(now, id, answer); });
}

void EmbeddedLink::cm_destroy(std::uint32_t id) {
  host_.call([&](Device& d, Time now) { d.cm().destroy(now, id); });
}

}  // namespace softrdma::host
