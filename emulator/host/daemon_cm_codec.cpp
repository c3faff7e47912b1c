#include "emulator/host/daemon_cm_codec.hpp"

#include <array>

namespace softrdma::host::daemon {
namespace {

void put_data(Writer& out, const std::vector<std::uint8_t>& data) {
  out.put_vector(std::span<const std::uint8_t>(data));
}

// A bool travels as a byte: any byte read back into a bool would be undefined behaviour.
std::uint8_t flag(bool b) { return b ? 1 : 0; }

}  // namespace

void put(Writer& out, const core::CmConnect& c) {
  out.put(c.service_id);
  out.put(c.remote_gid);
  out.put(c.qpn);
  out.put(c.qp_type);
  out.put(c.starting_psn);
  out.put(c.responder_resources);
  out.put(c.initiator_depth);
  out.put(c.retry_count);
  out.put(c.rnr_retry_count);
  out.put(c.path_mtu);
  out.put(flag(c.srq));
  out.put(c.local_ack_timeout);
  out.put(c.flow_label);
  out.put(c.traffic_class);
  out.put(c.hop_limit);
  put_data(out, c.private_data);
}

void get(Reader& in, core::CmConnect& c) {
  c.service_id = in.get<std::uint64_t>();
  c.remote_gid = in.get<core::Gid>();
  c.qpn = in.get<std::uint32_t>();
  c.qp_type = in.get<core::QpType>();
  c.starting_psn = in.get<std::uint32_t>();
  c.responder_resources = in.get<std::uint8_t>();
  c.initiator_depth = in.get<std::uint8_t>();
  c.retry_count = in.get<std::uint8_t>();
  c.rnr_retry_count = in.get<std::uint8_t>();
  c.path_mtu = in.get<core::Mtu>();
  c.srq = in.get<std::uint8_t>() != 0;
  c.local_ack_timeout = in.get<std::uint8_t>();
  c.flow_label = in.get<std::uint32_t>();
  c.traffic_class = in.get<std::uint8_t>();
  c.hop_limit = in.get<std::uint8_t>();
  in.get_vector(c.private_data, kMaxPrivateData);
}

void put(Writer& out, const core::CmAccept& a) {
  out.put(a.qpn);
  out.put(a.starting_psn);
  out.put(a.responder_resources);
  out.put(a.initiator_depth);
  out.put(a.rnr_retry_count);
  out.put(flag(a.srq));
  put_data(out, a.private_data);
}

void get(Reader& in, core::CmAccept& a) {
  a.qpn = in.get<std::uint32_t>();
  a.starting_psn = in.get<std::uint32_t>();
  a.responder_resources = in.get<std::uint8_t>();
  a.initiator_depth = in.get<std::uint8_t>();
  a.rnr_retry_count = in.get<std::uint8_t>();
  a.srq = in.get<std::uint8_t>() != 0;
  in.get_vector(a.private_data, kMaxPrivateData);
}

void put(Writer& out, const core::CmServiceQuery& q) {
  out.put(q.service_id);
  out.put(q.remote_gid);
  put_data(out, q.private_data);
}

void get(Reader& in, core::CmServiceQuery& q) {
  q.service_id = in.get<std::uint64_t>();
  q.remote_gid = in.get<core::Gid>();
  in.get_vector(q.private_data, kMaxPrivateData);
}

void put(Writer& out, const core::CmServiceAnswer& a) {
  out.put(a.status);
  out.put(a.qpn);
  out.put(a.qkey);
  put_data(out, a.private_data);
}

void get(Reader& in, core::CmServiceAnswer& a) {
  a.status = in.get<std::uint8_t>();
  a.qpn = in.get<std::uint32_t>();
  a.qkey = in.get<std::uint32_t>();
  in.get_vector(a.private_data, kMaxPrivateData);
}

void put(Writer& out, const core::CmEvent& e) {
  out.put(e.type);
  out.put(e.id);
  out.put(e.listener);
  out.put(e.remote_gid);
  out.put(flag(e.mad.has_value()));
  if (!e.mad) return;
  std::array<std::uint8_t, wire::kMadLength> bytes{};
  wire::emit_cm_mad(*e.mad, bytes);
  out.put(bytes);
}

bool get(Reader& in, core::CmEvent& e) {
  e.type = in.get<core::CmEventType>();
  e.id = in.get<std::uint32_t>();
  e.listener = in.get<std::uint32_t>();
  e.remote_gid = in.get<core::Gid>();
  const bool has_mad = in.get<std::uint8_t>() != 0;
  if (e.type > core::CmEventType::service_reply) return false;
  e.mad.reset();
  if (!has_mad) return in.done();
  const auto bytes = in.get<std::array<std::uint8_t, wire::kMadLength>>();
  if (!in.done()) return false;
  auto parsed = wire::parse_cm_mad(bytes);
  if (!parsed) return false;
  e.mad = parsed.value();
  return true;
}

}  // namespace softrdma::host::daemon
