// Which packets a direction's faults apply to (SOFTRDMA_FAULTS "opcode=" and "qp=" items): by
// BTH opcode and by destination QP, read from the BTH at the start of the UDP payload (IBTA
// vol. 1 s9.2). A packet matches when it passes both lists; an empty list passes everything.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace softrdma::net {

// Calls f(part) on each part of a '+'-separated list ("a+b+c") until f returns an error text;
// an empty list or an empty part is an error too. Returns the error text, or empty.
template <class F>
std::string for_each_listed(std::string_view list, F f) {
  if (list.empty()) return "an empty list";
  for (;;) {
    const std::size_t plus = list.find('+');
    const std::string_view part = list.substr(0, plus);
    if (part.empty()) return "an empty item in the list";
    if (std::string err = f(part); !err.empty()) return err;
    if (plus == std::string_view::npos) return {};
    list.remove_prefix(plus + 1);
  }
}

class FaultFilter {
 public:
  // "send+ack", "RC_RDMA_READ_REQUEST", "0x0c": '+'-separated opcode families (send, write,
  // read, read_resp, ack, atomic, atomic_ack, cnp: every transport's opcodes of that kind),
  // opcode names as `softrdma dump` prints them (any case), or opcode bytes. An error text for
  // a person, or empty.
  std::string add_opcodes(std::string_view list);
  // "0x11+18": destination QPNs (24 bits), '+'-separated. An error text, or empty.
  std::string add_qps(std::string_view list);

  bool restricts() const { return restrict_opcodes_ || !qps_.empty(); }
  // Whether the packet whose UDP payload is `payload` is one the faults apply to. A payload too
  // short for a BTH matches only an unrestricted filter.
  bool matches(std::span<const std::uint8_t> payload) const;

 private:
  std::bitset<256> opcodes_;
  bool restrict_opcodes_ = false;
  std::vector<std::uint32_t> qps_;
};

}  // namespace softrdma::net
