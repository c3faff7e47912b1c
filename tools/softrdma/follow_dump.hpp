// `softrdma dump --follow QPN [--peer QPN]`: the dump of one QP's conversation, each line
// with the flags follow.hpp gives it, and a summary per direction.
#pragma once

#include <cstdint>
#include <optional>

#include "emulator/net/pcap_file.hpp"
#include "tools/softrdma/follow.hpp"
#include "tools/softrdma/record.hpp"

namespace softrdma::dump {

struct FollowOptions {
  std::uint32_t qpn = 0;
  std::optional<std::uint32_t> peer;
  bool json = false;
  bool check = false;
  const char* file = nullptr;
};

// Reads `reader` (opened on o.file) to find the conversation, then the file again to print
// it. Returns dump's exit status.
int follow_dump(const FollowOptions& o, net::PcapReader& reader);

// The flags of one packet as fields: counts only when non-zero, flags as dump's flags are.
void describe_flags(const PacketFlags& f, Record& r);
void describe_summary(Direction d, const DirectionSummary& s, Record& r);

}  // namespace softrdma::dump
