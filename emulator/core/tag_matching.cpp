#include "emulator/core/tag_matching.hpp"

#include <algorithm>

namespace softrdma::core {
namespace {

std::uint64_t load_be(std::span<const std::uint8_t> bytes) {
  std::uint64_t value = 0;
  for (const std::uint8_t b : bytes) value = value << 8 | b;
  return value;
}

// ibv_post_srq_ops(3): a message matches an entry when its tag, masked by the entry's mask,
// equals the entry's tag.
bool matches(const TagEntry& e, std::uint64_t tag) { return (tag & e.mask) == e.tag; }

std::optional<std::uint32_t> find_match(const TagMatching& tm, std::uint64_t tag) {
  const auto it =
      std::find_if(tm.list.begin(), tm.list.end(), [&](std::uint32_t h) { return matches(tm.entries[h], tag); });
  if (it == tm.list.end()) return std::nullopt;
  return *it;
}

}  // namespace

Tmh read_tmh(std::span<const std::uint8_t> bytes) {
  return {bytes[0], static_cast<std::uint32_t>(load_be(bytes.subspan(4, 4))), load_be(bytes.subspan(8, 8))};
}

Rvh read_rvh(std::span<const std::uint8_t> bytes) {
  return {load_be(bytes.subspan(0, 8)), static_cast<std::uint32_t>(load_be(bytes.subspan(8, 4))),
          static_cast<std::uint32_t>(load_be(bytes.subspan(12, 4)))};
}

TmDecision route_message(const TagMatching& tm, std::span<const std::uint8_t> first, bool whole,
                         std::uint32_t max_rndv_hdr_size) {
  TmDecision d;
  // A message sent without a tag is never matched and is not "unexpected" either: it cannot
  // disorder tagged receives (tag_matching.md, IBV_TM_NO_TAG).
  if (first.empty() || first[0] == static_cast<std::uint8_t>(TmhOp::no_tag)) return d;
  d.route = TmRoute::unexpected;
  if (first.size() < kTmhLength) return d;  // too short to carry a tag: software sorts it out
  d.tmh = read_tmh(first);
  const auto op = static_cast<TmhOp>(d.tmh.op);
  const bool rendezvous =
      op == TmhOp::rendezvous && whole && first.size() >= kTmhLength + kRvhLength && first.size() <= max_rndv_hdr_size;
  if ((op != TmhOp::eager && !rendezvous) || !tm.matching()) return d;
  const auto handle = find_match(tm, d.tmh.tag);
  if (!handle) return d;
  d.route = op == TmhOp::eager ? TmRoute::eager : TmRoute::rendezvous;
  d.handle = *handle;
  if (rendezvous) d.rvh = read_rvh(first.subspan(kTmhLength));
  return d;
}

std::optional<std::uint32_t> add_tag(TagMatching& tm, const SrqOp& op, std::uint64_t length) {
  const auto free = std::find_if(tm.entries.begin(), tm.entries.end(), [](const TagEntry& e) { return !e.listed; });
  if (free == tm.entries.end()) return std::nullopt;
  free->buffer = {RecvWr{op.recv_wr_id, op.sg_list}, length};
  free->tag = op.tag;
  free->mask = op.mask;
  free->listed = true;
  const auto handle = static_cast<std::uint32_t>(free - tm.entries.begin());
  tm.list.push_back(handle);
  return handle;
}

bool remove_tag(TagMatching& tm, std::uint32_t handle) {
  if (handle >= tm.entries.size() || !tm.entries[handle].listed) return false;
  tm.entries[handle].listed = false;
  std::erase(tm.list, handle);
  return true;
}

RecvWqe take_tag(TagMatching& tm, std::uint32_t handle) {
  RecvWqe buffer = std::move(tm.entries[handle].buffer);
  remove_tag(tm, handle);
  return buffer;
}

}  // namespace softrdma::core
