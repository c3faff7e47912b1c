// What the verbs shim asks of a device, whether the engine runs in the application process
// (EmbeddedLink, over an EmbeddedHost) or in the softrdmad daemon (DaemonClient, over a Unix
// socket). The verbs are core::Device's (emulator/core/device.hpp), with the same handles,
// results and errno values; what a link adds is where they run, and so the clock (the host
// reads it) and the event delivery (set_event_handlers).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "emulator/core/device.hpp"
#include "emulator/host/event_delivery.hpp"

namespace softrdma::host {

class DeviceLink {
 public:
  virtual ~DeviceLink() = default;

  // The address the device holds ("127.0.0.2", "::1"): the shim derives GIDs and GUIDs from it.
  virtual const std::string& address() const = 0;

  virtual core::Expected<std::uint32_t> alloc_pd() = 0;
  virtual int dealloc_pd(std::uint32_t pd) = 0;
  virtual core::Expected<core::MrKeys> reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length,
                                              std::uint64_t iova, std::uint32_t access) = 0;
  virtual int rereg_mr(std::uint32_t lkey, const core::MrChange& change) = 0;
  virtual int dereg_mr(std::uint32_t lkey) = 0;
  virtual core::Expected<std::uint32_t> alloc_mw(std::uint32_t pd, int type) = 0;
  virtual int dealloc_mw(std::uint32_t rkey) = 0;
  virtual core::Expected<std::uint32_t> bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                                std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                                std::optional<std::uint64_t> signal_wr_id) = 0;

  virtual core::Expected<std::uint32_t> create_cq(std::uint32_t cqe) = 0;
  virtual int destroy_cq(std::uint32_t cq) = 0;
  virtual int resize_cq(std::uint32_t cq, std::uint32_t cqe) = 0;
  virtual int poll_cq(std::uint32_t cq, std::span<core::Wc> out) = 0;  // count, or -errno
  virtual int req_notify_cq(std::uint32_t cq, bool solicited_only) = 0;

  virtual core::Expected<std::uint32_t> create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                                   std::uint32_t limit) = 0;
  virtual int modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr,
                         bool set_limit) = 0;
  virtual int query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) = 0;
  virtual int destroy_srq(std::uint32_t srq) = 0;

  // XRC (IBTA vol. 1 annex A14; core::Device's verbs, with its errno values). A link that does
  // not carry them has none: has_xrc() false, and each call fails with EOPNOTSUPP.
  virtual bool has_xrc() const { return false; }
  virtual core::Expected<std::uint32_t> alloc_xrcd() { return unsupported(); }
  virtual int dealloc_xrcd(std::uint32_t) { return EOPNOTSUPP; }
  virtual core::Expected<std::uint32_t> create_xrc_srq(std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t,
                                                       const core::Device::XrcSrq&) {
    return unsupported();
  }
  virtual int open_qp(std::uint32_t, std::uint32_t) { return EOPNOTSUPP; }

  // Tag matching (core::Device::post_srq_ops, core/tag_matching.hpp), with its errno values. A
  // link that does not carry it has none: tm_caps() all 0, and each call fails with EOPNOTSUPP.
  virtual core::TmCaps tm_caps() const { return {}; }
  virtual core::Expected<std::uint32_t> create_tm_srq(std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t,
                                                      const core::Device::TmSrq&) {
    return unsupported();
  }
  virtual int post_srq_ops(std::uint32_t, core::SrqOp&) { return EOPNOTSUPP; }

  virtual core::Expected<std::uint32_t> create_ah(std::uint32_t pd, const core::AddressVector& av) = 0;
  virtual int destroy_ah(std::uint32_t ah) = 0;

  virtual core::Expected<core::QpCreated> create_qp(const core::QpInitAttr& attr) = 0;
  virtual int modify_qp(std::uint32_t qpn, const core::QpAttr& attr, std::uint32_t mask) = 0;
  virtual int query_qp(std::uint32_t qpn, core::QpAttr& attr, core::QpInitAttr& init) = 0;
  virtual int destroy_qp(std::uint32_t qpn) = 0;

  // Work requests in order until one fails: 0, or its errno with `posted` WRs accepted before it
  // (ibv_post_send's bad_wr).
  virtual int post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) = 0;
  virtual int post_recv(std::uint32_t qpn, std::span<const core::RecvWr> wrs, std::size_t& posted) = 0;
  virtual int post_srq_recv(std::uint32_t srq, std::span<const core::RecvWr> wrs, std::size_t& posted) = 0;

  // Multicast (core::Device::attach_mcast, with its errno values). A link that carries no
  // group membership has none: limits all 0, and attaching fails with EOPNOTSUPP.
  virtual core::MulticastLimits multicast_limits() const { return {0, 0, 0}; }
  virtual int attach_mcast(std::uint32_t, const core::Gid&) { return EOPNOTSUPP; }
  virtual int detach_mcast(std::uint32_t, const core::Gid&) { return EOPNOTSUPP; }

  // Completion-channel and async events, on a thread of the link's choosing (never under a
  // lock the handlers could need). A link whose device goes away raises device_fatal.
  virtual void set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) = 0;

  // The connection manager of port 1 (core/connection_manager.hpp), with its errno values.
  // Its events go to the handler set here, on the same terms as the others.
  virtual core::Expected<std::uint32_t> cm_listen(std::uint64_t service_id) = 0;
  virtual int cm_stop_listening(std::uint32_t listener) = 0;
  virtual core::Expected<std::uint32_t> cm_connect(const core::CmConnect& request) = 0;
  virtual int cm_accept(std::uint32_t id, const core::CmAccept& reply) = 0;
  virtual int cm_ready(std::uint32_t id, std::span<const std::uint8_t> private_data) = 0;
  virtual int cm_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) = 0;
  virtual int cm_disconnect(std::uint32_t id, std::span<const std::uint8_t> private_data) = 0;
  virtual core::Expected<std::uint32_t> cm_resolve_service(const core::CmServiceQuery& query) = 0;
  virtual int cm_answer_service(std::uint32_t id, const core::CmServiceAnswer& answer) = 0;
  virtual void cm_destroy(std::uint32_t id) = 0;
  virtual void set_cm_handler(CmEventHandler on_cm) = 0;

  // The iWARP connection manager (core/iwarp_cm.hpp) of a device that has one, with its errno
  // values; a RoCE device has none (EOPNOTSUPP). Its events go to the handler set here, on
  // the same terms as the others.
  virtual core::Expected<std::uint32_t> iw_listen(const core::TcpEndpoint&) { return unsupported(); }
  virtual int iw_stop_listening(std::uint32_t) { return EOPNOTSUPP; }
  virtual core::Expected<std::uint32_t> iw_connect(const core::TcpEndpoint&, std::uint32_t, const core::MpaOffer&) {
    return unsupported();
  }
  virtual int iw_accept(std::uint32_t, std::uint32_t, const core::MpaOffer&) { return EOPNOTSUPP; }
  virtual int iw_reject(std::uint32_t, std::span<const std::uint8_t>) { return EOPNOTSUPP; }
  virtual int iw_disconnect(std::uint32_t) { return EOPNOTSUPP; }
  virtual void iw_destroy(std::uint32_t) {}
  virtual void set_iw_handler(IwarpEventHandler) {}

 private:
  static core::Expected<std::uint32_t> unsupported() { return core::Expected<std::uint32_t>::error(EOPNOTSUPP); }
};

}  // namespace softrdma::host
