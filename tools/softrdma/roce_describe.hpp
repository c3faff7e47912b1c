// The fields of a checked RoCE frame that `softrdma dump` shows.
#pragma once

#include <span>
#include <string>

#include "tools/softrdma/record.hpp"
#include "wire/roce_frame.hpp"

namespace softrdma::dump {

// Adds addresses, BTH fields, every extension header present, payload length and the ICRC
// verdict to `r`. A GMP (a UD packet to or from QP1) also gets its MAD after the length:
// class (or, for Communication Management, `cm=` and the attribute: REQ, REP, RTU, REJ, MRA,
// DREQ, DREP, SIDR_REQ, SIDR_REP, ClassPortInfo, LAP, APR), method and transaction ID, then
// the CM message's comm IDs (lcid, rcid) or SIDR request ID; the service ID and, for an IP CM
// one (annex A11), its port space and port; a REQ's or REP's QPN and starting PSN and the
// REQ's IP CM addresses and ports (ipcm_src, ipcm_dst); a REJ's reason with its table 103
// name; an MRA's MRAed message and service timeout; a SIDR_REP's status, QPN and Q_Key.
void describe_roce(const wire::RoceFrame& f, Record& r);

std::string format_address(std::span<const std::uint8_t> addr);  // 4 bytes dotted, 16 bytes IPv6 text

}  // namespace softrdma::dump
