// iWARP captures through decode_iwarp_capture, compared with tshark frame by frame: every
// iwarp capture of SOFTRDMA_SHARED_DIR/captures/MANIFEST.tsv, the frame counts in
// SOFTRDMA_SHARED_DIR/captures/linux-guests/SUMMARY.txt, and a capture built here with CRCs, several
// FPDUs per segment and FPDUs split over segments, whose CRC verdicts tshark must share.
#include "tools/dump/iwarp_capture.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "tests/wire/rdmap_messages.hpp"
#include "wire/ethernet.hpp"
#include "wire/ipv4.hpp"
#include "wire/iwarp/mpa.hpp"
#include "wire/iwarp/rdmap.hpp"
#include "wire/tcp.hpp"

using softrdma::dump::decode_iwarp_capture;
using softrdma::dump::IwarpCaptureResult;
using wire::iwarp::MpaItemKind;
using Bytes = std::vector<std::uint8_t>;
using test::tagged;
using test::untagged;

namespace {

const std::string kShared = SOFTRDMA_SHARED_DIR;

bool have_tshark() { return std::system("command -v tshark >/dev/null 2>&1") == 0; }

std::string run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

// The flags of SOFTRDMA_SHARED_DIR/tools/tshark-validate.sh: keep ULP heuristics off RDMA payloads.
const std::string kTshark =
    "tshark -n --disable-protocol rpcordma --disable-protocol smb_direct --disable-protocol nvme-rdma "
    "--disable-protocol iser --disable-protocol infiniband_sdp --disable-protocol smc "
    "--disable-heuristic eth_over_ib --disable-heuristic mellanox_eoib";

// One line per frame holding iWARP: "N req", "N rep", or "N opcode/last[ opcode/last...]".
std::vector<std::string> tshark_lines(const std::string& path) {
  const std::string out = run(kTshark + " -r '" + path +
                              "' -Y iwarp_mpa -T fields -E occurrence=a -E aggregator=';' -e frame.number"
                              " -e iwarp_mpa.key.req -e iwarp_mpa.key.rep -e iwarp_rdma.opcode"
                              " -e iwarp_ddp.last_flag 2>/dev/null");
  std::vector<std::string> lines;
  for (const std::string& row : split(out, '\n')) {
    const std::vector<std::string> f = split(row, '\t');
    if (f.size() != 5) continue;
    std::string line = f[0];
    if (!f[1].empty()) line += " req";
    if (!f[2].empty()) line += " rep";
    if (!f[3].empty()) {
      const std::vector<std::string> ops = split(f[3], ';'), lasts = split(f[4], ';');
      for (std::size_t i = 0; i < ops.size(); ++i) line += " " + ops[i] + "/" + (i < lasts.size() ? lasts[i] : "?");
    }
    lines.push_back(line);
  }
  return lines;
}

// The same from our decoder; errors show as "error:<name>".
std::vector<std::string> our_lines(const IwarpCaptureResult& r) {
  std::vector<std::string> lines;
  std::uint64_t frame = 0;
  for (const auto& f : r.frames) {
    if (lines.empty() || f.frame_number != frame) lines.push_back(std::to_string(f.frame_number));
    frame = f.frame_number;
    const wire::iwarp::MpaStreamItem& item = f.item;
    switch (item.kind) {
      case MpaItemKind::request:
        lines.back() += " req";
        break;
      case MpaItemKind::reply:
        lines.back() += " rep";
        break;
      case MpaItemKind::error:
        lines.back() += " error:" + std::string(wire::name(item.error));
        break;
      case MpaItemKind::fpdu: {
        char tok[16];
        std::snprintf(tok, sizeof tok, " 0x%02x/%d", static_cast<unsigned>(item.fpdu.message.opcode),
                      item.fpdu.message.ddp.last ? 1 : 0);
        lines.back() += tok;
        break;
      }
    }
  }
  return lines;
}

// Frames per kind, named as SUMMARY.txt names them ("Send [last DDP segment]", ...).
std::map<std::string, int> kind_counts(const IwarpCaptureResult& r) {
  std::map<std::string, int> counts;
  for (const auto& f : r.frames) {
    const wire::iwarp::MpaStreamItem& item = f.item;
    if (item.kind == MpaItemKind::request) ++counts["MPA Request Frame"];
    if (item.kind == MpaItemKind::reply) ++counts["MPA Reply Frame"];
    if (item.kind == MpaItemKind::fpdu)
      ++counts[std::string(item.fpdu.message.info().name) +
               (item.fpdu.message.ddp.last ? " [last DDP segment]" : " [more DDP segments]")];
  }
  return counts;
}

// SUMMARY.txt: "NAME: N pkts" then an indented line "KIND xN; KIND xN; ".
std::map<std::string, std::pair<std::uint64_t, std::map<std::string, int>>> read_summary(std::istream& in) {
  std::map<std::string, std::pair<std::uint64_t, std::map<std::string, int>>> out;
  std::string line, current;
  bool kinds_next = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      const std::size_t colon = line.find(": ");
      current = line.substr(0, colon);
      out[current].first = std::stoull(line.substr(colon + 2));
      kinds_next = true;
    } else if (kinds_next) {
      kinds_next = false;
      for (std::string part : split(line, ';')) {
        part.erase(0, part.find_first_not_of(' '));
        const std::size_t x = part.rfind(" x");
        if (x != std::string::npos) out[current].second[part.substr(0, x)] = std::stoi(part.substr(x + 2));
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("iWARP captures decode frame for frame as tshark does", "[wire][iwarp][captures]") {
  std::ifstream manifest(kShared + "/captures/MANIFEST.tsv");
  if (!manifest) {
    WARN("skipped: " << kShared << "/captures/MANIFEST.tsv is absent");
    return;
  }
  const bool tshark = have_tshark();
  if (!tshark) WARN("skipped the tshark comparison: tshark is not installed");

  std::ifstream summary_file(kShared + "/captures/linux-guests/SUMMARY.txt");
  const auto summary = read_summary(summary_file);

  int captures = 0;
  std::string line;
  std::getline(manifest, line);  // header
  while (std::getline(manifest, line)) {
    const std::vector<std::string> cols = split(line, '\t');
    if (cols.size() < 2 || cols[1] != "iwarp") continue;
    ++captures;
    const std::string path = kShared + "/captures/" + cols[0];
    INFO(cols[0]);
    const IwarpCaptureResult r = decode_iwarp_capture(path);
    CHECK(r.errors.empty());
    const std::vector<std::string> ours = our_lines(r);
    CHECK_FALSE(ours.empty());
    for (const auto& f : r.frames) CHECK(f.item.kind != MpaItemKind::error);

    if (tshark) {
      const std::vector<std::string> theirs = tshark_lines(path);
      std::size_t same = 0;
      while (same < ours.size() && same < theirs.size() && ours[same] == theirs[same]) ++same;
      INFO("first difference at line " << same << ": ours '" << (same < ours.size() ? ours[same] : "") << "', tshark '"
                                       << (same < theirs.size() ? theirs[same] : "") << "'");
      CHECK(ours == theirs);
      WARN(cols[0] << ": " << ours.size() << " iWARP frames, " << r.frames.size()
                   << " MPA frames/FPDUs, all as tshark has them: " << (ours == theirs ? "yes" : "NO"));
    }

    const std::string name = std::filesystem::path(cols[0]).filename();
    const auto s = summary.find(name);
    if (s != summary.end()) {
      CHECK(r.packets == s->second.first);
      CHECK(kind_counts(r) == s->second.second);
    }
  }
  CHECK(captures >= 6);
}

namespace {

struct Host {
  wire::MacAddress mac;
  wire::Ipv4Address ip;
  std::uint16_t port;
  std::uint32_t seq;  // next sequence number it sends
};

// Writes TCP segments between two hosts as Ethernet/IPv4 frames (TCP checksum left zero:
// tshark does not check it unless asked).
class SegmentWriter {
 public:
  explicit SegmentWriter(softrdma::net::PcapWriter& w) : w_(w) {}

  void send(Host& from, const Host& to, std::uint8_t flags, std::span<const std::uint8_t> payload = {}) {
    constexpr std::size_t l2 = wire::Ethernet::length, l3 = wire::Ipv4::min_length, l4 = wire::Tcp::min_length;
    Bytes frame(l2 + l3 + l4 + payload.size());
    wire::EthernetRepr{to.mac, from.mac}.emit(frame.data(), wire::ethertype::ipv4);
    wire::Ipv4Repr ip;
    ip.src = from.ip;
    ip.dst = to.ip;
    ip.protocol = wire::ip_proto::tcp;
    ip.emit(frame.data() + l2, l4 + payload.size());
    std::uint8_t* t = frame.data() + l2 + l3;
    wire::Tcp::src_port::set(t, from.port);
    wire::Tcp::dst_port::set(t, to.port);
    wire::Tcp::seq::set(t, from.seq);
    wire::Tcp::ack::set(t, to.seq);
    wire::Tcp::data_offset::set(t, l4 / 4);
    wire::Tcp::flags::set(t, flags);
    wire::Tcp::window::set(t, 0xFFFF);
    std::copy(payload.begin(), payload.end(), t + l4);
    w_.write(time_ns_ += 1000, frame);
    from.seq += static_cast<std::uint32_t>(payload.size()) + ((flags & (wire::Tcp::syn | wire::Tcp::fin)) ? 1 : 0);
  }

 private:
  softrdma::net::PcapWriter& w_;
  std::uint64_t time_ns_ = 1'700'000'000'000'000'000;
};

Bytes frame_bytes(const wire::iwarp::MpaRequestReply& f) {
  Bytes b(f.length());
  f.emit(b.data());
  return b;
}

// Where the built capture's tagged messages point.
constexpr std::uint64_t kTaggedOffset = 0x7f0012345000;

Bytes fpdu_bytes(const wire::iwarp::RdmapMessage& m) {
  Bytes b(wire::iwarp::fpdu_length(m.length()));
  m.emit(b.data() + wire::iwarp::Fpdu::length_field);
  wire::iwarp::seal_fpdu(b.data(), m.length(), true);
  return b;
}

Bytes join(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

TEST_CASE("iWARP with CRCs: our verdicts and tshark's agree", "[wire][iwarp][tshark]") {
  using wire::iwarp::RdmapOpcode;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("softrdma_iwarp_crc_" + std::to_string(getpid()) + ".pcap")).string();
  {
    std::string error;
    auto writer = softrdma::net::PcapWriter::create(path, softrdma::net::kLinkEthernet, error);
    REQUIRE(writer);
    SegmentWriter w(*writer);
    Host a{{0x02, 0, 0, 0, 0, 0x0a}, {10, 0, 0, 10}, 40001, 0xFFFFFF00};  // wraps mid-stream
    Host b{{0x02, 0, 0, 0, 0, 0x0b}, {10, 0, 0, 11}, 5001, 7000};

    wire::iwarp::MpaRequestReply req;  // asks for CRCs; the responder does not, so both use them
    req.crc = true;
    req.private_data = {'h', 'i'};
    wire::iwarp::MpaRequestReply rep;
    rep.kind = wire::iwarp::MpaFrameKind::reply;

    const Bytes hello{'h', 'e', 'l', 'l', 'o'}, block(64, 0x42), big(300, 0x17);
    wire::iwarp::RdmapMessage read = untagged(RdmapOpcode::read_request, 1, {});
    read.read_request = {0x1000, 0x2000, 300, 0x3000, 0x4000};
    const Bytes response = fpdu_bytes(tagged(RdmapOpcode::read_response, 0x1000, kTaggedOffset, big));
    Bytes corrupt = fpdu_bytes(untagged(RdmapOpcode::send, 2, hello));
    corrupt[22] ^= 0x20;

    w.send(a, b, wire::Tcp::syn);                                                          // 1
    w.send(b, a, wire::Tcp::syn | wire::Tcp::ack_flag);                                    // 2
    w.send(a, b, wire::Tcp::ack_flag);                                                     // 3
    w.send(a, b, wire::Tcp::psh | wire::Tcp::ack_flag, frame_bytes(req));                  // 4
    w.send(b, a, wire::Tcp::psh | wire::Tcp::ack_flag, frame_bytes(rep));                  // 5
    w.send(a, b, wire::Tcp::ack_flag, fpdu_bytes(untagged(RdmapOpcode::send, 1, hello)));  // 6
    w.send(a, b, wire::Tcp::ack_flag,                                                      // 7
           join({fpdu_bytes(tagged(RdmapOpcode::write, 0x5000, kTaggedOffset, block)), fpdu_bytes(read)}));
    w.send(b, a, wire::Tcp::ack_flag, std::span(response).first(100));  // 8
    w.send(b, a, wire::Tcp::ack_flag,                                   // 9
           join({Bytes(response.begin() + 100, response.end()), fpdu_bytes(untagged(RdmapOpcode::send_se, 1, hello))}));
    w.send(a, b, wire::Tcp::ack_flag, corrupt);          // 10
    w.send(a, b, wire::Tcp::fin | wire::Tcp::ack_flag);  // 11

    // Another TCP connection that is not iWARP: ignored, not an error.
    Host c{{0x02, 0, 0, 0, 0, 0x0c}, {10, 0, 0, 12}, 40002, 1};
    Host web{{0x02, 0, 0, 0, 0, 0x0b}, {10, 0, 0, 11}, 80, 1};
    const std::string get = "GET / HTTP/1.1\r\nHost: example\r\n\r\n", ok = "HTTP/1.1 200 OK\r\n\r\n";
    w.send(c, web, wire::Tcp::psh | wire::Tcp::ack_flag, Bytes(get.begin(), get.end()));  // 12
    w.send(web, c, wire::Tcp::psh | wire::Tcp::ack_flag, Bytes(ok.begin(), ok.end()));    // 13
  }

  const std::vector<std::string> expected{"4 req",           "5 rep",           "6 0x03/1",
                                          "7 0x00/1 0x01/1", "9 0x02/1 0x05/1", "10 0x03/1"};
  const IwarpCaptureResult r = decode_iwarp_capture(path);
  CHECK(r.errors.empty());
  CHECK(our_lines(r) == expected);
  int good = 0, bad = 0;
  for (const auto& f : r.frames) {
    if (f.item.kind != MpaItemKind::fpdu) continue;
    CHECK(f.item.fpdu.crc_checked);
    (f.item.fpdu.crc_ok ? good : bad) += 1;
  }
  CHECK(good == 5);
  CHECK(bad == 1);

  if (!have_tshark()) {
    WARN("skipped the tshark half: tshark is not installed");
  } else {
    CHECK(tshark_lines(path) == expected);
    const std::string verdicts = run(kTshark + " -r '" + path + "' -Y iwarp_mpa.crc_check -T pdml 2>/dev/null");
    auto count = [&](const std::string& what) {
      int n = 0;
      for (std::size_t at = verdicts.find(what); at != std::string::npos; at = verdicts.find(what, at + 1)) ++n;
      return n;
    };
    CHECK(count("(Good CRC32)") == 5);
    CHECK(count("(Bad CRC32") == 1);
  }
  std::filesystem::remove(path);
}
