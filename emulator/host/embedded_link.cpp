#include "emulator/host/embedded_link.hpp"

namespace softrdma::host {

using core::Device;
using core::Time;

core::Expected<std::uint32_t> EmbeddedLink::alloc_pd() {
  return host_.call([](Device& d, Time) { return d.alloc_pd(); });
}

int EmbeddedLink::dealloc_pd(std::uint32_t pd) {
  return host_.call([&](Device& d, Time) { return d.dealloc_pd(pd); });
}

core::Expected<core::MrKeys> EmbeddedLink::reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length,
                                                  std::uint64_t iova, std::uint32_t access) {
  return host_.call([&](Device& d, Time) { return d.reg_mr(pd, host, length, iova, access); });
}

int EmbeddedLink::rereg_mr(std::uint32_t lkey, const core::MrChange& change) {
  return host_.call([&](Device& d, Time) { return d.rereg_mr(lkey, change); });
}

int EmbeddedLink::dereg_mr(std::uint32_t lkey) {
  return host_.call([&](Device& d, Time) { return d.dereg_mr(lkey); });
}

core::Expected<std::uint32_t> EmbeddedLink::alloc_mw(std::uint32_t pd, int type) {
  return host_.call([&](Device& d, Time) { return d.alloc_mw(pd, type); });
}

int EmbeddedLink::dealloc_mw(std::uint32_t rkey) {
  return host_.call([&](Device& d, Time) { return d.dealloc_mw(rkey); });
}

core::Expected<std::uint32_t> EmbeddedLink::bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                                    std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                                    std::optional<std::uint64_t> signal_wr_id) {
  return host_.call(
      [&](Device& d, Time) { return d.bind_mw(qpn, mw_rkey, mr_lkey, addr, length, access, signal_wr_id); });
}

core::Expected<std::uint32_t> EmbeddedLink::create_cq(std::uint32_t cqe) {
  return host_.call([&](Device& d, Time) { return d.create_cq(cqe); });
}

int EmbeddedLink::destroy_cq(std::uint32_t cq) {
  return host_.call([&](Device& d, Time) { return d.destroy_cq(cq); });
}

int EmbeddedLink::resize_cq(std::uint32_t cq, std::uint32_t cqe) {
  return host_.call([&](Device& d, Time) { return d.resize_cq(cq, cqe); });
}

core::Expected<std::uint32_t> EmbeddedLink::create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                                       std::uint32_t limit) {
  return host_.call([&](Device& d, Time) { return d.create_srq(pd, max_wr, max_sge, limit); });
}

int EmbeddedLink::modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr,
                             bool set_limit) {
  return host_.call([&](Device& d, Time) { return d.modify_srq(srq, max_wr, limit, set_max_wr, set_limit); });
}

int EmbeddedLink::query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) {
  return host_.call([&](Device& d, Time) { return d.query_srq(srq, max_wr, max_sge, limit); });
}

int EmbeddedLink::destroy_srq(std::uint32_t srq) {
  return host_.call([&](Device& d, Time) { return d.destroy_srq(srq); });
}

core::Expected<std::uint32_t> EmbeddedLink::create_ah(std::uint32_t pd, const core::AddressVector& av) {
  return host_.call([&](Device& d, Time) { return d.create_ah(pd, av); });
}

int EmbeddedLink::destroy_ah(std::uint32_t ah) {
  return host_.call([&](Device& d, Time) { return d.destroy_ah(ah); });
}

core::Expected<core::QpCreated> EmbeddedLink::create_qp(const core::QpInitAttr& attr) {
  return host_.call([&](Device& d, Time) { return d.create_qp(attr); });
}

int EmbeddedLink::modify_qp(std::uint32_t qpn, const core::QpAttr& attr, std::uint32_t mask) {
  return host_.call([&](Device& d, Time now) { return d.modify_qp(now, qpn, attr, mask); });
}

int EmbeddedLink::query_qp(std::uint32_t qpn, core::QpAttr& attr, core::QpInitAttr& init) {
  return host_.call([&](Device& d, Time) { return d.query_qp(qpn, attr, init); });
}

int EmbeddedLink::destroy_qp(std::uint32_t qpn) { return host_.destroy_qp(qpn); }

// One lock for the whole list, as a NIC takes a doorbell for a chain of WQEs.
int EmbeddedLink::post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) {
  return host_.post([&](Device& d, Time now) {
    for (posted = 0; posted < wrs.size(); ++posted) {
      if (const int err = d.post_send(now, qpn, wrs[posted])) return err;
    }
    return 0;
  });
}

int EmbeddedLink::post_recv(std::uint32_t qpn, std::span<const core::RecvWr> wrs, std::size_t& posted) {
  return host_.call([&](Device& d, Time) {
    for (posted = 0; posted < wrs.size(); ++posted) {
      if (const int err = d.post_recv(qpn, wrs[posted])) return err;
    }
    return 0;
  });
}

int EmbeddedLink::post_srq_recv(std::uint32_t srq, std::span<const core::RecvWr> wrs, std::size_t& posted) {
  return host_.call([&](Device& d, Time) {
    for (posted = 0; posted < wrs.size(); ++posted) {
      if (const int err = d.post_srq_recv(srq, wrs[posted])) return err;
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
