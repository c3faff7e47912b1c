// RDMAP messages for tests that build iWARP streams: an untagged one on its opcode's queue, and
// a tagged one at an STag and tagged offset.
#pragma once

#include <cstdint>
#include <span>

#include "wire/iwarp/rdmap.hpp"

namespace test {

inline wire::iwarp::RdmapMessage untagged(wire::iwarp::RdmapOpcode op, std::uint32_t msn,
                                          std::span<const std::uint8_t> payload) {
  wire::iwarp::RdmapMessage m;
  m.opcode = op;
  m.ddp.queue_number = wire::iwarp::info(op).queue;
  m.ddp.message_sequence_number = msn;
  m.payload = payload;
  return m;
}

inline wire::iwarp::RdmapMessage tagged(wire::iwarp::RdmapOpcode op, std::uint32_t stag, std::uint64_t offset,
                                        std::span<const std::uint8_t> payload, bool last = true) {
  wire::iwarp::RdmapMessage m;
  m.opcode = op;
  m.ddp.tagged = true;
  m.ddp.last = last;
  m.ddp.stag = stag;
  m.ddp.tagged_offset = offset;
  m.payload = payload;
  return m;
}

}  // namespace test
