// Capture files of tests that write one: a path of its own in TMPDIR, and reading a capture
// back whole.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"

namespace test {

// TMPDIR (else /tmp)/softrdma-NAME-PID.pcap: each test case its own name, each process its
// own file.
inline std::string temp_capture_path(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/softrdma-" + name + "-" +
         std::to_string(::getpid()) + ".pcap";
}

struct Frames {
  std::vector<std::vector<std::uint8_t>> data;
  int link_type = -1;
};

// Every frame of the capture at `path`, none of them cut short.
inline Frames read_capture(const std::string& path) {
  std::string error;
  std::optional<softrdma::net::PcapReader> reader = softrdma::net::PcapReader::open(path, error);
  INFO(path << ": " << error);
  REQUIRE(reader);
  Frames f;
  f.link_type = reader->link_type();
  while (const auto p = reader->next()) {
    CHECK_FALSE(p->truncated());
    f.data.emplace_back(p->data.begin(), p->data.end());
  }
  CHECK(reader->error().empty());
  return f;
}

}  // namespace test
