#include "verbs-shim/private_device.hpp"

#include "verbs-shim/host_link.hpp"

extern "C" __attribute__((visibility("default"))) const softrdma::shim::PrivateDevice* softrdma_private_device(
    const char* preferred_ip) {
  using namespace softrdma::shim;
  if (preferred_ip != nullptr) prefer_address(preferred_ip);
  const BoundDevice& bound = bound_device();
  static const PrivateDevice device = [&bound] {
    PrivateDevice d;
    d.link = bound.link;
    if (bound.link != nullptr)
      d.address = bound.link->address().c_str();
    else
      d.error = bound.error.c_str();
    return d;
  }();
  return &device;
}
