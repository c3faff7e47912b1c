// `softrdma stats` without --json: one process's report (emulator/host/stats_report.hpp) as
// text. The report is walked as it comes, so a counter added to it shows up here unchanged:
//
//   PID 4242  ibv_rc_pingpong  srdma0  127.0.0.1
//     counters   sent_pkts=250 sent_bytes=209000 ... (every device counter, wrapped)
//     udp        tx_packets=250 ...
//     capture    frames_written=0 frames_dropped=0
//     faults tx  passed=0 lost=0 ...
//     faults rx  ...
//     QPN       TYPE  STATE  DEST_QPN  sent_pkts  sent_bytes  rcvd_pkts  rcvd_bytes
//     0x000011  RC    RTS    0x000011        250      209000        250      209000
//
// QP rows show the packet and byte counters always, the other QP counters only when one of
// the QPs has a non-zero value (all thirteen do not fit a terminal; --json has them all).
#pragma once

#include <string>

#include "tools/softrdma/json_reader.hpp"

namespace softrdma::stats {

std::string render_table(const JsonValue& report);

}  // namespace softrdma::stats
