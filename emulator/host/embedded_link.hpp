// The verbs on a RoCE engine in this process: each one a call() on the EmbeddedHost, under its
// lock, with its clock (engine_link.hpp has those the iWARP host shares). The shim's embedded
// mode uses it, and so does the daemon for its clients' requests (daemon_server.hpp), once it
// has checked that they own what they name.
#pragma once

#include "emulator/host/embedded_host.hpp"
#include "emulator/host/engine_link.hpp"

namespace softrdma::host {

class EmbeddedLink final : public EngineLink<EmbeddedHost> {
 public:
  explicit EmbeddedLink(EmbeddedHost& host) : EngineLink(host) {}

  int post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) override;
  core::MulticastLimits multicast_limits() const override { return host_.multicast_limits(); }
  int attach_mcast(std::uint32_t qpn, const core::Gid& mgid) override { return host_.attach_mcast(qpn, mgid); }
  int detach_mcast(std::uint32_t qpn, const core::Gid& mgid) override { return host_.detach_mcast(qpn, mgid); }
  core::Expected<std::uint32_t> cm_listen(std::uint64_t service_id) override;
  int cm_stop_listening(std::uint32_t listener) override;
  core::Expected<std::uint32_t> cm_connect(const core::CmConnect& request) override;
  int cm_accept(std::uint32_t id, const core::CmAccept& reply) override;
  int cm_ready(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  int cm_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  int cm_disconnect(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  core::Expected<std::uint32_t> cm_resolve_service(const core::CmServiceQuery& query) override;
  int cm_answer_service(std::uint32_t id, const core::CmServiceAnswer& answer) override;
  void cm_destroy(std::uint32_t id) override;
  void set_cm_handler(CmEventHandler on_cm) override { host_.set_cm_handler(std::move(on_cm)); }
};

}  // namespace softrdma::host
