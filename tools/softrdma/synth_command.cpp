#include "tools/softrdma/synth_command.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "emulator/net/pcap_file.hpp"

namespace softrdma::synth {
namespace {

using namespace wire;

constexpr const char* kUsage = "usage: softrdma synth FILE\n"
                               "\n"
                               "Writes FILE (pcap): one RoCEv2 packet for every opcode IBTA defines (RC, UC, RD, UD,\n"
                               "CNP, XRC), over IPv4 and again over IPv6, built with softrdma's own packet builders,\n"
                               "with every header field set to a distinct value and the ICRC, IP and UDP checksums\n"
                               "computed. Decode it with 'softrdma dump FILE' or tshark.\n";

// A payload pattern that does not look like any header a dissector might guess at.
const std::array<std::uint8_t, 256>& payload_bytes() {
  static const auto bytes = [] {
    std::array<std::uint8_t, 256> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(0x5A ^ (i * 37));
    return b;
  }();
  return bytes;
}

IbRepr ib_fields(Opcode op, std::uint32_t n) {
  const OpcodeInfo& oi = info(op);
  IbRepr ib;
  ib.opcode = op;
  ib.solicited_event = oi.is(OpFlag::last) && n % 2 == 0;
  ib.mig_req = true;  // APM migrated state; real requesters set it (IBTA vol. 1 s9.2.3)
  ib.pkey = 0xFFFF;
  ib.dest_qp = 0x000100 + n;
  ib.ack_req = oi.is(OpFlag::request) && oi.is(OpFlag::last);
  ib.psn = (0xFFFFF0 + n * 3) & 0xFFFFFF;  // runs through the 24-bit wrap
  ib.ee_context = 0x000200 + n;
  ib.qkey = 0x11110000u + n;
  ib.src_qp = 0x000300 + n;
  ib.xrc_srq = 0x000400 + n;
  ib.va = 0x00007F0000001000ull + n * 0x100;
  ib.rkey = 0x00AB0000u + n;
  ib.dma_length = 4096 + n;
  ib.swap_add = 0x0102030405060708ull + n;
  ib.compare = 0x1112131415161718ull + n;
  // Cycle the AETH through ACK with credits, RNR NAK and each NAK code.
  constexpr std::array<std::uint8_t, 6> syndromes = {
      make_syndrome(AckKind::ack, 0x1F), make_syndrome(AckKind::rnr_nak, 0x0E), make_syndrome(AckKind::nak, 0),
      make_syndrome(AckKind::nak, 1),    make_syndrome(AckKind::nak, 2),        make_syndrome(AckKind::nak, 3)};
  ib.syndrome = syndromes[n % syndromes.size()];
  ib.msn = 0x000500 + n;
  ib.original_data = 0x2122232425262728ull + n;
  ib.imm = 0xC0DE0000u + n;
  ib.invalidate_rkey = 0x00CD0000u + n;
  // FIRST and MIDDLE packets carry exactly one path MTU (IBTA vol. 1 s9.7.2.1: here 256);
  // LAST and ONLY packets any length, so pad counts 0 to 3 all appear.
  if (oi.is(OpFlag::payload))
    ib.payload =
        std::span<const std::uint8_t>(payload_bytes()).first(oi.is(OpFlag::last) ? 1 + (n % 7) + (n % 3) * 64 : 256);
  return ib;
}

}  // namespace

std::vector<SynthFrame> every_opcode_frames() {
  std::vector<SynthFrame> frames;
  std::uint32_t n = 0;
  for (int ip_version : {4, 6}) {
    for (int byte = 0; byte < 256; ++byte) {
      const Opcode op = opcode(static_cast<std::uint8_t>(byte));
      if (!info(op).valid) continue;
      SynthFrame f;
      f.repr.ethernet = {{0x02, 0, 0, 0, 0, 0x02}, {0x02, 0, 0, 0, 0, 0x01}, -1};
      if (ip_version == 4) {
        Ipv4Repr ip;
        ip.src = {127, 0, 0, 1};
        ip.dst = {127, 0, 0, 2};
        ip.tos = static_cast<std::uint8_t>(n % 2 ? 0x02 : 0x68);  // ECT(0), and DSCP 26 + ECT(0)
        ip.identification = 0;  // what an unconnected socket with IP_PMTUDISC_DO sends
        f.repr.network = ip;
      } else {
        Ipv6Repr ip;
        ip.src = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // 2001:db8::1 (RFC 3849)
        ip.dst = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        ip.flow_label = 0x12345 + n;
        f.repr.network = ip;
      }
      f.repr.src_port = static_cast<std::uint16_t>(0xC000 + n);
      f.repr.ib = ib_fields(op, n);
      f.bytes.resize(f.repr.buffer_len());
      f.repr.emit(f.bytes.data());
      frames.push_back(std::move(f));
      ++n;
    }
  }
  return frames;
}

int synth_main(int argc, char** argv) {
  if (argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string error;
  auto writer = net::PcapWriter::create(argv[1], net::kLinkEthernet, error);
  if (!writer) {
    std::fprintf(stderr, "softrdma synth: cannot write %s: %s\n", argv[1], error.c_str());
    return 2;
  }
  const auto frames = every_opcode_frames();
  std::uint64_t t = 1'700'000'000'000'000'000ull;  // a fixed time: the file is reproducible
  for (const auto& f : frames) writer->write(t += 1000, f.bytes);
  writer->flush();
  std::printf("softrdma synth: wrote %zu packets (every defined opcode over IPv4 and IPv6) to %s\n", frames.size(),
              argv[1]);
  return 0;
}

}  // namespace softrdma::synth
