// One process's softrdma counters as a JSON object: what SOFTRDMA_STATS_FILE holds at exit and
// what the process's stats endpoint answers to `softrdma stats` (the one serializer of both).
//
// The object, on one line:
//   {"format":1, "pid":N, "program":"...", "device":"srdma0", "address":"127.0.0.1",
//    "counters":{every core::DeviceCounters field, the QP sum flattened: sent_pkts, ...,
//                icrc_err, icrc_ipv4_id_solved, malformed, unknown_qp, dropped, mcast_rcvd,
//                mcast_dropped},
//    "udp":{every net::UdpCounters field}, "capture":{frames_written, frames_dropped},
//    "faults":{"tx":{every net::FaultCounters field}, "rx":{...}},
//    "port":{the backend's port_counters()}  (only when it has some: the dpdk backend),
//    "dma":{read_calls, write_calls, lost_write_bytes}  (only softrdmad: ProcessMemory's counters),
//    "qps":[{"qpn":N, "type":"RC", "state":"RTS", "dest_qpn":N, every core::QpCounters field}],
//    "iwarp_device":{"device":"srdmaiw0", "address":"...", "counters":{the QP sum's fields},
//                    "iwarp":{every core::IwarpCounters field}, "faults":{"tx":{...}},
//                    "qps":[as above]}
//                    (only when the process runs the iWARP device too)}
// "counters" counts every QP the process ever had (destroyed ones too); "qps" lists the QPs
// alive at that moment. Numbers are unsigned decimal integers; a new field may be added, an
// existing one keeps its name and meaning ("format" changes if one ever must not).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "emulator/core/counters.hpp"
#include "emulator/host/embedded_host.hpp"
#include "emulator/host/iwarp_host.hpp"

namespace softrdma::host {

struct IwarpDeviceReport {
  std::string device;         // "srdmaiw0"
  std::string address;        // the address its connections start and listen at
  core::QpCounters counters;  // summed over every QP it had; its FPDUs are the packets
  core::IwarpCounters iwarp;
  net::FaultCounters faults;       // on the FPDUs it sent (iwarp_faults.hpp)
  std::vector<core::QpStats> qps;  // the live QPs, in QPN order
};

struct StatsReport {
  long pid = 0;
  std::string program;  // the program's short name (argv[0]'s last part)
  std::string device;   // "srdma0"
  std::string address;  // the address the device's socket holds
  HostStats host;
  std::vector<net::NamedCount> dma;  // how the daemon reached its clients' memory; none in embedded mode
  std::vector<core::QpStats> qps;    // the live QPs, in QPN order
  std::optional<IwarpDeviceReport> iwarp;
};

std::string to_json(const StatsReport& report);

// What `host` counts now, reported by this process as `program`, for its device `device`.
StatsReport report_of(EmbeddedHost& host, std::string program, std::string device);

// What the iWARP device `host` counts now, as `device`.
IwarpDeviceReport iwarp_report_of(IwarpHost& host, std::string device);

// "RC", "UC", "UD"; "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" (ibv_qp_state's names).
const char* type_name(core::QpType type);
const char* state_name(core::QpState state);

}  // namespace softrdma::host
