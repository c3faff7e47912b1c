#include "emulator/host/loopback_address.hpp"

#include <cerrno>
#include <string>

namespace softrdma::host {

net::UdpOpenResult bind_first_free_loopback(std::uint16_t port) {
  for (int n = 1; n <= 254; ++n) {
    net::UdpOpenResult r = net::UdpBackend::open("127.0.0." + std::to_string(n), port);
    if (r.backend || r.errnum != EADDRINUSE) return r;  // bound, or failed for a reason the next address shares
  }
  net::UdpOpenResult r;
  r.errnum = EADDRINUSE;
  r.error = "no free address: port " + std::to_string(port) +
            " is in use on every address from 127.0.0.1 to 127.0.0.254 (the rdma_rxe module binds it on all "
            "addresses); choose an address explicitly";
  return r;
}

}  // namespace softrdma::host
