#include "wire/cm_mad.hpp"

#include <algorithm>
#include <type_traits>

namespace wire {
namespace {

// Layouts of the attributes, offsets from the first byte of the MAD data (byte 24 of the MAD).

// REQ, s12.6.5 table 99. Bytes 4-7 and 24-27 are reserved.
struct Req {
  using local_comm_id = Field<0, 4>;
  using service_id = Field<8, 8>;
  using local_ca_guid = Field<16, 8>;
  using local_qkey = Field<28, 4>;
  using local_qpn = Field<32, 3>;
  using responder_resources = Field<35, 1>;
  using local_eecn = Field<36, 3>;
  using initiator_depth = Field<39, 1>;
  using remote_eecn = Field<40, 3>;
  using remote_cm_response_timeout = Field<43, 1, 0xF8>;
  using transport_service_type = Field<43, 1, 0x06>;
  using end_to_end_flow_control = Flag<43, 0x01>;
  using starting_psn = Field<44, 3>;
  using local_cm_response_timeout = Field<47, 1, 0xF8>;
  using retry_count = Field<47, 1, 0x07>;
  using pkey = Field<48, 2>;
  using path_mtu = Field<50, 1, 0xF0>;
  using rdc_exists = Flag<50, 0x08>;
  using rnr_retry_count = Field<50, 1, 0x07>;
  using max_cm_retries = Field<51, 1, 0xF0>;
  using srq = Flag<51, 0x08>;
  using extended_transport = Field<51, 1, 0x07>;
  static constexpr std::size_t primary = 52, alternate = 96, private_data = 140;
};

// One REQ path (the primary at byte 52, the alternate at 96), offsets from its first byte.
// The 32-bit word at 36 is flow label (20 bits), reserved (6), packet rate (6); bytes 42 and
// 43 end in 3 reserved bits each.
struct Path {
  using local_lid = Field<0, 2>;
  using remote_lid = Field<2, 2>;
  static constexpr std::size_t local_gid = 4, remote_gid = 20;
  using flow_label = Field<36, 4, 0xFFFFF000>;
  using packet_rate = Field<39, 1, 0x3F>;
  using traffic_class = Field<40, 1>;
  using hop_limit = Field<41, 1>;
  using sl = Field<42, 1, 0xF0>;
  using subnet_local = Flag<42, 0x08>;
  using local_ack_timeout = Field<43, 1, 0xF8>;
};

// The two comm IDs that open MRA, REJ, REP, RTU, DREQ and DREP.
struct Ids {
  using local_comm_id = Field<0, 4>;
  using remote_comm_id = Field<4, 4>;
};

// MRA, s12.6.6.
struct Mra {
  using message_mraed = Field<8, 1, 0xC0>;
  using service_timeout = Field<9, 1, 0xF8>;
  static constexpr std::size_t private_data = 10;
};

// REJ, s12.6.7.
struct Rej {
  using message_rejected = Field<8, 1, 0xC0>;
  using reject_info_length = Field<9, 1, 0xFE>;
  using reason = Field<10, 2>;
  static constexpr std::size_t additional_reject_info = 12, private_data = 84;
};

// REP, s12.6.8. Bytes 15, 19, 23 and the low nibble of 27 are reserved.
struct Rep {
  using local_qkey = Field<8, 4>;
  using local_qpn = Field<12, 3>;
  using local_eecn = Field<16, 3>;
  using starting_psn = Field<20, 3>;
  using responder_resources = Field<24, 1>;
  using initiator_depth = Field<25, 1>;
  using target_ack_delay = Field<26, 1, 0xF8>;
  using failover_accepted = Field<26, 1, 0x06>;
  using end_to_end_flow_control = Flag<26, 0x01>;
  using rnr_retry_count = Field<27, 1, 0xE0>;
  using srq = Flag<27, 0x10>;
  using local_ca_guid = Field<28, 8>;
  static constexpr std::size_t private_data = 36;
};

// RTU (s12.6.9) and DREP (s12.6.11): the comm IDs, then private data.
constexpr std::size_t kIdsPrivateData = 8;

// DREQ, s12.6.10. Byte 11 is reserved.
struct Dreq {
  using remote_qpn_eecn = Field<8, 3>;
  static constexpr std::size_t private_data = 12;
};

// SIDR_REQ, s12.11.1. Bytes 6-7 are reserved.
struct SidrReq {
  using request_id = Field<0, 4>;
  using pkey = Field<4, 2>;
  using service_id = Field<8, 8>;
  static constexpr std::size_t private_data = 16;
};

// SIDR_REP, s12.11.2. Bytes 6-7 and 11 are reserved.
struct SidrRep {
  using request_id = Field<0, 4>;
  using status = Field<4, 1>;
  using additional_info_length = Field<5, 1>;
  using qpn = Field<8, 3>;
  using service_id = Field<12, 8>;
  using qkey = Field<20, 4>;
  static constexpr std::size_t class_port_info = 24, private_data = 96;
};

// Annex A11: MajV (4) MinV (4) | IPV (4) reserved (4) | source port (2) | source IP (16) |
// destination IP (16).
struct IpCm {
  using major_version = Field<0, 1, 0xF0>;
  using minor_version = Field<0, 1, 0x0F>;
  using ip_version = Field<1, 1, 0xF0>;
  using source_port = Field<2, 2>;
  static constexpr std::size_t source_ip = 4, destination_ip = 20;
};

// The largest "additional information" a REJ (ARI) or SIDR_REP (ClassPortInfo) carries.
constexpr std::size_t kAdditionalInfo = 72;

template <std::size_t N>
void take(std::array<std::uint8_t, N>& to, const std::uint8_t* from) {
  std::copy_n(from, N, to.begin());
}
template <std::size_t N>
void put(const std::array<std::uint8_t, N>& from, std::uint8_t* to) {
  std::copy_n(from.begin(), N, to);
}

CmPath parse_path(const std::uint8_t* p) {
  CmPath c;
  c.local_lid = Path::local_lid::get(p);
  c.remote_lid = Path::remote_lid::get(p);
  take(c.local_gid, p + Path::local_gid);
  take(c.remote_gid, p + Path::remote_gid);
  c.flow_label = Path::flow_label::get(p);
  c.packet_rate = Path::packet_rate::get(p);
  c.traffic_class = Path::traffic_class::get(p);
  c.hop_limit = Path::hop_limit::get(p);
  c.sl = Path::sl::get(p);
  c.subnet_local = Path::subnet_local::get(p);
  c.local_ack_timeout = Path::local_ack_timeout::get(p);
  return c;
}

void emit_path(const CmPath& c, std::uint8_t* p) {
  Path::local_lid::set(p, c.local_lid);
  Path::remote_lid::set(p, c.remote_lid);
  put(c.local_gid, p + Path::local_gid);
  put(c.remote_gid, p + Path::remote_gid);
  Path::flow_label::set(p, c.flow_label);
  Path::packet_rate::set(p, c.packet_rate);
  Path::traffic_class::set(p, c.traffic_class);
  Path::hop_limit::set(p, c.hop_limit);
  Path::sl::set(p, c.sl);
  Path::subnet_local::set(p, c.subnet_local);
  Path::local_ack_timeout::set(p, c.local_ack_timeout);
}

Result<CmMessage> parse_req(const std::uint8_t* d) {
  CmReq m;
  m.local_comm_id = Req::local_comm_id::get(d);
  m.service_id = Req::service_id::get(d);
  m.local_ca_guid = Req::local_ca_guid::get(d);
  m.local_qkey = Req::local_qkey::get(d);
  m.local_qpn = Req::local_qpn::get(d);
  m.responder_resources = Req::responder_resources::get(d);
  m.local_eecn = Req::local_eecn::get(d);
  m.initiator_depth = Req::initiator_depth::get(d);
  m.remote_eecn = Req::remote_eecn::get(d);
  m.remote_cm_response_timeout = Req::remote_cm_response_timeout::get(d);
  m.transport_service_type = Req::transport_service_type::get(d);
  m.end_to_end_flow_control = Req::end_to_end_flow_control::get(d);
  m.starting_psn = Req::starting_psn::get(d);
  m.local_cm_response_timeout = Req::local_cm_response_timeout::get(d);
  m.retry_count = Req::retry_count::get(d);
  m.pkey = Req::pkey::get(d);
  m.path_mtu = Req::path_mtu::get(d);
  m.rdc_exists = Req::rdc_exists::get(d);
  m.rnr_retry_count = Req::rnr_retry_count::get(d);
  m.max_cm_retries = Req::max_cm_retries::get(d);
  m.srq = Req::srq::get(d);
  m.extended_transport = Req::extended_transport::get(d);
  // Annex A14: service type 3 names its transport in the extended transport type, where only
  // 1 (XRC) is defined.
  if (m.transport_service_type == 3 && m.extended_transport != 1) return Error::invalid_field;
  m.primary = parse_path(d + Req::primary);
  m.alternate = parse_path(d + Req::alternate);
  take(m.private_data, d + Req::private_data);
  return CmMessage(m);
}

void emit_req(const CmReq& m, std::uint8_t* d) {
  Req::local_comm_id::set(d, m.local_comm_id);
  Req::service_id::set(d, m.service_id);
  Req::local_ca_guid::set(d, m.local_ca_guid);
  Req::local_qkey::set(d, m.local_qkey);
  Req::local_qpn::set(d, m.local_qpn);
  Req::responder_resources::set(d, m.responder_resources);
  Req::local_eecn::set(d, m.local_eecn);
  Req::initiator_depth::set(d, m.initiator_depth);
  Req::remote_eecn::set(d, m.remote_eecn);
  Req::remote_cm_response_timeout::set(d, m.remote_cm_response_timeout);
  Req::transport_service_type::set(d, m.transport_service_type);
  Req::end_to_end_flow_control::set(d, m.end_to_end_flow_control);
  Req::starting_psn::set(d, m.starting_psn);
  Req::local_cm_response_timeout::set(d, m.local_cm_response_timeout);
  Req::retry_count::set(d, m.retry_count);
  Req::pkey::set(d, m.pkey);
  Req::path_mtu::set(d, m.path_mtu);
  Req::rdc_exists::set(d, m.rdc_exists);
  Req::rnr_retry_count::set(d, m.rnr_retry_count);
  Req::max_cm_retries::set(d, m.max_cm_retries);
  Req::srq::set(d, m.srq);
  Req::extended_transport::set(d, m.extended_transport);
  emit_path(m.primary, d + Req::primary);
  emit_path(m.alternate, d + Req::alternate);
  put(m.private_data, d + Req::private_data);
}

Result<CmMessage> parse_mra(const std::uint8_t* d) {
  CmMra m;
  m.local_comm_id = Ids::local_comm_id::get(d);
  m.remote_comm_id = Ids::remote_comm_id::get(d);
  m.message_mraed = Mra::message_mraed::get(d);
  if (m.message_mraed == 3) return Error::invalid_field;  // s12.6.6: 3 is reserved
  m.service_timeout = Mra::service_timeout::get(d);
  take(m.private_data, d + Mra::private_data);
  return CmMessage(m);
}

void emit_mra(const CmMra& m, std::uint8_t* d) {
  Ids::local_comm_id::set(d, m.local_comm_id);
  Ids::remote_comm_id::set(d, m.remote_comm_id);
  Mra::message_mraed::set(d, m.message_mraed);
  Mra::service_timeout::set(d, m.service_timeout);
  put(m.private_data, d + Mra::private_data);
}

Result<CmMessage> parse_rej(const std::uint8_t* d) {
  CmRej m;
  m.local_comm_id = Ids::local_comm_id::get(d);
  m.remote_comm_id = Ids::remote_comm_id::get(d);
  m.message_rejected = Rej::message_rejected::get(d);
  m.reject_info_length = Rej::reject_info_length::get(d);
  // s12.6.7: "message REJected" 3 is reserved; the ARI field holds 72 bytes.
  if (m.message_rejected == 3 || m.reject_info_length > kAdditionalInfo) return Error::invalid_field;
  m.reason = Rej::reason::get(d);
  take(m.additional_reject_info, d + Rej::additional_reject_info);
  take(m.private_data, d + Rej::private_data);
  return CmMessage(m);
}

void emit_rej(const CmRej& m, std::uint8_t* d) {
  Ids::local_comm_id::set(d, m.local_comm_id);
  Ids::remote_comm_id::set(d, m.remote_comm_id);
  Rej::message_rejected::set(d, m.message_rejected);
  Rej::reject_info_length::set(d, m.reject_info_length);
  Rej::reason::set(d, m.reason);
  put(m.additional_reject_info, d + Rej::additional_reject_info);
  put(m.private_data, d + Rej::private_data);
}

Result<CmMessage> parse_rep(const std::uint8_t* d) {
  CmRep m;
  m.local_comm_id = Ids::local_comm_id::get(d);
  m.remote_comm_id = Ids::remote_comm_id::get(d);
  m.local_qkey = Rep::local_qkey::get(d);
  m.local_qpn = Rep::local_qpn::get(d);
  m.local_eecn = Rep::local_eecn::get(d);
  m.starting_psn = Rep::starting_psn::get(d);
  m.responder_resources = Rep::responder_resources::get(d);
  m.initiator_depth = Rep::initiator_depth::get(d);
  m.target_ack_delay = Rep::target_ack_delay::get(d);
  m.failover_accepted = Rep::failover_accepted::get(d);
  m.end_to_end_flow_control = Rep::end_to_end_flow_control::get(d);
  m.rnr_retry_count = Rep::rnr_retry_count::get(d);
  m.srq = Rep::srq::get(d);
  m.local_ca_guid = Rep::local_ca_guid::get(d);
  take(m.private_data, d + Rep::private_data);
  return CmMessage(m);
}

void emit_rep(const CmRep& m, std::uint8_t* d) {
  Ids::local_comm_id::set(d, m.local_comm_id);
  Ids::remote_comm_id::set(d, m.remote_comm_id);
  Rep::local_qkey::set(d, m.local_qkey);
  Rep::local_qpn::set(d, m.local_qpn);
  Rep::local_eecn::set(d, m.local_eecn);
  Rep::starting_psn::set(d, m.starting_psn);
  Rep::responder_resources::set(d, m.responder_resources);
  Rep::initiator_depth::set(d, m.initiator_depth);
  Rep::target_ack_delay::set(d, m.target_ack_delay);
  Rep::failover_accepted::set(d, m.failover_accepted);
  Rep::end_to_end_flow_control::set(d, m.end_to_end_flow_control);
  Rep::rnr_retry_count::set(d, m.rnr_retry_count);
  Rep::srq::set(d, m.srq);
  Rep::local_ca_guid::set(d, m.local_ca_guid);
  put(m.private_data, d + Rep::private_data);
}

// RTU and DREP have the same layout.
template <typename M>
Result<CmMessage> parse_ids_only(const std::uint8_t* d) {
  M m;
  m.local_comm_id = Ids::local_comm_id::get(d);
  m.remote_comm_id = Ids::remote_comm_id::get(d);
  take(m.private_data, d + kIdsPrivateData);
  return CmMessage(m);
}

template <typename M>
void emit_ids_only(const M& m, std::uint8_t* d) {
  Ids::local_comm_id::set(d, m.local_comm_id);
  Ids::remote_comm_id::set(d, m.remote_comm_id);
  put(m.private_data, d + kIdsPrivateData);
}

Result<CmMessage> parse_dreq(const std::uint8_t* d) {
  CmDreq m;
  m.local_comm_id = Ids::local_comm_id::get(d);
  m.remote_comm_id = Ids::remote_comm_id::get(d);
  m.remote_qpn_eecn = Dreq::remote_qpn_eecn::get(d);
  take(m.private_data, d + Dreq::private_data);
  return CmMessage(m);
}

void emit_dreq(const CmDreq& m, std::uint8_t* d) {
  Ids::local_comm_id::set(d, m.local_comm_id);
  Ids::remote_comm_id::set(d, m.remote_comm_id);
  Dreq::remote_qpn_eecn::set(d, m.remote_qpn_eecn);
  put(m.private_data, d + Dreq::private_data);
}

Result<CmMessage> parse_sidr_req(const std::uint8_t* d) {
  CmSidrReq m;
  m.request_id = SidrReq::request_id::get(d);
  m.pkey = SidrReq::pkey::get(d);
  m.service_id = SidrReq::service_id::get(d);
  take(m.private_data, d + SidrReq::private_data);
  return CmMessage(m);
}

void emit_sidr_req(const CmSidrReq& m, std::uint8_t* d) {
  SidrReq::request_id::set(d, m.request_id);
  SidrReq::pkey::set(d, m.pkey);
  SidrReq::service_id::set(d, m.service_id);
  put(m.private_data, d + SidrReq::private_data);
}

Result<CmMessage> parse_sidr_rep(const std::uint8_t* d) {
  CmSidrRep m;
  m.request_id = SidrRep::request_id::get(d);
  m.status = SidrRep::status::get(d);
  m.additional_info_length = SidrRep::additional_info_length::get(d);
  // s12.11.2: the additional information (a ClassPortInfo) is 72 bytes.
  if (m.additional_info_length > kAdditionalInfo) return Error::invalid_field;
  m.qpn = SidrRep::qpn::get(d);
  m.service_id = SidrRep::service_id::get(d);
  m.qkey = SidrRep::qkey::get(d);
  take(m.class_port_info, d + SidrRep::class_port_info);
  take(m.private_data, d + SidrRep::private_data);
  return CmMessage(m);
}

void emit_sidr_rep(const CmSidrRep& m, std::uint8_t* d) {
  SidrRep::request_id::set(d, m.request_id);
  SidrRep::status::set(d, m.status);
  SidrRep::additional_info_length::set(d, m.additional_info_length);
  SidrRep::qpn::set(d, m.qpn);
  SidrRep::service_id::set(d, m.service_id);
  SidrRep::qkey::set(d, m.qkey);
  put(m.class_port_info, d + SidrRep::class_port_info);
  put(m.private_data, d + SidrRep::private_data);
}

// The attribute of each CmMessage alternative, in the variant's order.
constexpr std::array<CmAttr, std::variant_size_v<CmMessage>> kAttributes{
    CmAttr::req,  CmAttr::mra,  CmAttr::rej,      CmAttr::rep,      CmAttr::rtu,
    CmAttr::dreq, CmAttr::drep, CmAttr::sidr_req, CmAttr::sidr_rep,
};

}  // namespace

Result<CmMad> parse_cm_mad(std::span<const std::uint8_t> mad) {
  if (mad.size() < kMadLength) return Error::truncated;
  if (mad.size() > kMadLength) return Error::bad_length;  // s13.4.2: a MAD is 256 bytes
  const std::uint8_t* p = mad.data();
  if (Mad::base_version::get(p) != kMadBaseVersion) return Error::bad_version;   // s13.4.2
  if (Mad::mgmt_class::get(p) != kCmClass) return Error::unsupported_class;      // s13.4.4
  if (Mad::class_version::get(p) != kCmClassVersion) return Error::bad_version;  // ch. 12.6

  CmMad out;
  out.header.base_version = Mad::base_version::get(p);
  out.header.mgmt_class = Mad::mgmt_class::get(p);
  out.header.class_version = Mad::class_version::get(p);
  out.header.method = Mad::method::get(p);
  out.header.status = Mad::status::get(p);
  out.header.class_specific = Mad::class_specific::get(p);
  out.header.transaction_id = Mad::transaction_id::get(p);
  out.header.attribute_id = Mad::attribute_id::get(p);
  out.header.attribute_modifier = Mad::attribute_modifier::get(p);

  const std::uint8_t* d = p + Mad::length;
  Result<CmMessage> m = Error::unsupported_attribute;
  switch (static_cast<CmAttr>(out.header.attribute_id)) {
    case CmAttr::req:
      m = parse_req(d);
      break;
    case CmAttr::mra:
      m = parse_mra(d);
      break;
    case CmAttr::rej:
      m = parse_rej(d);
      break;
    case CmAttr::rep:
      m = parse_rep(d);
      break;
    case CmAttr::rtu:
      m = parse_ids_only<CmRtu>(d);
      break;
    case CmAttr::dreq:
      m = parse_dreq(d);
      break;
    case CmAttr::drep:
      m = parse_ids_only<CmDrep>(d);
      break;
    case CmAttr::sidr_req:
      m = parse_sidr_req(d);
      break;
    case CmAttr::sidr_rep:
      m = parse_sidr_rep(d);
      break;
    case CmAttr::class_port_info:
    case CmAttr::lap:
    case CmAttr::apr:
      break;
  }
  if (!m) return m.error();
  out.message = *m;
  return out;
}

void emit_cm_mad(const CmMad& mad, std::span<std::uint8_t, kMadLength> out) {
  std::fill(out.begin(), out.end(), std::uint8_t{0});
  std::uint8_t* p = out.data();
  const MadHeader& h = mad.header;
  Mad::base_version::set(p, h.base_version);
  Mad::mgmt_class::set(p, h.mgmt_class);
  Mad::class_version::set(p, h.class_version);
  Mad::method::set(p, h.method);
  Mad::status::set(p, h.status);
  Mad::class_specific::set(p, h.class_specific);
  Mad::transaction_id::set(p, h.transaction_id);
  Mad::attribute_id::set(p, static_cast<std::uint16_t>(attribute_of(mad.message)));
  Mad::attribute_modifier::set(p, h.attribute_modifier);

  std::uint8_t* d = p + Mad::length;
  std::visit(
      [d](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, CmReq>)
          emit_req(m, d);
        else if constexpr (std::is_same_v<M, CmMra>)
          emit_mra(m, d);
        else if constexpr (std::is_same_v<M, CmRej>)
          emit_rej(m, d);
        else if constexpr (std::is_same_v<M, CmRep>)
          emit_rep(m, d);
        else if constexpr (std::is_same_v<M, CmDreq>)
          emit_dreq(m, d);
        else if constexpr (std::is_same_v<M, CmSidrReq>)
          emit_sidr_req(m, d);
        else if constexpr (std::is_same_v<M, CmSidrRep>)
          emit_sidr_rep(m, d);
        else
          emit_ids_only(m, d);  // RTU, DREP
      },
      mad.message);
}

CmAttr attribute_of(const CmMessage& m) { return kAttributes[m.index()]; }

std::string_view name(CmAttr a) {
  switch (a) {
    case CmAttr::class_port_info:
      return "ClassPortInfo";
    case CmAttr::req:
      return "REQ";
    case CmAttr::mra:
      return "MRA";
    case CmAttr::rej:
      return "REJ";
    case CmAttr::rep:
      return "REP";
    case CmAttr::rtu:
      return "RTU";
    case CmAttr::dreq:
      return "DREQ";
    case CmAttr::drep:
      return "DREP";
    case CmAttr::sidr_req:
      return "SIDR_REQ";
    case CmAttr::sidr_rep:
      return "SIDR_REP";
    case CmAttr::lap:
      return "LAP";
    case CmAttr::apr:
      return "APR";
  }
  return "";
}

std::string_view rej_reason_name(std::uint16_t reason) {
  // s12.6.7 table 103, codes 1 to 33.
  static constexpr std::array<std::string_view, 34> names{
      "",
      "NO_QP",
      "NO_EEC",
      "NO_RESOURCES",
      "TIMEOUT",
      "UNSUPPORTED_REQUEST",
      "INVALID_COMM_ID",
      "INVALID_COMM_INSTANCE",
      "INVALID_SERVICE_ID",
      "INVALID_TRANSPORT_SERVICE_TYPE",
      "STALE_CONNECTION",
      "RDC_DOES_NOT_EXIST",
      "PRIMARY_REMOTE_GID_REJECTED",
      "PRIMARY_REMOTE_LID_REJECTED",
      "INVALID_PRIMARY_SL",
      "INVALID_PRIMARY_TRAFFIC_CLASS",
      "INVALID_PRIMARY_HOP_LIMIT",
      "INVALID_PRIMARY_PACKET_RATE",
      "ALTERNATE_REMOTE_GID_REJECTED",
      "ALTERNATE_REMOTE_LID_REJECTED",
      "INVALID_ALTERNATE_SL",
      "INVALID_ALTERNATE_TRAFFIC_CLASS",
      "INVALID_ALTERNATE_HOP_LIMIT",
      "INVALID_ALTERNATE_PACKET_RATE",
      "PORT_AND_CM_REDIRECTION",
      "PORT_REDIRECTION",
      "INVALID_PATH_MTU",
      "INSUFFICIENT_RESPONDER_RESOURCES",
      "CONSUMER_REJECT",
      "RNR_RETRY_COUNT_REJECT",
      "DUPLICATE_LOCAL_COMM_ID",
      "UNSUPPORTED_CLASS_VERSION",
      "INVALID_PRIMARY_FLOW_LABEL",
      "INVALID_ALTERNATE_FLOW_LABEL",
  };
  return reason < names.size() ? names[reason] : "";
}

Result<IpCmHeader> parse_ip_cm_header(std::span<const std::uint8_t> req_private_data) {
  if (req_private_data.size() < kIpCmHeaderLength) return Error::truncated;
  const std::uint8_t* p = req_private_data.data();
  IpCmHeader h;
  h.major_version = IpCm::major_version::get(p);
  h.minor_version = IpCm::minor_version::get(p);
  h.ip_version = IpCm::ip_version::get(p);
  // Annex A11 defines major version 0, carrying IPv4 or IPv6 addresses.
  if (h.major_version != 0 || (h.ip_version != 4 && h.ip_version != 6)) return Error::bad_version;
  h.source_port = IpCm::source_port::get(p);
  take(h.source_ip, p + IpCm::source_ip);
  take(h.destination_ip, p + IpCm::destination_ip);
  return h;
}

void emit_ip_cm_header(const IpCmHeader& h, std::span<std::uint8_t> out) {
  std::uint8_t* p = out.data();
  std::fill_n(p, kIpCmHeaderLength, std::uint8_t{0});
  IpCm::major_version::set(p, h.major_version);
  IpCm::minor_version::set(p, h.minor_version);
  IpCm::ip_version::set(p, h.ip_version);
  IpCm::source_port::set(p, h.source_port);
  put(h.source_ip, p + IpCm::source_ip);
  put(h.destination_ip, p + IpCm::destination_ip);
}

std::optional<IpCmService> ip_cm_service(std::uint64_t service_id) {
  // Annex A11: the top 40 bits are the prefix, then the port space (8 bits) and port (16).
  if ((service_id & ~std::uint64_t{0xFFFFFF}) != kIpCmServiceIdPrefix) return std::nullopt;
  return IpCmService{static_cast<std::uint8_t>(service_id >> 16), static_cast<std::uint16_t>(service_id)};
}

std::uint64_t ip_cm_service_id(std::uint8_t port_space, std::uint16_t port) {
  return kIpCmServiceIdPrefix | std::uint64_t{port_space} << 16 | port;
}

}  // namespace wire
