// softrdma stats' reading side: the JSON reader (tools/softrdma/json_reader.hpp) on what the
// one serializer (emulator/host/stats_report.hpp) writes and on bad input, and the table
// (tools/softrdma/stats_table.hpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "emulator/host/stats_report.hpp"
#include "tools/softrdma/json_reader.hpp"
#include "tools/softrdma/stats_table.hpp"

namespace {

namespace core = softrdma::core;
namespace host = softrdma::host;
using softrdma::stats::JsonValue;
using softrdma::stats::parse_json;
using softrdma::stats::render_table;

JsonValue parsed(const std::string& text) {
  std::string error;
  std::optional<JsonValue> v = parse_json(text, error);
  INFO(text << ": " << error);
  REQUIRE(v);
  return *v;
}

std::string parse_error(const std::string& text) {
  std::string error;
  CHECK_FALSE(parse_json(text, error));
  return error;
}

host::StatsReport sample() {
  host::StatsReport r;
  r.pid = 4242;
  r.program = "odd \"name\"\\\n\x01";
  r.device = "srdma0";
  r.address = "127.0.0.3";
  r.host.device.qps.sent_pkts = 18446744073709551615ull;  // 2^64 - 1: a double would round it
  r.host.device.qps.rcvd_pkts = 7;
  r.host.device.icrc_err = 3;
  r.host.udp.rx_kernel_drops = 5;
  r.host.udp.loopback_packets = 4;
  r.host.capture.frames_written = 11;
  r.host.faults.tx.lost = 2;
  r.host.faults.rx.corrupted = 9;
  core::QpStats a;
  a.qpn = 0x11;
  a.type = core::QpType::rc;
  a.state = core::QpState::rts;
  a.dest_qpn = 0x12;
  a.counters.sent_pkts = 100;
  a.counters.rcvd_rnr_err = 4;
  core::QpStats b;
  b.qpn = 0x13;
  b.type = core::QpType::ud;
  b.state = core::QpState::sqe;
  r.qps = {a, b};
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("stats JSON: what to_json writes reads back field for field", "[stats]") {
  const std::string text = host::to_json(sample());
  CHECK(text.find('\n') == std::string::npos);  // one line: one report per line in --json
  const JsonValue r = parsed(text);
  CHECK(r.find("format")->text == "1");
  CHECK(r.find("pid")->text == "4242");
  CHECK(r.find("program")->text == "odd \"name\"\\\n\x01");  // escaped and unescaped intact
  CHECK(r.find("device")->text == "srdma0");
  const JsonValue& c = *r.find("counters");
  CHECK(c.members.size() == 20);  // the 13 QP counters flattened, then the device's 7 (drops, ID solves, multicast)
  CHECK(c.find("mcast_rcvd") != nullptr);
  CHECK(c.find("mcast_dropped") != nullptr);
  CHECK(c.members.front().name == "sent_pkts");
  CHECK(c.find("sent_pkts")->text == "18446744073709551615");
  CHECK(c.find("rcvd_pkts")->text == "7");
  CHECK(c.find("icrc_err")->text == "3");
  CHECK(c.find("dropped")->text == "0");
  CHECK(r.find("cm")->members.size() == 6);  // QP1's MADs
  CHECK(r.find("cm")->find("mads_resent")->text == "0");
  CHECK(r.find("udp")->members.size() == 13);
  CHECK(r.find("udp")->find("loopback_packets")->text == "4");
  CHECK(r.find("udp")->find("rx_kernel_drops")->text == "5");
  CHECK(r.find("capture")->find("frames_written")->text == "11");
  CHECK(r.find("faults")->find("tx")->find("lost")->text == "2");
  CHECK(r.find("faults")->find("rx")->find("corrupted")->text == "9");
  CHECK(r.find("faults")->find("rx")->members.size() == 8);
  const JsonValue& qps = *r.find("qps");
  REQUIRE(qps.items.size() == 2);
  CHECK(qps.items[0].find("qpn")->text == "17");
  CHECK(qps.items[0].find("type")->text == "RC");
  CHECK(qps.items[0].find("state")->text == "RTS");
  CHECK(qps.items[0].find("dest_qpn")->text == "18");
  CHECK(qps.items[0].find("rcvd_rnr_err")->text == "4");
  CHECK(qps.items[0].members.size() == 4 + 13);
  CHECK(qps.items[1].find("type")->text == "UD");
  CHECK(qps.items[1].find("state")->text == "SQE");
}

TEST_CASE("stats JSON: the reader takes RFC 8259's forms and names what is wrong", "[stats]") {
  const JsonValue v = parsed(" {\"a\": [1, -2.5e+3, true, false, null, \"\\u00e9\\ud83d\\ude00\\/\"], \"b\": {}} ");
  const JsonValue& a = *v.find("a");
  REQUIRE(a.items.size() == 6);
  CHECK(a.items[1].text == "-2.5e+3");
  CHECK(a.items[2].kind == JsonValue::Kind::boolean);
  CHECK(a.items[4].kind == JsonValue::Kind::null);
  CHECK(a.items[5].text == "\xc3\xa9\xf0\x9f\x98\x80/");
  CHECK(v.find("b")->kind == JsonValue::Kind::object);
  CHECK(v.find("c") == nullptr);

  CHECK_THAT(parse_error("{\"a\":1"), Catch::Contains("'}' is missing"));
  CHECK_THAT(parse_error("{\"a\":1} x"), Catch::Contains("text after the value"));
  CHECK_THAT(parse_error("[01]"), Catch::Contains("leading zero"));
  CHECK_THAT(parse_error("\"a\nb\""), Catch::Contains("control character"));
  CHECK_THAT(parse_error("\"abc"), Catch::Contains("unterminated string"));
  CHECK_THAT(parse_error("[1,]"), Catch::Contains("not a value"));
  CHECK_THAT(parse_error(""), Catch::Contains("a value is missing"));
  CHECK_THAT(parse_error("nul"), Catch::Contains("unknown word"));
  CHECK_THAT(parse_error(std::string(100, '[') + std::string(100, ']')), Catch::Contains("nesting too deep"));
  CHECK_THAT(parse_error("{\"a\" 1}"), Catch::Contains("at byte 5"));
}

TEST_CASE("stats table: header, counter groups wrapped, QP rows with the counters that matter", "[stats]") {
  host::StatsReport r = sample();
  r.program = "ibv_rc_pingpong";
  const std::vector<std::string> lines = lines_of(render_table(parsed(host::to_json(r))));
  REQUIRE(lines.size() > 8);
  CHECK(lines[0] == "PID 4242  ibv_rc_pingpong  srdma0  127.0.0.3");
  CHECK(lines[1].rfind("  counters   sent_pkts=18446744073709551615 sent_bytes=0 rcvd_pkts=7 ", 0) == 0);
  for (const std::string& line : lines) CHECK(line.size() <= 100);
  const std::string all = render_table(parsed(host::to_json(r)));
  CHECK_THAT(all, Catch::Contains("icrc_err=3"));
  CHECK_THAT(all, Catch::Contains("\n  faults tx  passed=0 lost=2 "));
  CHECK_THAT(all, Catch::Contains("\n  faults rx  "));
  CHECK_THAT(all, Catch::Contains("\n  capture    frames_written=11 frames_dropped=0\n"));

  // The QP table: the traffic counters always, rcvd_rnr_err because one QP has some, and no
  // column that is 0 for every QP.
  const auto header =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("  QPN", 0) == 0; });
  REQUIRE(header != lines.end());
  CHECK(*header == "  QPN       TYPE  STATE  DEST_QPN  sent_pkts  sent_bytes  rcvd_pkts  rcvd_bytes  rcvd_rnr_err");
  REQUIRE(header + 2 < lines.end());
  CHECK(header[1] == "  0x000011  RC    RTS    0x000012        100           0          0           0             4");
  CHECK(header[2] == "  0x000013  UD    SQE    -                 0           0          0           0             0");

  r.qps.clear();
  CHECK_THAT(render_table(parsed(host::to_json(r))), Catch::EndsWith("  (no live QP)\n"));
}

TEST_CASE("stats: the iWARP device beside srdma0 in the JSON and under its own line in the table", "[stats]") {
  host::StatsReport r = sample();
  CHECK(parsed(host::to_json(r)).find("iwarp_device") == nullptr);  // only with the device
  host::IwarpDeviceReport iw;
  iw.device = "srdmaiw0";
  iw.address = "127.0.0.3";
  iw.counters.sent_pkts = 40;
  iw.iwarp.connections_accepted = 1;
  iw.iwarp.crc_err = 2;
  iw.iwarp.tcp_bytes_received = 2184;
  core::QpStats q;
  q.qpn = 0x21;
  q.state = core::QpState::err;
  q.counters.sent_pkts = 40;
  iw.qps = {q};
  r.iwarp = iw;

  const JsonValue json = parsed(host::to_json(r));
  const JsonValue* d = json.find("iwarp_device");
  REQUIRE(d != nullptr);
  CHECK(d->find("device")->text == "srdmaiw0");
  CHECK(d->find("counters")->members.size() == 13);  // the QP counters only: no ICRC, no multicast
  CHECK(d->find("counters")->find("sent_pkts")->text == "40");
  CHECK(d->find("iwarp")->members.size() == 12);
  CHECK(d->find("iwarp")->find("crc_err")->text == "2");
  CHECK(d->find("iwarp")->find("tcp_bytes_received")->text == "2184");
  REQUIRE(d->find("qps")->items.size() == 1);
  CHECK(d->find("qps")->items[0].find("state")->text == "ERR");

  const std::string table = render_table(json);
  const std::size_t at = table.find("\nsrdmaiw0  127.0.0.3\n");
  REQUIRE(at != std::string::npos);
  CHECK(table.find("  0x000011  RC") < at);  // srdma0's QPs first
  const std::string iwarp = table.substr(at);
  CHECK_THAT(iwarp, Catch::Contains("\n  counters   sent_pkts=40 "));
  CHECK_THAT(iwarp, Catch::Contains("\n  iwarp      connections_initiated=0 connections_accepted=1 "));
  CHECK_THAT(iwarp, Catch::Contains("crc_err=2"));
  CHECK_THAT(iwarp, Catch::Contains("\n  0x000021  RC    ERR    -"));
}
