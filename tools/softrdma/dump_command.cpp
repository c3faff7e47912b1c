#include "tools/softrdma/dump_command.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "emulator/net/pcap_file.hpp"
#include "tools/dump/iwarp_capture.hpp"
#include "tools/softrdma/follow_dump.hpp"
#include "tools/softrdma/frame_judge.hpp"
#include "tools/softrdma/iwarp_describe.hpp"
#include "tools/softrdma/record.hpp"
#include "tools/softrdma/roce_describe.hpp"

namespace softrdma::dump {
namespace {

constexpr const char* kUsage =
    "usage: softrdma dump [--check] [--json] [--follow QPN [--peer QPN]] FILE\n"
    "\n"
    "Decodes a pcap or pcapng capture: one line per packet with addresses, the BTH opcode,\n"
    "destination QP, PSN, AckReq and every extension header (RETH, AETH, AtomicETH,\n"
    "AtomicAckETH, DETH, ImmDt, IETH, XRCETH, RDETH), the ICRC verdict, and a summary.\n"
    "Frames that are not RoCE (ARP, other TCP/UDP) are listed, not judged.\n"
    "\n"
    "  --check   exit 1 if any packet is malformed or fails its ICRC (snaplen-truncated\n"
    "            packets get no verdict)\n"
    "  --json    one JSON object per line, the summary last\n"
    "  --follow QPN\n"
    "            only the conversation of one RC, UC or UD QP (decimal or 0x hex): the packets\n"
    "            addressed to it (dir=in) and those its address sends to its peer QP (dir=out),\n"
    "            the peer found from the traffic (UD: the DETH source QP). Each line gets flags\n"
    "            per direction (IBTA vol. 1 ch. 9): gap=N (N request PSNs skipped),\n"
    "            retransmission (a PSN seen before), late (behind the furthest PSN, first\n"
    "            seen), duplicate (the same bytes twice in a row), nak=KIND (with rnr_delay_us\n"
    "            for RNR), read_gap=N (READ response PSNs missing), bad_icrc (dropped by the\n"
    "            receiver, so not counted in the PSN analysis); ACK coalescing is normal.\n"
    "            The first line names both QPs; a summary per direction ends the output.\n"
    "  --peer QPN\n"
    "            with --follow: the peer QP, when the followed QP talks to several\n"
    "  --help    this text\n"
    "\n"
    "Exit status: 0 success, 1 --check found a bad packet, 2 usage or file error.\n";

struct Options {
  bool check = false;
  bool json = false;
  const char* file = nullptr;
  std::optional<std::uint32_t> follow, peer;
};

// A QPN in decimal or 0x hex, 24 bits (IBTA vol. 1 s9.2: the BTH's DestQP field).
std::optional<std::uint32_t> parse_qpn(const char* s) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > 0xFFFFFF) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

struct Summary {
  std::uint64_t packets = 0, roce = 0, icrc_ok = 0, icrc_bad = 0, other = 0, truncated = 0, malformed = 0;
  std::uint64_t iwarp = 0, mpa_crc_ok = 0, mpa_crc_bad = 0;
  std::map<std::string, std::uint64_t> malformed_by_error;

  void count_malformed(std::string_view error) {
    ++malformed;
    ++malformed_by_error[std::string(error)];
  }
};

void print(const Options& o, Record& r) { std::puts((o.json ? r.to_json() : r.to_text()).c_str()); }

// Each step of reading the command line gives the exit status when the run ends there (--help,
// or a usage error), none when the dump goes on.
using Exit = std::optional<int>;

Exit parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--check")) {
      o.check = true;
    } else if (!std::strcmp(a, "--json")) {
      o.json = true;
    } else if (!std::strcmp(a, "--follow") || !std::strcmp(a, "--peer")) {
      const std::optional<std::uint32_t> qpn = i + 1 < argc ? parse_qpn(argv[i + 1]) : std::nullopt;
      if (!qpn) {
        std::fprintf(stderr, "softrdma dump: %s needs a QPN (decimal or 0x hex, below 0x1000000), got '%s'\n", a,
                     i + 1 < argc ? argv[i + 1] : "");
        return 2;
      }
      (a[2] == 'f' ? o.follow : o.peer) = qpn;
      ++i;
    } else if (!std::strcmp(a, "--help") || !std::strcmp(a, "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a[0] == '-' && a[1] != '\0') {
      std::fprintf(stderr, "softrdma dump: unknown option '%s'\n%s", a, kUsage);
      return 2;
    } else if (o.file) {
      std::fprintf(stderr, "softrdma dump: one FILE only (got '%s' and '%s')\n", o.file, a);
      return 2;
    } else {
      o.file = a;
    }
  }
  if (!o.file) {
    std::fprintf(stderr, "softrdma dump: no FILE given\n%s", kUsage);
    return 2;
  }
  if (o.peer && !o.follow) {
    std::fprintf(stderr, "softrdma dump: --peer needs --follow\n");
    return 2;
  }
  return std::nullopt;
}

// The capture, if it can be read and holds Ethernet frames; else a line on stderr.
std::optional<net::PcapReader> open_capture(const Options& o) {
  std::string error;
  auto reader = net::PcapReader::open(o.file, error);
  if (!reader) {
    std::fprintf(stderr, "softrdma dump: cannot read %s: %s\n", o.file, error.c_str());
    return std::nullopt;
  }
  if (reader->link_type() != net::kLinkEthernet) {
    std::fprintf(stderr, "softrdma dump: %s: link type %d is not Ethernet; only Ethernet captures are decoded\n",
                 o.file, reader->link_type());
    return std::nullopt;
  }
  return reader;
}

// The iWARP frames a TCP segment completes, one line each; whether there was any. They are
// numbered by the segment that holds their last byte, as tshark numbers them.
bool print_iwarp_frames(const Options& o, IwarpCaptureDecoder& iwarp, const net::CapturedPacket& pkt,
                        const Record& start, Summary& s) {
  bool printed = false;
  iwarp.add_frame(s.packets, pkt, [&](const IwarpCaptureFrame& f) {
    Record r = start;
    describe_iwarp(f, r);
    ++s.iwarp;
    if (f.item.kind == wire::iwarp::MpaItemKind::error) {
      s.count_malformed(wire::name(f.item.error));
    } else if (f.item.kind == wire::iwarp::MpaItemKind::fpdu && f.item.fpdu.crc_checked) {
      ++(f.item.fpdu.crc_ok ? s.mpa_crc_ok : s.mpa_crc_bad);
    }
    print(o, r);
    printed = true;
  });
  return printed;
}

// The frame's line as RoCE judges it, unless it is neither RoCE nor anything else wrong and its
// iWARP frames were its line already.
void print_roce_frame(const Options& o, const net::CapturedPacket& pkt, Record r, bool iwarp_printed, Summary& s) {
  const RoceJudgement j = judge_roce(pkt);
  switch (j.kind) {
    case FrameKind::roce:
      ++s.roce;
      ++(j.icrc_ok ? s.icrc_ok : s.icrc_bad);
      describe_roce(*j.frame, r);
      break;
    case FrameKind::other:
      if (iwarp_printed) return;
      ++s.other;
      r.text("kind", "other");
      break;
    case FrameKind::truncated:
      ++s.truncated;
      r.text("kind", "truncated").number("caplen", pkt.data.size()).number("wirelen", pkt.original_length);
      break;
    case FrameKind::malformed:
      s.count_malformed(wire::name(j.error));
      r.text("kind", "malformed").text("error", std::string(wire::name(j.error)));
      break;
  }
  print(o, r);
}

void print_summary(const Options& o, const Summary& s) {
  Record sum;
  sum.text("summary", o.file)
      .number("packets", s.packets)
      .number("roce", s.roce)
      .number("icrc_ok", s.icrc_ok)
      .number("icrc_bad", s.icrc_bad)
      .number("iwarp", s.iwarp)
      .number("mpa_crc_ok", s.mpa_crc_ok)
      .number("mpa_crc_bad", s.mpa_crc_bad)
      .number("other", s.other)
      .number("truncated", s.truncated)
      .number("malformed", s.malformed);
  for (const auto& [err, n] : s.malformed_by_error) sum.number("malformed_" + err, n);
  print(o, sum);
}

// One line per frame, then the summary; the exit status.
int dump_all(const Options& o, net::PcapReader& reader) {
  Summary s;
  std::uint64_t first_ns = 0;
  IwarpCaptureDecoder iwarp;
  while (auto pkt = reader.next()) {
    ++s.packets;
    if (s.packets == 1) first_ns = pkt->time_ns;
    char t[32];
    std::snprintf(t, sizeof t, "%.6f", static_cast<double>(pkt->time_ns - first_ns) / 1e9);
    Record start;
    start.number("frame", s.packets).text("time", t);
    const bool iwarp_printed = print_iwarp_frames(o, iwarp, *pkt, start, s);
    print_roce_frame(o, *pkt, start, iwarp_printed, s);
  }
  if (!reader.error().empty()) {
    std::fprintf(stderr, "softrdma dump: %s: read error after %llu packets: %s\n", o.file,
                 static_cast<unsigned long long>(s.packets), reader.error().c_str());
    return 2;
  }
  print_summary(o, s);
  for (const std::string& note : iwarp.notes()) std::fprintf(stderr, "softrdma dump: %s: %s\n", o.file, note.c_str());
  const bool bad = s.malformed > 0 || s.icrc_bad > 0 || s.mpa_crc_bad > 0;
  return o.check && bad ? 1 : 0;
}

}  // namespace

int dump_main(int argc, char** argv) {
  Options o;
  if (const Exit exit = parse_options(argc, argv, o)) return *exit;
  std::optional<net::PcapReader> reader = open_capture(o);
  if (!reader) return 2;
  if (o.follow) return follow_dump({*o.follow, o.peer, o.json, o.check, o.file}, *reader);
  return dump_all(o, *reader);
}

}  // namespace softrdma::dump
