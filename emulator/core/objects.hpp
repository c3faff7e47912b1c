// The verbs objects other than QPs (IBTA vol. 1 ch. 10 and 11): protection domains, memory
// regions and windows, completion queues, shared receive queues and address handles.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "emulator/core/tag_matching.hpp"
#include "emulator/core/verbs_types.hpp"
#include "emulator/core/wqe.hpp"

namespace softrdma::core {

struct Pd {
  std::uint32_t users = 0;  // objects created in it: dealloc_pd is EBUSY until they are gone
};

// A memory region (MR) or memory window (MW): a range of iova addresses backed by host
// memory, reached by a key. An MR's lkey and rkey are the same number.
struct Region {
  enum class Kind : std::uint8_t { mr, mw_type1, mw_type2 };
  Kind kind = Kind::mr;
  std::uint32_t pd = 0;
  std::uint32_t key = 0;   // handle << 8 | an 8-bit key the owner may change (s10.6.7.3)
  std::uint64_t iova = 0;  // first address; 0 for a zero-based region
  std::uint64_t length = 0;
  std::uint64_t host = 0;      // host address of `iova`
  std::uint32_t access = 0;    // access:: flags
  bool valid = false;          // an MR from registration until invalidated; an MW while bound
  std::uint32_t bound_qp = 0;  // a type 2 MW: the only QP that may use it (s10.6.7.2.2)
  std::uint32_t parent = 0;    // an MW: the MR handle it is bound to
  std::uint32_t windows = 0;   // an MR: windows bound to it
};

struct Cq {
  std::uint32_t capacity = 0;
  std::deque<Wc> entries;
  bool armed = false;  // req_notify_cq: the next (solicited) completion raises an event
  bool solicited_only = false;
  bool overflowed = false;  // s11.4.2.1: an overflow is a CQ error, reported once
  bool listed = false;      // in Device's list of CQs with new completions
  std::uint32_t users = 0;  // QPs that complete into it
};

// An XRC domain (IBTA vol. 1 annex A14): the scope in which XRC targets find XRC SRQs.
struct Xrcd {
  std::uint32_t users = 0;  // XRC SRQs and targets in it: dealloc_xrcd is EBUSY until they are gone
};

struct Srq {
  std::uint32_t pd = 0;
  // An XRC or tag-matching SRQ: the CQ its receives complete into (a basic SRQ completes into
  // the receiving QP's CQ); 0 for a basic SRQ. An XRC SRQ's domain; 0 for the others.
  std::uint32_t xrcd = 0;
  std::uint32_t cq = 0;
  std::uint32_t max_wr = 0;
  std::uint32_t max_sge = 0;
  std::uint32_t limit = 0;  // armed when non-zero: fewer WQEs than this raises an event (s10.2.9.3)
  std::deque<RecvWqe> queue;
  std::optional<TagMatching> tm;  // a tag-matching SRQ's list of tagged buffers
  std::uint32_t users = 0;
};

struct Ah {
  std::uint32_t pd = 0;
  AddressVector av;
};

}  // namespace softrdma::core
