#include "wire/opcode.hpp"

#include <catch2/catch.hpp>

using namespace wire;

TEST_CASE("opcode table: counts of defined opcodes per transport (IBTA vol. 1 table 35)", "[wire][opcode]") {
  int per_transport[8] = {};
  for (int i = 0; i < 256; ++i)
    if (kOpcodeTable[static_cast<std::size_t>(i)].valid) ++per_transport[i >> 5];
  CHECK(per_transport[0] == 24);  // RC: 0x00-0x14, 0x16, 0x17, and release 1.5's ATOMIC WRITE 0x1D
  CHECK(per_transport[1] == 12);  // UC: SEND and WRITE
  CHECK(per_transport[2] == 22);  // RD: 0x00-0x15
  CHECK(per_transport[3] == 2);   // UD: SEND ONLY (+IMM)
  CHECK(per_transport[4] == 1);   // CNP 0x81
  CHECK(per_transport[5] == 23);  // XRC: as RC before release 1.5
  CHECK(per_transport[6] == 0);
  CHECK(per_transport[7] == 0);
}

TEST_CASE("opcode table: names are derived, not typed", "[wire][opcode]") {
  CHECK(opcode_name(opcode(0x00)) == "RC_SEND_FIRST");
  CHECK(opcode_name(opcode(0x0B)) == "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE");
  CHECK(opcode_name(opcode(0x17)) == "RC_SEND_ONLY_WITH_INVALIDATE");
  CHECK(opcode_name(opcode(0x64)) == "UD_SEND_ONLY");
  CHECK(opcode_name(opcode(0x81)) == "CNP");
  CHECK(opcode_name(opcode(0xB3)) == "XRC_COMPARE_SWAP");
  CHECK(opcode_name(opcode(0x18)) == "RESERVED_0x18");
  CHECK(opcode_name(opcode(0x1D)) == "RC_ATOMIC_WRITE");
  CHECK(opcode_name(opcode(0x3D)) == "RESERVED_0x3D");
  CHECK(opcode_name(opcode(0xFF)) == "RESERVED_0xFF");
  CHECK(opcode(Transport::cnp, Operation::cnp) == opcode(0x81));
  CHECK(opcode(Transport::ud, Operation::send_only_imm) == opcode(0x65));
}

TEST_CASE("opcode table: header lengths and offsets", "[wire][opcode]") {
  struct Row {
    std::uint8_t op;
    std::size_t header_length;
  };
  // Lengths from IBTA vol. 1 s9.2 header layouts: BTH 12, RDETH 4, DETH 8, XRCETH 4,
  // RETH 16, AtomicETH 28, AETH 4, AtomicAckETH 8, ImmDt 4, IETH 4; CNP adds 16 reserved.
  const Row rows[] = {
      {0x04, 12}, {0x05, 16}, {0x06, 28}, {0x0B, 32}, {0x0C, 28}, {0x0D, 16}, {0x0E, 12}, {0x11, 16},
      {0x12, 24}, {0x13, 40}, {0x14, 40}, {0x17, 16}, {0x64, 20}, {0x65, 24}, {0x81, 28}, {0x40, 24},
      {0x4C, 40}, {0x51, 20}, {0x55, 24}, {0xA4, 16}, {0xAB, 36}, {0xB1, 16}, {0xB3, 44}, {0x2A, 28},
  };
  for (const Row& r : rows) {
    INFO(opcode_name(opcode(r.op)));
    CHECK(info(opcode(r.op)).header_length == r.header_length);
  }
  const OpcodeInfo& w = info(opcode(0xAB));  // XRC RDMA WRITE ONLY WITH IMMEDIATE
  CHECK(w.offset[static_cast<std::size_t>(Ext::xrceth)] == 12);
  CHECK(w.offset[static_cast<std::size_t>(Ext::reth)] == 16);
  CHECK(w.offset[static_cast<std::size_t>(Ext::immdt)] == 32);
  const OpcodeInfo& rd = info(opcode(0x4B));  // RD RDMA WRITE ONLY WITH IMMEDIATE
  CHECK(rd.offset[static_cast<std::size_t>(Ext::rdeth)] == 12);
  CHECK(rd.offset[static_cast<std::size_t>(Ext::deth)] == 16);
  CHECK(rd.offset[static_cast<std::size_t>(Ext::reth)] == 24);
  CHECK(rd.offset[static_cast<std::size_t>(Ext::immdt)] == 40);
}

TEST_CASE("opcode table: flags", "[wire][opcode]") {
  CHECK(info(opcode(0x04)).is(OpFlag::consumes_recv));
  CHECK(info(opcode(0x09)).is(OpFlag::consumes_recv));  // WRITE LAST with immediate
  CHECK_FALSE(info(opcode(0x08)).is(OpFlag::consumes_recv));
  CHECK(info(opcode(0x0D)).is(OpFlag::response));
  CHECK_FALSE(info(opcode(0x0D)).is(OpFlag::last));
  CHECK(info(opcode(0x10)).is(OpFlag::first));
  CHECK(info(opcode(0x10)).is(OpFlag::last));
  CHECK_FALSE(info(opcode(0x11)).is(OpFlag::payload));
  CHECK(info(opcode(0x81)).is(OpFlag::cnp));
  // XRC responses carry no XRCETH; RD responses carry RDETH only.
  CHECK_FALSE(info(opcode(0xB1)).has(Ext::xrceth));
  CHECK(info(opcode(0x51)).has(Ext::rdeth));
  CHECK_FALSE(info(opcode(0x51)).has(Ext::deth));
}
