// Judges one capture listed in SOFTRDMA_SHARED_DIR/captures/MANIFEST.tsv by its columns (explained in
// SOFTRDMA_SHARED_DIR/captures/MANIFEST.md). ctest runs it once per row:
//
//   capture_manifest_check FILE FORMAT ICRC_EXPECT PARSE
//
// RoCE files: with PARSE `required` every RoCE packet must pass check() and rebuild
// byte-identically from its parsed fields; with `headers-only` its headers must parse and
// rebuild (the trailer is not trusted). ICRC_EXPECT: all-valid, all-invalid, truncated (the
// cut packets get no verdict), invalid-frames:N,M. Frames that are not RoCE are counted, not
// judged. iWARP files: every MPA frame and FPDU decodes. Exit 0 pass, 1 fail, 77 skipped
// (ctest's SKIP_RETURN_CODE).
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include "emulator/net/pcap_file.hpp"
#include "tools/dump/iwarp_capture.hpp"
#include "tools/softrdma/frame_judge.hpp"

namespace {

using softrdma::dump::FrameKind;

constexpr int kPass = 0, kFail = 1, kSkip = 77;

std::set<std::uint64_t> listed_frames(const std::string& expect) {
  std::set<std::uint64_t> out;
  std::istringstream in(expect.substr(expect.find(':') + 1));
  std::string n;
  while (std::getline(in, n, ',')) out.insert(std::stoull(n));
  return out;
}

int check_roce(const std::string& file, const std::string& icrc_expect, const std::string& parse) {
  std::string error;
  auto reader = softrdma::net::PcapReader::open(file, error);
  if (!reader) {
    std::printf("FAIL %s: %s\n", file.c_str(), error.c_str());
    return kFail;
  }
  const bool invalid_list = icrc_expect.rfind("invalid-frames:", 0) == 0;
  const std::set<std::uint64_t> invalid = invalid_list ? listed_frames(icrc_expect) : std::set<std::uint64_t>{};

  std::uint64_t frame = 0, roce = 0, other = 0, truncated = 0, icrc_good = 0, icrc_bad = 0, vendor_dc = 0, failures = 0;
  const auto fail = [&](const char* what) {
    if (++failures <= 10) std::printf("  frame %llu: %s\n", static_cast<unsigned long long>(frame), what);
  };
  while (auto pkt = reader->next()) {
    ++frame;
    const auto j = softrdma::dump::judge_roce(*pkt);
    switch (j.kind) {
      case FrameKind::other:
        ++other;
        continue;
      case FrameKind::truncated:
        ++truncated;
        if (icrc_expect != "truncated") fail("truncated by the capture, but the manifest does not say so");
        continue;
      case FrameKind::malformed: {
        // The manifest's headers-only DC captures: ConnectX's Dynamically Connected transport
        // reuses the RD opcode space (0x40-0x5F) with its own, unpublished extension headers,
        // so IBTA's RD layout cannot match their lengths (too long for an RD ACK, or over
        // 4096 payload bytes once DC's headers are counted as payload). Counted, not failed.
        if (parse == "headers-only" && (j.error == wire::Error::bad_length || j.error == wire::Error::oversized) &&
            wire::transport_of(wire::opcode(static_cast<std::uint8_t>(j.claimed_opcode))) == wire::Transport::rd) {
          ++vendor_dc;
          continue;
        }
        const std::string msg = "malformed: " + std::string(wire::name(j.error));
        fail(msg.c_str());
        continue;
      }
      case FrameKind::roce:
        break;
    }
    ++roce;
    ++(j.icrc_ok ? icrc_good : icrc_bad);
    if (!j.headers_reemit_identical) fail("headers do not rebuild byte-identically");
    if (parse == "required" && j.icrc_ok && !j.reemit_identical) fail("valid packet does not rebuild byte-identically");

    bool want_valid = true;
    if (icrc_expect == "all-invalid") want_valid = false;
    if (invalid_list) want_valid = invalid.count(frame) == 0;
    if (icrc_expect == "truncated") continue;  // whole packets in a cut capture: no claim either way
    if (j.icrc_ok != want_valid)
      fail(want_valid ? "ICRC fails, manifest says valid" : "ICRC passes, manifest says invalid");
  }
  if (!reader->error().empty()) {
    std::printf("FAIL %s: read error: %s\n", file.c_str(), reader->error().c_str());
    return kFail;
  }
  if (roce + truncated + vendor_dc == 0) fail("no RoCE packet in the file");
  if (icrc_expect == "truncated" && truncated == 0) fail("manifest says truncated, no packet is");
  std::printf("%s %s: frames=%llu roce=%llu icrc_ok=%llu icrc_bad=%llu truncated=%llu vendor_dc=%llu other=%llu\n",
              failures ? "FAIL" : "PASS", file.c_str(), static_cast<unsigned long long>(frame),
              static_cast<unsigned long long>(roce), static_cast<unsigned long long>(icrc_good),
              static_cast<unsigned long long>(icrc_bad), static_cast<unsigned long long>(truncated),
              static_cast<unsigned long long>(vendor_dc), static_cast<unsigned long long>(other));
  return failures ? kFail : kPass;
}

// iWARP files: every MPA frame and FPDU decodes (tests/wire/iwarp_capture_test.cpp holds
// the frame-by-frame comparison with tshark), with no error item and nothing left unread.
int check_iwarp(const std::string& file) {
  const auto result = softrdma::dump::decode_iwarp_capture(file);
  std::uint64_t mpa = 0, fpdus = 0, errors = 0;
  for (const auto& f : result.frames) {
    switch (f.item.kind) {
      case wire::iwarp::MpaItemKind::request:
      case wire::iwarp::MpaItemKind::reply:
        ++mpa;
        break;
      case wire::iwarp::MpaItemKind::fpdu:
        ++fpdus;
        break;
      case wire::iwarp::MpaItemKind::error:
        ++errors;
        std::printf("  frame %llu: %s\n", static_cast<unsigned long long>(f.frame_number), f.item.describe().c_str());
        break;
    }
  }
  for (const auto& e : result.errors) std::printf("  %s\n", e.c_str());
  const bool ok = errors == 0 && result.errors.empty() && mpa > 0 && fpdus > 0;
  std::printf("%s %s: frames=%llu mpa=%llu fpdus=%llu errors=%llu\n", ok ? "PASS" : "FAIL", file.c_str(),
              static_cast<unsigned long long>(result.packets), static_cast<unsigned long long>(mpa),
              static_cast<unsigned long long>(fpdus), static_cast<unsigned long long>(errors + result.errors.size()));
  return ok ? kPass : kFail;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s FILE FORMAT ICRC_EXPECT PARSE\n", argv[0]);
    return 2;
  }
  const std::string file = argv[1], format = argv[2], icrc = argv[3], parse = argv[4];
  if (!std::fopen(file.c_str(), "rb")) {
    std::printf("SKIPPED %s: not found (../shared is not beside the checkout)\n", file.c_str());
    return kSkip;
  }
  if (parse == "optional") {
    std::printf("SKIPPED %s: format %s is optional (native InfiniBand LRH/VCRC is out of scope)\n", file.c_str(),
                format.c_str());
    return kSkip;
  }
  if (format == "rocev2" || format == "rocev1" || format == "mixed") return check_roce(file, icrc, parse);
  if (format == "iwarp") return check_iwarp(file);
  std::printf("FAIL %s: unknown format '%s'\n", file.c_str(), format.c_str());
  return kFail;
}
