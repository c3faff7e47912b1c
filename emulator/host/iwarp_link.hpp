// The verbs on an iWARP engine in this process (iwarp_host.hpp). Connections are the iWARP
// connection manager's (the iw_* calls): the InfiniBand CM's calls fail with EOPNOTSUPP, as an
// iWARP RNIC has no IB CM, and no multicast either.
#pragma once

#include "emulator/host/engine_link.hpp"
#include "emulator/host/iwarp_host.hpp"

namespace softrdma::host {

class IwarpLink final : public EngineLink<IwarpHost> {
 public:
  explicit IwarpLink(IwarpHost& host) : EngineLink(host) {}

  int post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) override;

  core::Expected<std::uint32_t> cm_listen(std::uint64_t) override { return no_ib_cm(); }
  int cm_stop_listening(std::uint32_t) override { return EOPNOTSUPP; }
  core::Expected<std::uint32_t> cm_connect(const core::CmConnect&) override { return no_ib_cm(); }
  int cm_accept(std::uint32_t, const core::CmAccept&) override { return EOPNOTSUPP; }
  int cm_ready(std::uint32_t, std::span<const std::uint8_t>) override { return EOPNOTSUPP; }
  int cm_reject(std::uint32_t, std::span<const std::uint8_t>) override { return EOPNOTSUPP; }
  int cm_disconnect(std::uint32_t, std::span<const std::uint8_t>) override { return EOPNOTSUPP; }
  core::Expected<std::uint32_t> cm_resolve_service(const core::CmServiceQuery&) override { return no_ib_cm(); }
  int cm_answer_service(std::uint32_t, const core::CmServiceAnswer&) override { return EOPNOTSUPP; }
  void cm_destroy(std::uint32_t) override {}
  void set_cm_handler(CmEventHandler) override {}

  core::Expected<std::uint32_t> iw_listen(const core::TcpEndpoint& local) override { return host_.listen(local); }
  int iw_stop_listening(std::uint32_t listener) override;
  core::Expected<std::uint32_t> iw_connect(const core::TcpEndpoint& remote, std::uint32_t qpn,
                                           const core::MpaOffer& offer) override;
  int iw_accept(std::uint32_t id, std::uint32_t qpn, const core::MpaOffer& offer) override;
  int iw_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  int iw_disconnect(std::uint32_t id) override;
  void iw_destroy(std::uint32_t id) override;
  void set_iw_handler(IwarpEventHandler handler) override { host_.set_event_handler(std::move(handler)); }

 private:
  static core::Expected<std::uint32_t> no_ib_cm() { return core::Expected<std::uint32_t>::error(EOPNOTSUPP); }
};

}  // namespace softrdma::host
