// The fields of a checked RoCE frame that `softrdma dump` shows.
#pragma once

#include "tools/softrdma/record.hpp"
#include "wire/roce_frame.hpp"

namespace softrdma::dump {

// Adds addresses, BTH fields, every extension header present, payload length and the ICRC
// verdict to `r`.
void describe_roce(const wire::RoceFrame& f, Record& r);

std::string format_address(std::span<const std::uint8_t> addr);  // 4 bytes dotted, 16 bytes IPv6 text

}  // namespace softrdma::dump
