#include "emulator/net/fault_filter.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "wire/ib_headers.hpp"
#include "wire/opcode.hpp"

namespace softrdma::net {

namespace {

// "0x1f" or "31".
template <class T>
std::optional<T> number(std::string_view v) {
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    v.remove_prefix(2);
    base = 16;
  }
  T x{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x, base);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return x;
}

bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
  });
}

// The opcode kinds by the flags of wire/'s opcode table (s9.2, table 35).
struct Family {
  std::string_view name;
  bool (*has)(const wire::OpcodeInfo&);
};
constexpr std::array<Family, 8> kFamilies = {{
    {"send", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::send); }},
    {"write", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::write); }},
    {"read", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::read) && i.is(wire::OpFlag::request); }},
    {"read_resp", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::read) && i.is(wire::OpFlag::response); }},
    {"ack", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::ack); }},
    {"atomic", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::atomic) && i.is(wire::OpFlag::request); }},
    {"atomic_ack",
     [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::atomic) && i.is(wire::OpFlag::response); }},
    {"cnp", [](const wire::OpcodeInfo& i) { return i.is(wire::OpFlag::cnp); }},
}};

}  // namespace

std::string FaultFilter::add_opcodes(std::string_view list) {
  restrict_opcodes_ = true;
  return for_each_listed(list, [this](std::string_view part) -> std::string {
    if (const auto byte = number<unsigned>(part)) {
      if (*byte > 0xFF) return std::string("opcode ").append(part) + " is more than one byte";
      opcodes_.set(*byte);
      return {};
    }
    for (const Family& f : kFamilies) {
      if (!same_name(part, f.name)) continue;
      for (std::size_t op = 0; op < wire::kOpcodeTable.size(); ++op)
        if (wire::kOpcodeTable[op].valid && f.has(wire::kOpcodeTable[op])) opcodes_.set(op);
      return {};
    }
    for (std::size_t op = 0; op < wire::kOpcodeTable.size(); ++op) {
      if (wire::kOpcodeTable[op].valid &&
          same_name(part, wire::opcode_name(wire::opcode(static_cast<std::uint8_t>(op))))) {
        opcodes_.set(op);
        return {};
      }
    }
    return std::string("unknown opcode '").append(part) +
           "' (send, write, read, read_resp, ack, atomic, atomic_ack, cnp, a name such as RC_SEND_ONLY, or 0x04)";
  });
}

std::string FaultFilter::add_qps(std::string_view list) {
  return for_each_listed(list, [this](std::string_view part) -> std::string {
    const auto qpn = number<std::uint32_t>(part);
    if (!qpn || *qpn > 0xFFFFFF) return std::string("'").append(part) + "' is not a 24-bit QP number";
    qps_.push_back(*qpn);
    return {};
  });
}

bool FaultFilter::matches(std::span<const std::uint8_t> payload) const {
  if (!restricts()) return true;
  if (payload.size() < wire::Bth::length) return false;
  if (restrict_opcodes_ && !opcodes_.test(wire::Bth::opcode::get(payload.data()))) return false;
  return qps_.empty() || std::find(qps_.begin(), qps_.end(), wire::Bth::dest_qp::get(payload.data())) != qps_.end();
}

}  // namespace softrdma::net
