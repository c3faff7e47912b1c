#include "wire/opcode.hpp"

#include <cstdio>

namespace wire {

std::string opcode_name(Opcode op) {
  const OpcodeInfo& i = info(op);
  if (!i.valid) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "RESERVED_0x%02X", value(op));
    return buf;
  }
  if (i.transport == Transport::cnp) return std::string(i.operation);
  std::string s(transport_name(i.transport));
  s += '_';
  s += i.operation;
  return s;
}

}  // namespace wire
