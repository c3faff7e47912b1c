// The headers a tag-matching message starts with (rdma-core's infiniband/tm_types.h; no IBTA
// wire format: they are the payload of an RC SEND), and the rendezvous a responder finishes.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace softrdma::core {

// TMH opcodes (infiniband/tm_types.h).
enum class TmhOp : std::uint8_t { no_tag = 0, rendezvous = 1, fin = 2, eager = 3 };

constexpr std::size_t kTmhLength = 16;  // opcode, 3 reserved, app_ctx (be32), tag (be64)
constexpr std::size_t kRvhLength = 16;  // va (be64), rkey (be32), length (be32)

struct Tmh {
  std::uint8_t op = 0;
  std::uint32_t app_ctx = 0;
  std::uint64_t tag = 0;
};

struct Rvh {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;
};

// What the responder leaves for the completer when it matched a rendezvous request: the READ it
// queued on the QP's send queue fills the matched buffer; then the receive completes and a FIN goes back.
struct Rendezvous {
  std::uint32_t cq = 0;
  std::uint64_t recv_wr_id = 0;
  std::uint32_t length = 0;
  std::array<std::uint8_t, kTmhLength + kRvhLength> fin{};  // the request's TMH and RVH, opcode FIN
};

Tmh read_tmh(std::span<const std::uint8_t> bytes);  // bytes: at least kTmhLength
Rvh read_rvh(std::span<const std::uint8_t> bytes);  // bytes: at least kRvhLength

}  // namespace softrdma::core
