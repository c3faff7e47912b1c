// Work queue entries as the engine keeps them between post and completion.
#pragma once

#include <cstdint>
#include <optional>

#include "emulator/core/tm_headers.hpp"
#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

inline std::uint64_t sge_total(const std::vector<Sge>& sges) {
  std::uint64_t n = 0;
  for (const Sge& s : sges) n += s.length;
  return n;
}

struct RecvWqe {
  RecvWr wr;
  std::uint64_t length = 0;  // sum of the SGE lengths
};

struct SendWqe {
  SendWr wr;
  // UD: the AH's address vector, copied at post time as rxe's and mlx5's providers copy it
  // into the WQE, so an AH destroyed while its WRs are outstanding still routes them.
  AddressVector ud_route;
  std::uint64_t length = 0;  // bytes the operation moves (sum of SGEs, or the inline data)
  bool signaled = false;
  bool started = false;  // has PSNs: first_psn .. first_psn + packets - 1
  std::uint32_t first_psn = 0;
  std::uint32_t packets = 0;  // PSNs the operation uses (a READ: its response packets)
  bool complete = false;      // acknowledged (or failed); retired when it reaches the head
  WcStatus status = WcStatus::success;
  // Queued by the device itself, not the consumer: a tag-matching rendezvous's READ and FIN.
  // It never completes on the send CQ; a READ's end completes its tagged receive instead.
  bool internal = false;
  std::optional<Rendezvous> rendezvous;
};

}  // namespace softrdma::core
