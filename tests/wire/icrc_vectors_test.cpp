// The five worked ICRC examples in SOFTRDMA_SHARED_DIR/captures/icrc_test_vectors.json, taken from
// real NICs: each frame must check, its computed ICRC must equal the zlib CRC listed, and
// rebuilding it from its parsed fields must give back the same bytes.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/wire/hex.hpp"
#include "wire/roce_frame.hpp"

namespace {

// The value of each `"key": "value"` in order of appearance (the file is flat enough).
std::vector<std::string> string_values(const std::string& json, const std::string& key) {
  std::vector<std::string> out;
  const std::string needle = "\"" + key + "\": \"";
  for (std::size_t at = json.find(needle); at != std::string::npos; at = json.find(needle, at + 1)) {
    const std::size_t start = at + needle.size();
    out.push_back(json.substr(start, json.find('"', start) - start));
  }
  return out;
}

}  // namespace

TEST_CASE("ICRC test vectors from real NICs", "[wire][icrc][captures]") {
  std::ifstream in(SOFTRDMA_SHARED_DIR "/captures/icrc_test_vectors.json");
  if (!in) {
    WARN("skipped: " SOFTRDMA_SHARED_DIR "/captures/icrc_test_vectors.json is absent");
    return;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const auto frames = string_values(ss.str(), "frame_hex");
  const auto crcs = string_values(ss.str(), "zlib_crc32");
  const auto labels = string_values(ss.str(), "label");
  REQUIRE(frames.size() == 5);
  REQUIRE(crcs.size() == 5);

  for (std::size_t i = 0; i < frames.size(); ++i) {
    INFO(labels[i]);
    const std::vector<std::uint8_t> bytes = test::from_hex(frames[i]);
    const auto frame = wire::RoceFrame::check(bytes);
    REQUIRE(frame.ok());
    CHECK(frame->computed_icrc() == std::stoul(crcs[i], nullptr, 16));
    CHECK(frame->icrc_ok());

    const auto repr = wire::RoceFrameRepr::parse(*frame);
    std::vector<std::uint8_t> rebuilt(repr.buffer_len(), 0xA5);
    REQUIRE(repr.emit(rebuilt.data()) == bytes.size());
    CHECK(test::to_hex(rebuilt) == frames[i]);
  }
}
