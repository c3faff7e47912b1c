// The fields of a decoded iWARP item (MPA Request/Reply, FPDU, or stream error) that
// `softrdma dump` shows.
#pragma once

#include "tools/dump/iwarp_capture.hpp"
#include "tools/softrdma/record.hpp"

namespace softrdma::dump {

void describe_iwarp(const IwarpCaptureFrame& f, Record& r);

}  // namespace softrdma::dump
