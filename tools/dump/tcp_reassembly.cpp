#include "tools/dump/tcp_reassembly.hpp"

#include <algorithm>
#include <cstdio>

#include "wire/tcp.hpp"

namespace softrdma::dump {

std::string to_string(const TcpEndpoint& e) {
  char buf[64];
  const std::uint8_t* a = e.address.data();
  if (e.address_length == 4) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u:%u", a[0], a[1], a[2], a[3], unsigned{e.port});
    return buf;
  }
  std::string s = "[";
  for (std::size_t i = 0; i < 16; i += 2) {
    std::snprintf(buf, sizeof buf, i ? ":%x" : "%x", unsigned{a[i]} << 8 | a[i + 1]);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "]:%u", unsigned{e.port});
  return s + buf;
}

void TcpStreamReassembler::add(std::uint32_t seq, std::uint8_t flags, std::span<const std::uint8_t> payload,
                               const TcpDeliver& deliver) {
  if (closed_) return;
  const bool syn = flags & wire::Tcp::syn;
  if (!started_) {
    started_ = true;
    next_seq_ = syn ? seq + 1 : seq;
  }
  if (flags & wire::Tcp::rst) {
    closed_ = true;
    held_.clear();
    held_bytes_ = 0;
    return;
  }
  // The first data byte follows the SYN's own sequence number. Signed 32-bit distance from
  // the next expected byte: negative means (partly) old, already-delivered data.
  const std::uint32_t data_seq = syn ? seq + 1 : seq;
  const std::int64_t rel = static_cast<std::int32_t>(data_seq - next_seq_);
  const std::int64_t at = static_cast<std::int64_t>(delivered_) + rel;
  if (flags & wire::Tcp::fin) {
    const std::int64_t fin = at + static_cast<std::int64_t>(payload.size());
    if (fin >= static_cast<std::int64_t>(delivered_)) fin_at_ = static_cast<std::uint64_t>(fin);
  }
  if (rel <= 0) {
    const auto skip = static_cast<std::size_t>(-rel);
    if (skip < payload.size()) deliver_from(delivered_, payload.subspan(skip), deliver);
  } else if (!payload.empty()) {
    hold(static_cast<std::uint64_t>(at), payload);
  }
  deliver_held(deliver);
  if (fin_at_ && delivered_ >= *fin_at_) closed_ = true;
}

// Keeps a segment that lies beyond a gap; a retransmission of one already held is dropped.
void TcpStreamReassembler::hold(std::uint64_t at, std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t>& slot = held_[at];
  if (slot.size() >= payload.size()) return;
  if (held_bytes_ - slot.size() + payload.size() > max_held_) {
    refused_ += payload.size();
    if (slot.empty()) held_.erase(at);
    return;
  }
  held_bytes_ = held_bytes_ - slot.size() + payload.size();
  slot.assign(payload.begin(), payload.end());
}

void TcpStreamReassembler::deliver_from(std::uint64_t at, std::span<const std::uint8_t> bytes,
                                        const TcpDeliver& deliver) {
  // `at` <= delivered_: skip what was already handed out.
  const std::uint64_t skip = delivered_ - at;
  if (skip >= bytes.size()) return;
  bytes = bytes.subspan(static_cast<std::size_t>(skip));
  delivered_ += bytes.size();
  next_seq_ += static_cast<std::uint32_t>(bytes.size());
  deliver(bytes);
}

void TcpStreamReassembler::deliver_held(const TcpDeliver& deliver) {
  while (!held_.empty() && held_.begin()->first <= delivered_) {
    auto node = held_.extract(held_.begin());
    held_bytes_ -= node.mapped().size();
    deliver_from(node.key(), node.mapped(), deliver);
  }
}

TcpDirection TcpReassembler::add(const TcpSegment& s, const Deliver& deliver) {
  const auto key = std::minmax(s.source, s.destination);
  auto [it, inserted] = index_.try_emplace({key.first, key.second}, connections_.size());
  if (inserted) {
    connections_.push_back(
        Connection{{s.source, s.destination}, {TcpStreamReassembler(max_held_), TcpStreamReassembler(max_held_)}});
  }
  Connection& c = connections_[it->second];
  const TcpDirection d{it->second, c.ends[0] == s.source ? 0 : 1};
  c.sides[d.side].add(s.seq, s.flags, s.payload, [&](std::span<const std::uint8_t> bytes) { deliver(d, bytes); });
  return d;
}

}  // namespace softrdma::dump
