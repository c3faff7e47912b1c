// The frames of a capture in tests/data (golden packets from Linux rxe), for wire tests.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"

namespace test {

inline std::vector<std::vector<std::uint8_t>> read_frames(const std::string& name) {
  std::string error;
  auto r = softrdma::net::PcapReader::open(std::string(SOFTRDMA_TEST_DATA) + "/" + name, error);
  INFO(error);
  REQUIRE(r.has_value());
  std::vector<std::vector<std::uint8_t>> out;
  while (auto p = r->next()) out.emplace_back(p->data.begin(), p->data.end());
  return out;
}

}  // namespace test
