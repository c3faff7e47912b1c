// The state an iWARP QP keeps for its byte stream (RFC 5040 RDMAP over RFC 5041 DDP over
// RFC 5044 MPA): what the host negotiated in the MPA exchange, the decoder of the peer's
// FPDUs, the message sequence numbers of the untagged queues, and the RDMA Read Requests
// being answered. TCP carries reliability and order, so there are no PSNs, ACKs or timers.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "wire/iwarp/mpa_stream.hpp"
#include "wire/iwarp/rdmap.hpp"
#include "wire/iwarp/terminate_codes.hpp"

namespace softrdma::core {

// What the MPA exchange settled (RFC 5044 s7.1, RFC 6581 s5) and the path allows.
struct StreamParams {
  bool crc = false;  // CRC32c in FPDUs: either side asked for it
  // The largest FPDU to send, in bytes: the connection's MSS, so that each FPDU fits one TCP
  // segment (RFC 5044 s5.1 asks senders to align FPDUs with segments).
  std::uint32_t max_fpdu = 1460;
  std::uint16_t ird = 1;  // RDMA Read Requests the peer may have outstanding at us
  std::uint16_t ord = 1;  // RDMA Read Requests we may have outstanding at the peer
};

// An RDMA Read Request accepted and not yet fully answered (RFC 5040 s5.3): its Read
// Response goes to the requester's sink buffer, from `host` in our memory.
struct InboundRead {
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_offset = 0;
  std::uint64_t host = 0;
  std::uint32_t length = 0;
  std::uint32_t sent = 0;  // bytes answered so far
};

struct IwarpStream {
  explicit IwarpStream(const StreamParams& p) : params(p) { decoder.start_full_operation(false, p.crc); }

  StreamParams params;
  wire::iwarp::MpaStreamDecoder decoder;
  // The next MSN to send on untagged queues 0 (Send) and 1 (Read Request); every queue's
  // first message carries MSN 1 (RFC 5041 s5.1).
  std::uint32_t send_msn = 1;
  std::uint32_t read_request_msn = 1;
  // The MSN the peer's next message on each queue must carry.
  std::uint32_t expected_send_msn = 1;
  std::uint32_t expected_read_request_msn = 1;
  std::uint64_t wqe_sent = 0;  // bytes of the send WQE being segmented already sent
  std::deque<InboundRead> reads;
  std::uint64_t read_response_received = 0;  // bytes of the oldest outstanding READ placed
  // A Terminate to send as the stream's last message (RFC 5040 s7.1), then the stream closes.
  std::optional<wire::iwarp::RdmapTerminate> terminate;
  bool closing = false;  // nothing more is sent; the host closes the connection
};

}  // namespace softrdma::core
