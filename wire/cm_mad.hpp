// InfiniBand Communication Management MADs (IBTA vol. 1 ch. 12.6 and 12.11) in the common
// MAD format (s13.4.2), and the RDMA IP CM Service header (annex A11) that rdma_cm puts at
// the start of a REQ's private data.
//
// parse_cm_mad() checks untrusted bytes once and returns the message as plain values;
// emit_cm_mad() writes a whole 256-byte MAD from them. Reserved bits are emitted as zero:
// every CM MAD of the real captures (Linux rxe, ConnectX) sends them as zero, so a parsed MAD
// rebuilds byte-for-byte.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "wire/error.hpp"
#include "wire/field.hpp"

namespace wire {

inline constexpr std::size_t kMadLength = 256;         // IBTA vol. 1 s13.4.2: every MAD is 256 bytes
inline constexpr std::uint8_t kMadBaseVersion = 1;     // s13.4.2: BaseVersion
inline constexpr std::uint8_t kCmClass = 0x07;         // s13.4.4 management class: Communication Management
inline constexpr std::uint8_t kCmClassVersion = 2;     // the CM class version (ch. 12.6)
inline constexpr std::uint32_t kGsiQpn = 1;            // ch. 13.5: QP1 is the General Services Interface
inline constexpr std::uint32_t kGsiQkey = 0x80010000;  // ch. 13.5: QP1's well-known Q_Key

using Gid16 = std::array<std::uint8_t, 16>;

// The common MAD header, s13.4.2. Offsets from the first byte of the MAD.
struct Mad {
  static constexpr std::size_t length = 24;
  static constexpr std::size_t data_length = kMadLength - length;  // 232: the attribute's bytes
  using base_version = Field<0, 1>;
  using mgmt_class = Field<1, 1>;
  using class_version = Field<2, 1>;
  using method = Field<3, 1>;  // the R (response) bit and the method proper, as one byte
  using status = Field<4, 2>;
  using class_specific = Field<6, 2>;
  using transaction_id = Field<8, 8>;
  using attribute_id = Field<16, 2>;
  using reserved = Field<18, 2>;
  using attribute_modifier = Field<20, 4>;
};

enum class MadMethod : std::uint8_t { get = 0x01, set = 0x02, send = 0x03, get_resp = 0x81 /* others left as raw */ };
enum class CmAttr : std::uint16_t {
  class_port_info = 0x0001,
  req = 0x0010,
  mra = 0x0011,
  rej = 0x0012,
  rep = 0x0013,
  rtu = 0x0014,
  dreq = 0x0015,
  drep = 0x0016,
  sidr_req = 0x0017,
  sidr_rep = 0x0018,
  lap = 0x0019,
  apr = 0x001A,
};

struct MadHeader {  // s13.4.2 common MAD header, 24 bytes
  std::uint8_t base_version = 1, mgmt_class = kCmClass, class_version = kCmClassVersion, method = 0x03;
  std::uint16_t status = 0, class_specific = 0;
  std::uint64_t transaction_id = 0;
  std::uint16_t attribute_id = 0;  // emit_cm_mad() writes attribute_of(message) instead
  std::uint32_t attribute_modifier = 0;
  bool operator==(const MadHeader&) const = default;
};

struct CmPath {  // one path of a REQ (s12.6.5 table 99 "Primary ..." / "Alternate ...")
  std::uint16_t local_lid = 0xFFFF, remote_lid = 0xFFFF;  // RoCE: permissive LID as rxe sends
  Gid16 local_gid{}, remote_gid{};
  std::uint32_t flow_label = 0;  // 20 bits
  std::uint8_t packet_rate = 0;  // 6 bits
  std::uint8_t traffic_class = 0, hop_limit = 0;
  std::uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  std::uint8_t local_ack_timeout = 0;  // 5 bits
  bool operator==(const CmPath&) const = default;
};

struct CmReq {  // s12.6.5
  std::uint32_t local_comm_id = 0;
  std::uint64_t service_id = 0;
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;  // 24 bits
  std::uint8_t responder_resources = 0;
  std::uint32_t local_eecn = 0;  // 24 bits
  std::uint8_t initiator_depth = 0;
  std::uint32_t remote_eecn = 0;                // 24 bits
  std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
  std::uint8_t transport_service_type = 0;      // 2 bits: 0 RC, 1 UC, 2 RD, 3 see extended_transport
  bool end_to_end_flow_control = false;
  std::uint32_t starting_psn = 0;              // 24 bits
  std::uint8_t local_cm_response_timeout = 0;  // 5 bits
  std::uint8_t retry_count = 0;                // 3 bits
  std::uint16_t pkey = 0xFFFF;
  std::uint8_t path_mtu = 0;  // 4 bits (IB MTU enum 1..5)
  bool rdc_exists = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  std::uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  std::uint8_t extended_transport = 0;  // 3 bits: 1 XRC (annex A14) when the service type is 3
  CmPath primary, alternate;
  std::array<std::uint8_t, 92> private_data{};
  bool operator==(const CmReq&) const = default;
};
struct CmMra {  // s12.6.6
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint8_t message_mraed = 0;    // 2 bits: 0 REQ, 1 REP, 2 LAP
  std::uint8_t service_timeout = 0;  // 5 bits
  std::array<std::uint8_t, 222> private_data{};
  bool operator==(const CmMra&) const = default;
};
struct CmRej {  // s12.6.7
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint8_t message_rejected = 0;    // 2 bits: 0 REQ, 1 REP, 2 other
  std::uint8_t reject_info_length = 0;  // 7 bits, at most 72
  std::uint16_t reason = 0;             // table 103, see rej_reason_name()
  std::array<std::uint8_t, 72> additional_reject_info{};
  std::array<std::uint8_t, 148> private_data{};
  bool operator==(const CmRej&) const = default;
};
struct CmRep {  // s12.6.8
  std::uint32_t local_comm_id = 0, remote_comm_id = 0, local_qkey = 0, local_qpn = 0 /*24*/, local_eecn = 0 /*24*/,
                starting_psn = 0 /*24*/;
  std::uint8_t responder_resources = 0, initiator_depth = 0, target_ack_delay = 0 /*5*/, failover_accepted = 0 /*2*/;
  bool end_to_end_flow_control = false;
  std::uint8_t rnr_retry_count = 0 /*3*/;
  bool srq = false;
  std::uint64_t local_ca_guid = 0;
  std::array<std::uint8_t, 196> private_data{};
  bool operator==(const CmRep&) const = default;
};
struct CmRtu {  // s12.6.9
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<std::uint8_t, 224> private_data{};
  bool operator==(const CmRtu&) const = default;
};
struct CmDreq {  // s12.6.10
  std::uint32_t local_comm_id = 0, remote_comm_id = 0, remote_qpn_eecn = 0 /*24*/;
  std::array<std::uint8_t, 220> private_data{};
  bool operator==(const CmDreq&) const = default;
};
struct CmDrep {  // s12.6.11
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<std::uint8_t, 224> private_data{};
  bool operator==(const CmDrep&) const = default;
};
struct CmSidrReq {  // s12.11.1
  std::uint32_t request_id = 0;
  std::uint16_t pkey = 0xFFFF;
  std::uint64_t service_id = 0;
  std::array<std::uint8_t, 216> private_data{};
  bool operator==(const CmSidrReq&) const = default;
};
struct CmSidrRep {  // s12.11.2
  std::uint32_t request_id = 0;
  std::uint8_t status = 0, additional_info_length = 0;  // the length at most 72
  std::uint32_t qpn = 0 /*24*/;
  std::uint64_t service_id = 0;
  std::uint32_t qkey = 0;
  std::array<std::uint8_t, 72> class_port_info{};
  std::array<std::uint8_t, 136> private_data{};
  bool operator==(const CmSidrRep&) const = default;
};

using CmMessage = std::variant<CmReq, CmMra, CmRej, CmRep, CmRtu, CmDreq, CmDrep, CmSidrReq, CmSidrRep>;
struct CmMad {
  MadHeader header;
  CmMessage message;
  bool operator==(const CmMad&) const = default;
};

// Checks and decodes a CM MAD (the UD payload of a packet to QP1). Refuses, in this order:
// fewer than 256 bytes (truncated) or more (bad_length: s13.4.2, a MAD is 256 bytes); a base
// version other than 1 (bad_version); a class other than 0x07 (unsupported_class); a class
// version other than 2 (bad_version); an attribute other than the nine messages above
// (unsupported_attribute: ClassPortInfo, LAP and APR are not decoded); and reserved code
// points (invalid_field): REQ transport service type 3 with an extended transport type other
// than XRC (annex A14), MRA "message MRAed" 3 (s12.6.6), REJ "message REJected" 3 or reject
// info length above 72 (s12.6.7), SIDR_REP additional information length above 72 (s12.11.2).
// Values that are valid but that a CM may not support (RD, an MTU, a REJ reason) are parsed:
// the CM answers those with a REJ, which needs the message decoded.
Result<CmMad> parse_cm_mad(std::span<const std::uint8_t> mad);
// Writes the 256-byte MAD: header, then the attribute, zeroes in reserved bits. The attribute
// ID is attribute_of(mad.message); the header's other fields are written as given. Values
// wider than their field are truncated to it.
void emit_cm_mad(const CmMad& mad, std::span<std::uint8_t, kMadLength> out);
// The attribute ID of the message's alternative.
CmAttr attribute_of(const CmMessage& m);
// "REQ", "REP", ..., "ClassPortInfo", "LAP", "APR"; "" for an ID the CM class does not define.
std::string_view name(CmAttr a);
// The name of a REJ reason code (s12.6.7 table 103), e.g. 8 "INVALID_SERVICE_ID"; "" for a
// code the table does not define.
std::string_view rej_reason_name(std::uint16_t reason);

// RDMA IP CM Service, IBTA vol. 1 annex A11: the first 36 bytes of a REQ's private data
// (rdma_cm's "cma header") when the service ID has the IP CM prefix.
inline constexpr std::uint64_t kIpCmServiceIdPrefix =
    0x0000000001000000;  // service id = prefix | port space << 16 | port
struct IpCmHeader {
  std::uint8_t major_version = 0, minor_version = 0;  // 4 bits each
  std::uint8_t ip_version = 4;                        // 4 or 6
  std::uint16_t source_port = 0;
  // As annex A11 lays them out: 16 bytes, an IPv4 address in the last 4 with the first 12
  // zero (ip_cm_address() and ip_cm_ipv4() convert).
  Gid16 source_ip{}, destination_ip{};
  bool operator==(const IpCmHeader&) const = default;
};
inline constexpr std::size_t kIpCmHeaderLength = 36;
// Refuses fewer than 36 bytes (truncated), a major version other than 0 or an IP version
// other than 4 or 6 (bad_version). The minor version is not judged (a newer minor version
// keeps the layout).
Result<IpCmHeader> parse_ip_cm_header(std::span<const std::uint8_t> req_private_data);
// Writes the first 36 bytes of `out` (which must hold at least that many), reserved bits zero.
void emit_ip_cm_header(const IpCmHeader& h, std::span<std::uint8_t> out /* >= 36 */);
// Port space and port out of an IP CM service id; nullopt when the prefix is not A11's.
struct IpCmService {
  std::uint8_t port_space;  // the IP protocol number: 0x06 TCP, 0x11 UDP
  std::uint16_t port;
  bool operator==(const IpCmService&) const = default;
};
std::optional<IpCmService> ip_cm_service(std::uint64_t service_id);
std::uint64_t ip_cm_service_id(std::uint8_t port_space, std::uint16_t port);

// An IPv4 address in an IP CM header's 16-byte field, and back (the last 4 bytes).
constexpr Gid16 ip_cm_address(const std::array<std::uint8_t, 4>& v4) {
  Gid16 a{};
  for (std::size_t i = 0; i < 4; ++i) a[12 + i] = v4[i];
  return a;
}
constexpr std::array<std::uint8_t, 4> ip_cm_ipv4(const Gid16& a) { return {a[12], a[13], a[14], a[15]}; }

}  // namespace wire
