// The verbs that are the engine's own calls, the same on every host that runs the engine in
// this process: each one a Host::call(f(device, now)) under the host's lock, or the host's own
// method of that name (polling, arming a CQ, destroying a QP). EmbeddedLink (RoCE) and IwarpLink
// add what their hosts do differently: posting, multicast and connection management.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "emulator/host/device_link.hpp"

namespace softrdma::host {

template <class Host>
class EngineLink : public DeviceLink {
 public:
  explicit EngineLink(Host& host) : host_(host) {}

  Host& host() { return host_; }

  const std::string& address() const override { return host_.address(); }
  int poll_cq(std::uint32_t cq, std::span<core::Wc> out) override { return host_.poll_cq(cq, out); }
  int req_notify_cq(std::uint32_t cq, bool solicited_only) override { return host_.req_notify_cq(cq, solicited_only); }
  int destroy_qp(std::uint32_t qpn) override { return host_.destroy_qp(qpn); }
  void set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) override {
    host_.set_event_handlers(std::move(on_cq), std::move(on_async));
  }

  core::Expected<std::uint32_t> alloc_pd() override {
    return host_.call([](core::Device& d, core::Time) { return d.alloc_pd(); });
  }
  int dealloc_pd(std::uint32_t pd) override {
    return host_.call([&](core::Device& d, core::Time) { return d.dealloc_pd(pd); });
  }
  core::Expected<core::MrKeys> reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length, std::uint64_t iova,
                                      std::uint32_t access) override {
    return host_.call([&](core::Device& d, core::Time) { return d.reg_mr(pd, host, length, iova, access); });
  }
  int rereg_mr(std::uint32_t lkey, const core::MrChange& change) override {
    return host_.call([&](core::Device& d, core::Time) { return d.rereg_mr(lkey, change); });
  }
  int dereg_mr(std::uint32_t lkey) override {
    return host_.call([&](core::Device& d, core::Time) { return d.dereg_mr(lkey); });
  }
  core::Expected<std::uint32_t> alloc_mw(std::uint32_t pd, int type) override {
    return host_.call([&](core::Device& d, core::Time) { return d.alloc_mw(pd, type); });
  }
  int dealloc_mw(std::uint32_t rkey) override {
    return host_.call([&](core::Device& d, core::Time) { return d.dealloc_mw(rkey); });
  }
  core::Expected<std::uint32_t> bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                        std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                        std::optional<std::uint64_t> signal_wr_id) override {
    return host_.call([&](core::Device& d, core::Time) {
      return d.bind_mw(qpn, mw_rkey, mr_lkey, addr, length, access, signal_wr_id);
    });
  }

  core::Expected<std::uint32_t> create_cq(std::uint32_t cqe) override {
    return host_.call([&](core::Device& d, core::Time) { return d.create_cq(cqe); });
  }
  int destroy_cq(std::uint32_t cq) override {
    return host_.call([&](core::Device& d, core::Time) { return d.destroy_cq(cq); });
  }
  int resize_cq(std::uint32_t cq, std::uint32_t cqe) override {
    return host_.call([&](core::Device& d, core::Time) { return d.resize_cq(cq, cqe); });
  }

  core::Expected<std::uint32_t> create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                           std::uint32_t limit) override {
    return host_.call([&](core::Device& d, core::Time) { return d.create_srq(pd, max_wr, max_sge, limit); });
  }
  int modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr,
                 bool set_limit) override {
    return host_.call(
        [&](core::Device& d, core::Time) { return d.modify_srq(srq, max_wr, limit, set_max_wr, set_limit); });
  }
  int query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) override {
    return host_.call([&](core::Device& d, core::Time) { return d.query_srq(srq, max_wr, max_sge, limit); });
  }
  int destroy_srq(std::uint32_t srq) override {
    return host_.call([&](core::Device& d, core::Time) { return d.destroy_srq(srq); });
  }

  bool has_xrc() const override { return true; }
  core::Expected<std::uint32_t> alloc_xrcd() override {
    return host_.call([](core::Device& d, core::Time) { return d.alloc_xrcd(); });
  }
  int dealloc_xrcd(std::uint32_t xrcd) override {
    return host_.call([&](core::Device& d, core::Time) { return d.dealloc_xrcd(xrcd); });
  }
  core::Expected<std::uint32_t> create_xrc_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                               std::uint32_t limit, const core::Device::XrcSrq& xrc) override {
    return host_.call([&](core::Device& d, core::Time) { return d.create_srq(pd, max_wr, max_sge, limit, xrc); });
  }
  int open_qp(std::uint32_t xrcd, std::uint32_t qpn) override {
    return host_.call([&](core::Device& d, core::Time) { return d.open_qp(xrcd, qpn); });
  }

  core::TmCaps tm_caps() const override {
    return host_.call([](core::Device& d, core::Time) { return d.tm_caps(); });
  }
  core::Expected<std::uint32_t> create_tm_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                              std::uint32_t limit, const core::Device::TmSrq& tm) override {
    return host_.call(
        [&](core::Device& d, core::Time) { return d.create_srq(pd, max_wr, max_sge, limit, std::nullopt, tm); });
  }
  int post_srq_ops(std::uint32_t srq, core::SrqOp& op) override {
    return host_.call([&](core::Device& d, core::Time) { return d.post_srq_ops(srq, op); });
  }

  core::Expected<std::uint32_t> create_ah(std::uint32_t pd, const core::AddressVector& av) override {
    return host_.call([&](core::Device& d, core::Time) { return d.create_ah(pd, av); });
  }
  int destroy_ah(std::uint32_t ah) override {
    return host_.call([&](core::Device& d, core::Time) { return d.destroy_ah(ah); });
  }

  core::Expected<core::QpCreated> create_qp(const core::QpInitAttr& attr) override {
    return host_.call([&](core::Device& d, core::Time) { return d.create_qp(attr); });
  }
  int modify_qp(std::uint32_t qpn, const core::QpAttr& attr, std::uint32_t mask) override {
    return host_.call([&](core::Device& d, core::Time now) { return d.modify_qp(now, qpn, attr, mask); });
  }
  int query_qp(std::uint32_t qpn, core::QpAttr& attr, core::QpInitAttr& init) override {
    return host_.call([&](core::Device& d, core::Time) { return d.query_qp(qpn, attr, init); });
  }

  int post_recv(std::uint32_t qpn, std::span<const core::RecvWr> wrs, std::size_t& posted) override {
    return host_.post([&](core::Device& d, core::Time) {
      for (posted = 0; posted < wrs.size(); ++posted) {
        if (const int err = d.post_recv(qpn, wrs[posted])) return err;
      }
      return 0;
    });
  }
  int post_srq_recv(std::uint32_t srq, std::span<const core::RecvWr> wrs, std::size_t& posted) override {
    return host_.post([&](core::Device& d, core::Time) {
      for (posted = 0; posted < wrs.size(); ++posted) {
        if (const int err = d.post_srq_recv(srq, wrs[posted])) return err;
      }
      return 0;
    });
  }

 protected:
  Host& host_;
};

}  // namespace softrdma::host
