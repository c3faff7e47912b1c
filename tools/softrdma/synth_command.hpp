// `softrdma synth FILE`: a capture of every defined RoCE opcode, built by wire/'s builders,
// over IPv4 and IPv6. It shows what softrdma puts on the wire, and it is what the tshark
// tests check our builders with.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/roce_frame.hpp"

namespace softrdma::synth {

struct SynthFrame {
  wire::RoceFrameRepr repr;  // payload points into static storage
  std::vector<std::uint8_t> bytes;
};

// One frame per defined opcode per IP version, each with distinct field values.
std::vector<SynthFrame> every_opcode_frames();

int synth_main(int argc, char** argv);  // argv[0] is "synth"

}  // namespace softrdma::synth
