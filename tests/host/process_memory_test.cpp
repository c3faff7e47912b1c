// ProcessMemory's batching (host/process_memory.hpp) on this process's own memory: staged
// writes, read-ahead, what flush() and detach() do, and the errors of unmapped memory.
#include "emulator/host/process_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

using namespace softrdma;

namespace {

struct Attached {
  host::ProcessMemory memory;
  std::uint16_t slot = *memory.attach(::getpid());
  std::uint64_t at(const void* p) const { return *host::ProcessMemory::tag(slot, reinterpret_cast<std::uint64_t>(p)); }
};

std::span<const std::uint8_t> bytes(const std::vector<std::uint8_t>& v) { return v; }

}  // namespace

TEST_CASE("process memory: writes are staged until flush, and reads see them before") {
  Attached a;
  std::vector<std::uint8_t> target(4096, 0);
  const std::vector<std::uint8_t> first(1024, 0x11), second(1024, 0x22);
  REQUIRE(a.memory.write(a.at(target.data()), bytes(first)));
  REQUIRE(a.memory.write(a.at(target.data() + 1024), bytes(second)));  // contiguous: one run
  CHECK(target[0] == 0);  // not yet in memory: one system call for both at flush
  std::vector<std::uint8_t> seen(2048);
  REQUIRE(a.memory.read(a.at(target.data()), seen));  // a read flushes first
  CHECK(seen[0] == 0x11);
  CHECK(seen[2047] == 0x22);
  CHECK(target[1024] == 0x22);
  REQUIRE(a.memory.write(a.at(target.data() + 3000), bytes(first).first(8)));
  a.memory.flush();
  CHECK(target[3007] == 0x11);
  CHECK(a.memory.lost_write_bytes() == 0);
}

TEST_CASE("process memory: a read that continues the last one reads ahead until flush") {
  Attached a;
  std::vector<std::uint8_t> source(64 * 1024);
  std::iota(source.begin(), source.end(), std::uint8_t{0});
  std::vector<std::uint8_t> out(1024);
  REQUIRE(a.memory.read(a.at(source.data()), out));         // a first read: just that
  REQUIRE(a.memory.read(a.at(source.data() + 1024), out));  // continues it: reads ahead
  CHECK(out[0] == static_cast<std::uint8_t>(1024));
  source[2048] = 0xEE;  // changed behind the read-ahead
  REQUIRE(a.memory.read(a.at(source.data() + 2048), out));
  CHECK(out[0] == static_cast<std::uint8_t>(2048));  // served from what was read ahead
  a.memory.flush();                                  // forgets it
  REQUIRE(a.memory.read(a.at(source.data() + 2048), out));
  CHECK(out[0] == 0xEE);
  // A write drops the read-ahead too: the next read sees memory as it is.
  REQUIRE(a.memory.read(a.at(source.data() + 3072), out));
  REQUIRE(a.memory.read(a.at(source.data() + 4096), out));
  source[5120] = 0xDD;
  const std::vector<std::uint8_t> one(1, 0x77);
  REQUIRE(a.memory.write(a.at(source.data() + 60000), bytes(one)));
  REQUIRE(a.memory.read(a.at(source.data() + 5120), out));
  CHECK(out[0] == 0xDD);
  CHECK(source[60000] == 0x77);
}

TEST_CASE("process memory: unmapped memory fails a read, and a staged write to it is counted as lost") {
  Attached a;
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  const std::vector<std::uint8_t> data(64, 0x5A);
  REQUIRE(a.memory.write(a.at(p), bytes(data)));  // staged while mapped
  ::munmap(p, static_cast<std::size_t>(page));
  a.memory.flush();
  CHECK(a.memory.lost_write_bytes() == 64);
  std::vector<std::uint8_t> out(64);
  CHECK_FALSE(a.memory.read(a.at(p), out));
  // Read-ahead that runs into the unmapped page still serves what lies before it.
  std::vector<std::uint8_t> tail(static_cast<std::size_t>(page));
  void* two =
      ::mmap(nullptr, static_cast<std::size_t>(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(two != MAP_FAILED);
  auto* base = static_cast<std::uint8_t*>(two);
  ::munmap(base + page, static_cast<std::size_t>(page));
  std::memset(base, 0x42, static_cast<std::size_t>(page));
  REQUIRE(a.memory.read(a.at(base), std::span(tail).first(32)));
  // Continues the last read: reads ahead 16 x 512 bytes, into the hole, and gets the rest of
  // the page.
  REQUIRE(a.memory.read(a.at(base + 32), std::span(tail).first(512)));
  CHECK(tail[511] == 0x42);
  CHECK_FALSE(a.memory.read(a.at(base + page - 16), out));  // crosses into it
  ::munmap(base, static_cast<std::size_t>(page));
}

TEST_CASE("process memory: a departing client's staged writes are dropped, and its slot reaches nothing") {
  Attached a;
  std::vector<std::uint8_t> target(64, 0);
  const std::vector<std::uint8_t> data(64, 0x33);
  const std::uint64_t addr = a.at(target.data());
  REQUIRE(a.memory.write(addr, bytes(data)));
  a.memory.detach(a.slot);
  a.memory.flush();
  CHECK(target[0] == 0);
  CHECK(a.memory.lost_write_bytes() == 0);
  CHECK_FALSE(a.memory.write(addr, bytes(data)));
  std::vector<std::uint8_t> out(8);
  CHECK_FALSE(a.memory.read(addr, out));
}
