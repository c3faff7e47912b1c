// The verdict on one captured frame as RoCE: what it is, whether its ICRC holds, and
// whether rebuilding it from its parsed fields gives back the same bytes. Shared by
// `softrdma dump` and the capture tests so both judge alike.
#pragma once

#include <optional>

#include "emulator/net/pcap_file.hpp"
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
  int claimed_opcode = -1;                    // when malformed past the UDP/GRH layer: its BTH opcode byte
  std::optional<wire::RoceFrame> frame;       // when roce
  bool icrc_ok = false;
  bool headers_reemit_identical = false;  // everything but the ICRC
  bool reemit_identical = false;          // every byte, the recomputed ICRC included
};

RoceJudgement judge_roce(const net::CapturedPacket& pkt);

}  // namespace softrdma::dump
