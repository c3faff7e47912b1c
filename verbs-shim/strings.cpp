// The ibv_*_str helpers. The texts are rdma-core's, because programs print them and people
// and scripts match on them (ibv_devinfo's "PORT_ACTIVE"); the code is a lookup table.
#include <array>
#include <cstddef>

#include "verbs-shim/verbs_api.hpp"

namespace {

template <std::size_t N>
const char* lookup(const std::array<const char*, N>& table, long index) {
  return index >= 0 && static_cast<std::size_t>(index) < N ? table[static_cast<std::size_t>(index)] : "unknown";
}

constexpr std::array<const char*, 7> kNodeTypes = {"InfiniBand channel adapter",
                                                   "InfiniBand switch",
                                                   "InfiniBand router",
                                                   "iWARP NIC",
                                                   "usNIC",
                                                   "usNIC UDP",
                                                   "unspecified"};  // from IBV_NODE_CA (1)

constexpr std::array<const char*, 6> kPortStates = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                                    "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};

constexpr std::array<const char*, 20> kEventTypes = {"CQ error",
                                                     "local work queue catastrophic error",
                                                     "invalid request local work queue error",
                                                     "local access violation work queue error",
                                                     "communication established",
                                                     "send queue drained",
                                                     "path migrated",
                                                     "path migration request error",
                                                     "local catastrophic error",
                                                     "port active",
                                                     "port error",
                                                     "LID change",
                                                     "P_Key change",
                                                     "SM change",
                                                     "SRQ catastrophic error",
                                                     "SRQ limit reached",
                                                     "last WQE reached",
                                                     "client reregistration",
                                                     "GID table change",
                                                     "WQ fatal"};

constexpr std::array<const char*, 24> kWcStatuses = {"success",
                                                     "local length error",
                                                     "local QP operation error",
                                                     "local EE context operation error",
                                                     "local protection error",
                                                     "Work Request Flushed Error",
                                                     "memory management operation error",
                                                     "bad response error",
                                                     "local access error",
                                                     "remote invalid request error",
                                                     "remote access error",
                                                     "remote operation error",
                                                     "transport retry counter exceeded",
                                                     "RNR retry counter exceeded",
                                                     "local RDD violation error",
                                                     "remote invalid RD request",
                                                     "aborted error",
                                                     "invalid EE context number",
                                                     "invalid EE context state",
                                                     "fatal error",
                                                     "response timeout error",
                                                     "general error",
                                                     "TM error",
                                                     "TM rendezvous error"};

}  // namespace

SRDMA_EXPORT const char* ibv_node_type_str(ibv_node_type node_type) {
  return lookup(kNodeTypes, static_cast<long>(node_type) - IBV_NODE_CA);
}

SRDMA_EXPORT const char* ibv_port_state_str(ibv_port_state port_state) {
  return lookup(kPortStates, static_cast<long>(port_state));
}

SRDMA_EXPORT const char* ibv_event_type_str(ibv_event_type event) {
  return lookup(kEventTypes, static_cast<long>(event));
}

SRDMA_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
  return lookup(kWcStatuses, static_cast<long>(status));
}
