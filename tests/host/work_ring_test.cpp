// The work ring between softrdmad and a client, both ends in one process over the same memfd:
// records come out as they went in, across many wraps; a full ring says so; a ring of nonsense
// is refused, never read out of bounds; room slots are per QP. (The CQ rings are exercised
// through the daemon in daemon_test.cpp.)
#include "emulator/host/work_ring.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>

namespace {

using softrdma::host::QueueRoom;
using softrdma::host::WorkRing;

struct RingPair {
  RingPair() {
    int fd = -1;
    std::string error;
    client = WorkRing::create(fd, error);
    INFO(error);
    REQUIRE(client);
    daemon = WorkRing::adopt(fd);
    REQUIRE(daemon);
    ::close(fd);
  }
  std::unique_ptr<WorkRing> client, daemon;
};

std::vector<std::uint8_t> record_of(std::mt19937& rng, std::size_t size) {
  std::vector<std::uint8_t> r(size);
  for (auto& b : r) b = static_cast<std::uint8_t>(rng());
  return r;
}

}  // namespace

TEST_CASE("work ring: records come out byte-exact and in order across many wraps", "[work_ring]") {
  RingPair p;
  std::mt19937 rng(7);
  std::deque<std::vector<std::uint8_t>> in_flight;
  std::size_t pushed = 0, popped = 0;
  while (popped < 20000) {
    // Push while there is room (sizes that do not divide the ring, so records meet its end).
    while (pushed - popped < 300) {
      auto r = record_of(rng, 1 + rng() % 9000);
      if (!p.client->push(r)) break;
      in_flight.push_back(std::move(r));
      ++pushed;
    }
    for (auto k = static_cast<int>(rng() % 200); k >= 0 && !in_flight.empty(); --k) {
      std::span<const std::uint8_t> got;
      REQUIRE(p.daemon->next(got));
      REQUIRE(got.size() == in_flight.front().size());
      REQUIRE(std::equal(got.begin(), got.end(), in_flight.front().begin()));
      p.daemon->pop();
      in_flight.pop_front();
      ++popped;
    }
  }
  std::span<const std::uint8_t> got;
  while (!in_flight.empty()) {
    REQUIRE(p.daemon->next(got));
    REQUIRE(got.size() == in_flight.front().size());
    p.daemon->pop();
    in_flight.pop_front();
  }
  REQUIRE(p.daemon->next(got));
  CHECK(got.empty());
  CHECK(p.daemon->empty());
}

TEST_CASE("work ring: a full ring refuses a record until the daemon takes some", "[work_ring]") {
  RingPair p;
  const std::vector<std::uint8_t> big(60000, 1);
  int fitted = 0;
  while (p.client->push(big)) ++fitted;
  CHECK(fitted == static_cast<int>(WorkRing::kCapacity / (60000 + 8)));
  std::span<const std::uint8_t> got;
  REQUIRE(p.daemon->next(got));
  p.daemon->pop();
  CHECK(p.client->push(big));
  CHECK_FALSE(p.client->push(std::vector<std::uint8_t>(WorkRing::kCapacity / 2 + 1, 0)));  // never fits
}

TEST_CASE("work ring: a client scribbling on its ring makes next() fail, never read beyond it", "[work_ring]") {
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    int fd = -1;
    std::string error;
    auto client = WorkRing::create(fd, error);
    REQUIRE(client);
    auto daemon = WorkRing::adopt(fd);
    REQUIRE(daemon);
    // The client's view of the same memory, written at random: head, and the bytes where the
    // next records would be.
    void* raw = ::mmap(nullptr, WorkRing::kDataOffset + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(raw != MAP_FAILED);
    ::close(fd);
    auto* bytes = static_cast<std::uint8_t*>(raw);
    for (int i = 0; i < 64; ++i) bytes[WorkRing::kDataOffset + rng() % 4096] = static_cast<std::uint8_t>(rng());
    auto* header = static_cast<softrdma::host::WorkRingHeader*>(raw);
    header->head.store(static_cast<std::uint32_t>(round % 2 ? rng() : rng() % 4096));
    std::span<const std::uint8_t> got;
    for (int k = 0; k < 4 && daemon->next(got) && !got.empty(); ++k) {
      CHECK(got.size() <= WorkRing::kCapacity);  // and it lies inside the ring: next() checks
      daemon->pop();
    }
    ::munmap(raw, WorkRing::kDataOffset + 4096);
  }
}

TEST_CASE("work ring: room slots are published per QP and forgotten for a new QP", "[work_ring]") {
  RingPair p;
  QueueRoom r;
  CHECK_FALSE(p.client->read_room(0x11, r));  // never published
  p.daemon->publish_room(0x11, QueueRoom{5, 6, 100, 200});
  REQUIRE(p.client->read_room(0x11, r));
  CHECK((r.send_room == 5 && r.recv_room == 6 && r.send_taken == 100 && r.recv_taken == 200));
  CHECK_FALSE(p.client->read_room(0x11 + WorkRing::kRoomSlots, r));  // same slot, other QPN
  p.client->clear_room(0x11);
  CHECK_FALSE(p.client->read_room(0x11, r));
  p.daemon->publish_room(0x11, QueueRoom{1, 2, 3, 4});
  REQUIRE(p.client->read_room(0x11, r));
  CHECK(r.send_taken == 3);
}
