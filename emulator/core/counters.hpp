// Counters per QP and per device. Names follow rdma-core / `rdma statistic` where one exists
// (rxe's hw counters: sent_pkts, rcvd_pkts, duplicate_request, out_of_seq_request,
// rcvd_seq_err, retry_exceeded_err, rcvd_rnr_err, send_rnr_err, ack_deferred, ...).
#pragma once

#include <cstdint>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

struct QpCounters {
  std::uint64_t sent_pkts = 0;
  std::uint64_t sent_bytes = 0;
  std::uint64_t rcvd_pkts = 0;
  std::uint64_t rcvd_bytes = 0;
  std::uint64_t retransmitted_pkts = 0;
  std::uint64_t local_ack_timeout_err = 0;  // retransmission timer expiries
  std::uint64_t rcvd_seq_err = 0;           // PSN sequence error NAKs received
  std::uint64_t out_of_seq_request = 0;     // requests dropped for a PSN gap (NAK sent or not)
  std::uint64_t duplicate_request = 0;
  std::uint64_t rcvd_rnr_err = 0;  // RNR NAKs received
  std::uint64_t send_rnr_err = 0;  // RNR NAKs sent
  std::uint64_t retry_exceeded_err = 0;
  std::uint64_t rnr_retry_exceeded_err = 0;

  QpCounters& operator+=(const QpCounters& o) {
    sent_pkts += o.sent_pkts;
    sent_bytes += o.sent_bytes;
    rcvd_pkts += o.rcvd_pkts;
    rcvd_bytes += o.rcvd_bytes;
    retransmitted_pkts += o.retransmitted_pkts;
    local_ack_timeout_err += o.local_ack_timeout_err;
    rcvd_seq_err += o.rcvd_seq_err;
    out_of_seq_request += o.out_of_seq_request;
    duplicate_request += o.duplicate_request;
    rcvd_rnr_err += o.rcvd_rnr_err;
    send_rnr_err += o.send_rnr_err;
    retry_exceeded_err += o.retry_exceeded_err;
    rnr_retry_exceeded_err += o.rnr_retry_exceeded_err;
    return *this;
  }
};

// The iWARP device's connections (iwarp_cm.cpp) and stream errors (iwarp_receiver.cpp,
// iwarp_terminate.cpp); its FPDUs are counted as packets in QpCounters.
struct IwarpCounters {
  std::uint64_t connections_initiated = 0;  // MPA exchanges completed as the initiator
  std::uint64_t connections_accepted = 0;   // and as the responder
  std::uint64_t connects_refused = 0;       // our connects the peer refused: an MPA reject, or TCP refused
  std::uint64_t connects_unreachable = 0;   // our connects TCP could not make in time
  std::uint64_t connect_errors = 0;         // MPA exchanges that failed: wrong frames, key or revision
  std::uint64_t rejects_sent = 0;           // requests we refused (MPA Reply with R set)
  std::uint64_t disconnects = 0;            // established connections that ended, either side first
  std::uint64_t terminates_sent = 0;        // streams we ended for an error (RFC 5040 s7)
  std::uint64_t terminates_received = 0;    // streams the peer ended so
  std::uint64_t crc_err = 0;                // FPDUs whose MPA CRC was wrong (RFC 5044 s4.4)
  std::uint64_t tcp_bytes_sent = 0;         // given to the host's sockets: MPA frames and FPDUs
  std::uint64_t tcp_bytes_received = 0;
};

// QP1's: the communication manager's MADs (connection_manager.hpp).
struct CmCounters {
  std::uint64_t mads_sent = 0;
  std::uint64_t mads_received = 0;
  std::uint64_t mads_resent = 0;  // retries after a timeout, and answers to duplicates
  std::uint64_t malformed = 0;    // refused by the MAD codec
  std::uint64_t unmatched = 0;    // for no connection, or one whose state takes none
  std::uint64_t rejects_sent = 0;
};

struct DeviceCounters {
  QpCounters qps;                         // the sum over QPs, destroyed ones included
  CmCounters cm;                          // QP1
  std::uint64_t icrc_err = 0;             // packets dropped for a bad ICRC
  std::uint64_t icrc_ipv4_id_solved = 0;  // accepted with a non-zero IPv4 ID solved for (rxe)
  std::uint64_t malformed = 0;            // packets dropped by wire::IbPacket::check
  std::uint64_t unknown_qp = 0;           // packets for a QPN that does not exist
  std::uint64_t dropped = 0;              // other drops: wrong state, wrong Q_Key, no receive WQE on UD/UC
  std::uint64_t mcast_rcvd = 0;           // multicast packets handed to the QPs attached to their group
  std::uint64_t mcast_dropped = 0;        // multicast packets for a group no QP is attached to, or not UD
};

// One live QP as `softrdma stats` lists it (rdma-core's `rdma statistic qp` shows the same
// counters per QP, named by its LQPN).
struct QpStats {
  std::uint32_t qpn = 0;
  QpType type = QpType::rc;
  QpState state = QpState::reset;
  std::uint32_t dest_qpn = 0;  // RC/UC: the connected QP (0 before RTR); UD: 0
  QpCounters counters;
};

}  // namespace softrdma::core
