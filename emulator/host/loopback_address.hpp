// The address a device takes when none is configured: the first free
// 127.0.0.N:4791 for N = 1..254, so two processes on one machine get .1 and .2 with no
// configuration, and each one's GID 0 (::ffff:127.0.0.N) tells the other where it is.
// Linux routes all of 127.0.0.0/8 to the loopback interface (RFC 1122 s3.2.1.3 reserves
// it), so no address has to be added for this.
#pragma once

#include <cstdint>

#include "emulator/net/udp_backend.hpp"

namespace softrdma::host {

net::UdpOpenResult bind_first_free_loopback(std::uint16_t port = net::kRoceV2Port);

}  // namespace softrdma::host
