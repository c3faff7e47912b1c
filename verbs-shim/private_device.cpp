#include "verbs-shim/private_device.hpp"

#include "verbs-shim/host_link.hpp"

extern "C" __attribute__((visibility("default"))) const softrdma::shim::PrivateDevice* softrdma_private_device(
    const char* preferred_ip) {
  using namespace softrdma::shim;
  if (preferred_ip != nullptr) prefer_address(preferred_ip);
  static const PrivateDevice device = [] {
    const BoundDevice* iwarp = iwarp_device();
    const BoundDevice& bound = iwarp != nullptr ? *iwarp : bound_device();
    PrivateDevice d;
    d.link = bound.link;
    d.iwarp = iwarp != nullptr;
    if (bound.link != nullptr)
      d.address = bound.link->address().c_str();
    else
      d.error = bound.error.c_str();
    return d;
  }();
  return &device;
}
