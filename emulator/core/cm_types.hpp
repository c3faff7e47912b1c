// The vocabulary of the connection manager (connection_manager.hpp): what a consumer asks of
// it and the events it reports. The protocol is IBTA vol. 1 chapter 12 (CM MADs on QP1); the
// rdma_cm layer above it (addresses, ports, the QP's transitions) is the verbs shim's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "emulator/core/verbs_types.hpp"
#include "wire/cm_mad.hpp"

namespace softrdma::core {

// What a REQ offers (s12.6.5): the active side's QP and the path to the passive side.
struct CmConnect {
  std::uint64_t service_id = 0;
  Gid remote_gid{};
  std::uint32_t qpn = 0;
  QpType qp_type = QpType::rc;  // RC or UC
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;  // RDMA READs and atomics the QP answers at once
  std::uint8_t initiator_depth = 0;      // RDMA READs and atomics the QP has outstanding
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 7;
  Mtu path_mtu = Mtu::mtu1024;
  bool srq = false;
  std::uint8_t local_ack_timeout = 0x11;
  std::uint32_t flow_label = 0;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  std::vector<std::uint8_t> private_data;  // at most 92 bytes
};

// What a REP answers (s12.6.8): the passive side's QP.
struct CmAccept {
  std::uint32_t qpn = 0;
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t rnr_retry_count = 7;
  bool srq = false;
  std::vector<std::uint8_t> private_data;  // at most 196 bytes
};

// A service ID resolution request (SIDR_REQ, s12.11.1): which UD QP serves service_id.
struct CmServiceQuery {
  std::uint64_t service_id = 0;
  Gid remote_gid{};
  std::vector<std::uint8_t> private_data;  // at most 216 bytes
};

// The answer to one (SIDR_REP, s12.11.2).
struct CmServiceAnswer {
  std::uint8_t status = 0;  // 0: the QP is valid (table 109)
  std::uint32_t qpn = 0;
  std::uint32_t qkey = 0;
  std::vector<std::uint8_t> private_data;  // at most 136 bytes
};

// SIDR_REP status values (s12.11.2 table 109).
namespace sidr_status {
inline constexpr std::uint8_t valid = 0;
inline constexpr std::uint8_t service_id_not_supported = 1;
inline constexpr std::uint8_t rejected = 2;
}  // namespace sidr_status

// REJ reasons the engine sends or reacts to (s12.6.7 table 103).
namespace rej_reason {
inline constexpr std::uint16_t no_resources = 3;
inline constexpr std::uint16_t timeout = 4;
inline constexpr std::uint16_t invalid_comm_id = 6;
inline constexpr std::uint16_t invalid_service_id = 8;
inline constexpr std::uint16_t invalid_transport_type = 9;
inline constexpr std::uint16_t stale_connection = 10;
inline constexpr std::uint16_t consumer_reject = 28;
}  // namespace rej_reason

enum class CmEventType : std::uint8_t {
  request,             // a REQ for a listener: `listener` names it, `mad` holds the REQ
  reply,               // a REP answered our REQ: the consumer readies its QP, then calls ready()
  established,         // an RTU arrived for our REP
  rejected,            // a REJ ended the connection (or our REQ found no listener)
  disconnect_request,  // the peer sent DREQ: the consumer answers with disconnect()
  disconnected,        // the DREP for our DREQ arrived, or the DREQ went unanswered
  unreachable,         // a REQ or REP went unanswered through every retry
  service_request,     // a SIDR_REQ for a listener
  service_reply,       // the SIDR_REP for our SIDR_REQ (or its timeout: `mad` empty)
};

struct CmEvent {
  CmEventType type = CmEventType::request;
  std::uint32_t id = 0;        // the connection (our local communication ID)
  std::uint32_t listener = 0;  // request and service_request: the listen() handle
  Gid remote_gid{};
  std::optional<wire::CmMad> mad;  // the MAD that caused it; none for timeouts
};

}  // namespace softrdma::core
