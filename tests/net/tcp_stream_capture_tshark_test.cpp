// TcpStreamCapture's files judged by programs: tshark (ctest net.tcp_capture_tshark) and
// `softrdma dump --check` as typed (net.tcp_capture_dump_check). Hidden from ctest's discovery
// of net_tests ([.]): each runs as a ctest of its own, which tests/net/CMakeLists.txt gives the
// tool's path or the skip rule.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/net/capture_files.hpp"
#include "tests/net/iwarp_exchange.hpp"
#include "tests/tools/run_command.hpp"

namespace {

// Keeps ULP heuristics off RDMA payloads (as the tshark tests in tests/wire do), and has
// tshark check what it does not by default: IP and TCP checksums. MPA has no port of its own:
// its heuristic finds the key at the start of the stream.
const std::string kTshark =
    "tshark -n --disable-protocol rpcordma --disable-protocol smb_direct --disable-protocol nvme-rdma "
    "--disable-protocol iser --disable-protocol infiniband_sdp --disable-protocol smc "
    "--disable-heuristic eth_over_ib --disable-heuristic mellanox_eoib --enable-heuristic iwarp_mpa_tcp "
    "-o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE -o tcp.desegment_tcp_streams:TRUE";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

// tshark's output; its stderr (a warning when run as root) is left out.
std::string tshark(const std::string& path, const std::string& arguments) {
  const std::string command = kTshark + " -r '" + path + "' " + arguments;
  const test::CommandResult r = test::run("(" + command + " 2>/dev/null)");
  INFO(command);
  REQUIRE(r.status == 0);
  return r.output;
}

// "PORT OPCODE/LAST" per FPDU, and "PORT req" / "PORT rep" per MPA frame, in capture order.
std::vector<std::string> expected_items(const test::IwarpExchange& x, const softrdma::net::TcpConnectionEnds& ends) {
  std::vector<std::string> out;
  for (const test::ExpectedItem& i : x.items) {
    std::string line = std::to_string(i.from == test::TcpSide::local ? ends.local_port : ends.remote_port);
    if (i.kind == test::MpaItemKind::request) line += " req";
    if (i.kind == test::MpaItemKind::reply) line += " rep";
    if (i.kind == test::MpaItemKind::fpdu)
      line += " " + std::to_string(static_cast<unsigned>(i.opcode)) + "/" + (i.last ? "1" : "0");
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> tshark_items(const std::string& path) {
  const std::string out = tshark(path, "-Y iwarp_mpa -T fields -E occurrence=a -E aggregator=';' -e tcp.srcport"
                                       " -e iwarp_mpa.key.req -e iwarp_mpa.key.rep -e iwarp_rdma.opcode"
                                       " -e iwarp_ddp.last_flag");
  std::vector<std::string> items;
  for (const std::string& row : split(out, '\n')) {
    std::vector<std::string> f = split(row + "\t", '\t');
    f.resize(5);
    if (!f[1].empty()) items.push_back(f[0] + " req");
    if (!f[2].empty()) items.push_back(f[0] + " rep");
    const std::vector<std::string> ops = split(f[3], ';'), lasts = split(f[4], ';');
    for (std::size_t i = 0; i < ops.size(); ++i)
      items.push_back(f[0] + " " + std::to_string(std::stoul(ops[i], nullptr, 0)) + "/" +
                      (i < lasts.size() && lasts[i] == "1" ? "1" : "0"));
  }
  return items;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("TcpStreamCapture: tshark decodes the iWARP connection, nothing malformed", "[.tshark]") {
  if (test::run("command -v tshark").status != 0) {
    WARN("SKIPPED: tshark is not installed (scripts/install-deps.sh installs it)");
    return;
  }
  const bool v6 = GENERATE(false, true);
  // MSS 0 is the default; 65483 is loopback's (MTU 65536), where every segment is ACKed.
  const auto [crc, corrupt, mss] = GENERATE(table<bool, int, std::uint16_t>({{false, -1, std::uint16_t{0}},
                                                                             {true, -1, std::uint16_t{0}},
                                                                             {true, 3, std::uint16_t{0}},
                                                                             {true, -1, std::uint16_t{65483}}}));
  INFO("CRC " << crc << ", IPv6 " << v6 << ", bad CRC in FPDU " << corrupt << ", MSS option " << mss);
  const softrdma::net::TcpConnectionEnds ends = v6 ? test::ipv6_ends() : test::ipv4_ends();
  const test::IwarpExchange x = test::iwarp_exchange(crc, corrupt);
  const std::string path = test::temp_capture_path("tcp-capture-tshark");
  softrdma::net::TcpCaptureOptions options;
  options.mss = mss;
  test::write_capture(path, ends, x, options);

  // Nothing malformed, no bad checksum, no TCP analysis remark (lost or unseen segments,
  // retransmissions, window trouble): the numbering holds together.
  const std::string suspicious =
      tshark(path, "-Y '_ws.malformed || ip.checksum.status == 0 || tcp.checksum.status == 0 ||"
                   " tcp.analysis.flags || _ws.expert.severity >= error'");
  CHECK(suspicious.empty());
  CHECK(tshark_items(path) == expected_items(x, ends));

  const std::string verdicts = tshark(path, "-Y iwarp_mpa.crc_check -T pdml");
  const std::size_t bad = corrupt >= 0 ? 1 : 0;
  CHECK(count(verdicts, "(Good CRC32)") == (crc ? x.fpdus() - bad : 0));
  CHECK(count(verdicts, "(Bad CRC32") == bad);
  std::remove(path.c_str());
}

TEST_CASE("TcpStreamCapture: softrdma dump --check accepts the capture, or names the bad CRC", "[.dump_command]") {
  const char* tool = std::getenv("SOFTRDMA_TOOL");
  INFO("SOFTRDMA_TOOL: the softrdma command (set by ctest)");
  REQUIRE(tool != nullptr);
  const auto [crc, corrupt] = GENERATE(table<bool, int>({{false, -1}, {true, -1}, {true, 3}}));
  INFO("CRC " << crc << ", bad CRC in FPDU " << corrupt);
  const test::IwarpExchange x = test::iwarp_exchange(crc, corrupt);
  const std::string path = test::temp_capture_path("tcp-capture-dump");
  test::write_capture(path, test::ipv4_ends(), x);

  const test::CommandResult r = test::run(std::string(tool) + " dump --check '" + path + "'");
  INFO(r.output);
  const std::size_t bad = corrupt >= 0 ? 1 : 0;
  CHECK(r.status == (bad ? 1 : 0));
  CHECK(count(r.output, "iwarp=" + std::to_string(x.items.size()) + " ") == 1);
  CHECK(count(r.output, "mpa_crc_ok=" + std::to_string(crc ? x.fpdus() - bad : 0) + " ") == 1);
  CHECK(count(r.output, "mpa_crc_bad=" + std::to_string(bad) + " ") == 1);
  CHECK(count(r.output, "malformed=0") == 1);
  std::remove(path.c_str());
}
