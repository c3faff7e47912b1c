// Tag matching on a shared receive queue: the MPI-style offload rdma-core defines
// (Documentation/tag_matching.md, ibv_post_srq_ops(3)). It rides on plain RC SENDs, so
// nothing here is on the IBTA wire: a SEND's payload starts with a tag-matching header (TMH),
// and a rendezvous request adds a rendezvous header (RVH) naming the data to READ.
//
// A tag-matching SRQ holds a list of tagged buffers besides its ordinary receive WQEs. A
// message whose tag matches a listed buffer is placed there without its TMH (eager) or READ
// into it from the sender (rendezvous, then a FIN SEND back); any other message goes whole
// into an ordinary WQE as "unexpected". After an unexpected message no tag matches until
// software reports, with IBV_OPS_TM_SYNC, that it has handled every unexpected message: a
// buffer it posts meanwhile may be meant for a message it has not seen yet.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "emulator/core/tm_headers.hpp"
#include "emulator/core/verbs_types.hpp"
#include "emulator/core/wqe.hpp"

namespace softrdma::core {

struct TagEntry {
  RecvWqe buffer;  // wr.wr_id is the ADD's recv_wr_id
  std::uint64_t tag = 0;
  std::uint64_t mask = 0;
  bool listed = false;  // in the matching list; a free slot otherwise
};

struct TagMatching {
  std::vector<TagEntry> entries;   // by handle; max_num_tags of them
  std::deque<std::uint32_t> list;  // listed handles, oldest first: the first match wins
  std::uint32_t unexpected = 0;    // unexpected messages delivered so far (wraps)
  std::uint32_t reported = 0;      // the count software last reported with tm_sync
  bool matching() const { return unexpected == reported; }
};

// How a message that starts with `first` (its first packet's payload) is received.
enum class TmRoute : std::uint8_t { no_tag, unexpected, eager, rendezvous };
struct TmDecision {
  TmRoute route = TmRoute::no_tag;
  std::uint32_t handle = 0;  // eager, rendezvous: the matched entry
  Tmh tmh;
  Rvh rvh;
};
// `whole`: the first packet is the whole message. A rendezvous request must be one packet of at
// most `max_rndv_hdr_size` bytes to be matched; software gets any other.
TmDecision route_message(const TagMatching& tm, std::span<const std::uint8_t> first, bool whole,
                         std::uint32_t max_rndv_hdr_size);

// The tag-matching side of a receive in progress on a QP (Qp::recv): what its completion says.
struct TmReceive {
  WcOpcode opcode = WcOpcode::recv;
  std::uint32_t last_flags = 0;  // wc_flags of the completion at the message's end
  std::uint32_t skip = 0;        // bytes of the first packet not placed (a matched TMH)
  Tmh tmh;
};

// The list operations: add returns the new entry's handle (nullopt when the list is full);
// remove is false for a handle not listed (consumed by a match, or never added); take_tag
// unlists a matched entry and hands over its buffer.
std::optional<std::uint32_t> add_tag(TagMatching& tm, const SrqOp& op, std::uint64_t length);
bool remove_tag(TagMatching& tm, std::uint32_t handle);
RecvWqe take_tag(TagMatching& tm, std::uint32_t handle);

}  // namespace softrdma::core
