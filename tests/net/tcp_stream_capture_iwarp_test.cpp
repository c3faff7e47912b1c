// An iWARP connection written through TcpStreamCapture and read back by `softrdma dump`'s
// decoder (tools/dump/iwarp_capture.hpp): both MPA frames and every FPDU, in order, with good
// CRCs when they were negotiated; a planted bad CRC found as bad.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "tests/net/capture_files.hpp"
#include "tests/net/iwarp_exchange.hpp"
#include "tools/dump/iwarp_capture.hpp"

namespace {

// The capture at `path` decodes into x's items, in order, from the sides that sent them.
void check_decoded(const std::string& path, const test::IwarpExchange& x,
                   const softrdma::net::TcpConnectionEnds& ends) {
  const softrdma::dump::IwarpCaptureResult r = softrdma::dump::decode_iwarp_capture(path);
  CHECK(r.errors.empty());
  REQUIRE(r.frames.size() == x.items.size());
  for (std::size_t i = 0; i < x.items.size(); ++i) {
    const test::ExpectedItem& want = x.items[i];
    const softrdma::dump::IwarpCaptureFrame& got = r.frames[i];
    INFO("item " << i << ": " << got.item.describe());
    CHECK(got.tcp_stream == 0);
    CHECK(got.source.port == (want.from == test::TcpSide::local ? ends.local_port : ends.remote_port));
    CHECK(got.item.kind == want.kind);
    if (want.kind != test::MpaItemKind::fpdu) {
      CHECK(got.item.frame.crc == x.crc);
      continue;
    }
    CHECK(got.item.fpdu.message.opcode == want.opcode);
    CHECK(got.item.fpdu.message.ddp.last == want.last);
    CHECK(got.item.fpdu.crc_checked == x.crc);
    CHECK(got.item.fpdu.crc_ok == (x.crc && want.crc_ok));
  }
}

}  // namespace

TEST_CASE("TcpStreamCapture: dump's decoder reads back every MPA frame and FPDU", "[net][tcp_capture]") {
  const bool crc = GENERATE(false, true);
  const bool v6 = GENERATE(false, true);
  INFO("CRC " << crc << ", IPv6 " << v6);
  const test::IwarpExchange x = test::iwarp_exchange(crc);
  const std::string path = test::temp_capture_path("tcp-capture-iwarp");
  test::write_capture(path, v6 ? test::ipv6_ends() : test::ipv4_ends(), x);
  check_decoded(path, x, v6 ? test::ipv6_ends() : test::ipv4_ends());
  std::remove(path.c_str());
}

TEST_CASE("TcpStreamCapture: a planted bad CRC is decoded as bad, the rest as good", "[net][tcp_capture]") {
  const int corrupt = GENERATE(0, 3, 9);  // the first FPDU, the Read Response split over writes, the last
  INFO("bad CRC in FPDU " << corrupt);
  const test::IwarpExchange x = test::iwarp_exchange(true, corrupt);
  REQUIRE(static_cast<std::size_t>(corrupt) < x.fpdus());
  CHECK_FALSE(x.items[2 + static_cast<std::size_t>(corrupt)].crc_ok);
  const std::string path = test::temp_capture_path("tcp-capture-bad-crc");
  test::write_capture(path, test::ipv4_ends(), x);
  check_decoded(path, x, test::ipv4_ends());
  std::remove(path.c_str());
}
