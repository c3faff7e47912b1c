// The verdict on one captured frame as RoCE: what it is, whether its ICRC holds, and
// whether rebuilding it from its parsed fields gives back the same bytes. Shared by
// `softrdma dump` and the capture tests so both judge alike.
#pragma once

#include <optional>

#include "emulator/net/pcap_file.hpp"
#include "wire/ib_packet.hpp"
#include "wire/roce_frame.hpp"

namespace softrdma::dump {

enum class FrameKind {
  roce,       // a RoCEv1/v2 packet that passed every check
  other,      // not RoCE (ARP, TCP, other UDP): listed, not judged
  malformed,  // claims to be RoCE (or IP) but fails a check: `error` says which
  truncated,  // the capture's snaplen cut it: no verdict
};

struct RoceJudgement {
  FrameKind kind = FrameKind::other;
  wire::Error error = wire::Error::not_roce;  // when not roce
  int claimed_opcode = -1;               // when malformed past the UDP/GRH layer (or in its MAD): its BTH opcode byte
  std::optional<wire::RoceFrame> frame;  // when roce
  bool icrc_ok = false;
  bool headers_reemit_identical = false;  // everything but the ICRC
  bool reemit_identical = false;          // every byte, the recomputed ICRC included
};

// A RoCE packet that passes every check is still malformed when it is a GMP that judge_gmp()
// refuses.
RoceJudgement judge_roce(const net::CapturedPacket& pkt);

// A GMP: a UD packet to or from QP1, the General Services Interface (IBTA vol. 1 ch. 13.5),
// whose payload is a MAD.
bool is_gmp(const wire::IbPacket& p);

// Why the GSI of the receiver would drop a GMP, or nullopt when it would not (or when `p` is
// not a GMP). A packet to QP1 must carry QP1's Q_Key 0x80010000 (bad_qkey) and come from QP1
// (bad_source_qp); the payload is one 256-byte MAD (truncated, bad_length) of base version 1
// (bad_version, s13.4.2). A CM MAD (class 0x07) must pass wire::parse_cm_mad() and, for a
// REQ to an IP CM service ID, wire::parse_ip_cm_header(), and is refused with their error;
// ClassPortInfo, LAP and APR, CM attributes the codec does not decode, are not refused. MADs
// of other classes are judged on their common header only.
std::optional<wire::Error> judge_gmp(const wire::IbPacket& p);

}  // namespace softrdma::dump
