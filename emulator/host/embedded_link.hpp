// The verbs on an engine in this process: each one a call() on the EmbeddedHost, under its lock,
// with its clock. The shim's embedded mode uses it, and so does the daemon for its clients'
// requests (daemon_server.hpp), once it has checked that they own what they name.
#pragma once

#include "emulator/host/device_link.hpp"
#include "emulator/host/embedded_host.hpp"

namespace softrdma::host {

class EmbeddedLink final : public DeviceLink {
 public:
  explicit EmbeddedLink(EmbeddedHost& host) : host_(host) {}

  EmbeddedHost& host() { return host_; }

  const std::string& address() const override { return host_.address(); }

  core::Expected<std::uint32_t> alloc_pd() override;
  int dealloc_pd(std::uint32_t pd) override;
  core::Expected<core::MrKeys> reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length, std::uint64_t iova,
                                      std::uint32_t access) override;
  int rereg_mr(std::uint32_t lkey, const core::MrChange& change) override;
  int dereg_mr(std::uint32_t lkey) override;
  core::Expected<std::uint32_t> alloc_mw(std::uint32_t pd, int type) override;
  int dealloc_mw(std::uint32_t rkey) override;
  core::Expected<std::uint32_t> bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                        std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                        std::optional<std::uint64_t> signal_wr_id) override;
  core::Expected<std::uint32_t> create_cq(std::uint32_t cqe) override;
  int destroy_cq(std::uint32_t cq) override;
  int resize_cq(std::uint32_t cq, std::uint32_t cqe) override;
  int poll_cq(std::uint32_t cq, std::span<core::Wc> out) override { return host_.poll_cq(cq, out); }
  int req_notify_cq(std::uint32_t cq, bool solicited_only) override { return host_.req_notify_cq(cq, solicited_only); }
  core::Expected<std::uint32_t> create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                           std::uint32_t limit) override;
  int modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr,
                 bool set_limit) override;
  int query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) override;
  int destroy_srq(std::uint32_t srq) override;
  core::Expected<std::uint32_t> create_ah(std::uint32_t pd, const core::AddressVector& av) override;
  int destroy_ah(std::uint32_t ah) override;
  core::Expected<core::QpCreated> create_qp(const core::QpInitAttr& attr) override;
  int modify_qp(std::uint32_t qpn, const core::QpAttr& attr, std::uint32_t mask) override;
  int query_qp(std::uint32_t qpn, core::QpAttr& attr, core::QpInitAttr& init) override;
  int destroy_qp(std::uint32_t qpn) override;
  int post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) override;
  int post_recv(std::uint32_t qpn, std::span<const core::RecvWr> wrs, std::size_t& posted) override;
  int post_srq_recv(std::uint32_t srq, std::span<const core::RecvWr> wrs, std::size_t& posted) override;
  core::MulticastLimits multicast_limits() const override { return host_.multicast_limits(); }
  int attach_mcast(std::uint32_t qpn, const core::Gid& mgid) override { return host_.attach_mcast(qpn, mgid); }
  int detach_mcast(std::uint32_t qpn, const core::Gid& mgid) override { return host_.detach_mcast(qpn, mgid); }
  void set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) override {
    host_.set_event_handlers(std::move(on_cq), std::move(on_async));
  }
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

 private:
  EmbeddedHost& host_;
};

}  // namespace softrdma::host
