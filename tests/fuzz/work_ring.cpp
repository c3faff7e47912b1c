// Fuzzes what softrdmad reads from a client's work ring (emulator/host/work_ring.hpp): the
// ring's bytes and head are the client's to write, so any of them may be anything. The input
// fills the start of the data area, then the header's head; the daemon's side takes records
// until it refuses one, and decodes each as the post request it claims to be
// (daemon_protocol.hpp), as DaemonServer does. Nothing may read outside the ring or a record,
// and a record returned must lie inside the data area.
#include "emulator/host/work_ring.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "emulator/host/daemon_protocol.hpp"

namespace {

using softrdma::host::WorkRing;
namespace daemon = softrdma::host::daemon;
namespace core = softrdma::core;

struct Shared {
  Shared() {
    std::string error;
    client = WorkRing::create(fd, error);
    if (!client) std::abort();
    bytes = static_cast<std::uint8_t*>(
        ::mmap(nullptr, WorkRing::kDataOffset + WorkRing::kCapacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (bytes == MAP_FAILED) std::abort();
  }
  int fd = -1;
  std::unique_ptr<WorkRing> client;  // keeps the memory alive
  std::uint8_t* bytes = nullptr;
};

void decode(std::span<const std::uint8_t> record) {
  daemon::Reader in(record);
  const auto op = in.get<daemon::Op>();
  in.get<std::uint32_t>();  // queue
  const auto count = in.get<std::uint32_t>();
  if (!in.ok() || count > daemon::kMaxWrs) return;
  for (std::uint32_t i = 0; i < count && in.ok(); ++i) {
    if (op == daemon::Op::post_send) {
      core::SendWr wr;
      in.get_wr(wr);
    } else {
      core::RecvWr wr;
      in.get_wr(wr);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Shared shared;
  if (size < 4) return 0;
  auto* header = reinterpret_cast<softrdma::host::WorkRingHeader*>(shared.bytes);
  std::uint32_t head = 0;
  std::memcpy(&head, data, 4);
  const std::size_t n = std::min<std::size_t>(size - 4, WorkRing::kCapacity);
  std::memcpy(shared.bytes + WorkRing::kDataOffset, data + 4, n);
  header->tail.store(0);
  header->head.store(head);
  auto daemon_side = WorkRing::adopt(shared.fd);
  if (!daemon_side) std::abort();
  std::span<const std::uint8_t> record;
  for (int k = 0; k < 64 && daemon_side->next(record) && !record.empty(); ++k) {
    if (record.size() > WorkRing::kCapacity) std::abort();
    decode(record);
    daemon_side->pop();
  }
  return 0;
}
