// What an rdma_cm consumer has made before it connects or accepts on an iWARP device: a PD, one
// CQ for both queues, an MR over its buffer with local write and remote read and write, and an
// RC QP in INIT. Shared by the iWARP host tests, iwarp_rping and iwarp_bw_bench.
#pragma once

#include <cstdint>
#include <span>

#include "emulator/core/device.hpp"

namespace test {

struct IwarpConsumerObjects {
  std::uint32_t pd = 0, cq = 0, qpn = 0;
  softrdma::core::MrKeys mr;
};

inline IwarpConsumerObjects create_consumer_objects(softrdma::core::Device& d, std::span<std::uint8_t> buffer,
                                                    std::uint32_t cqe, const softrdma::core::QpCap& cap) {
  namespace core = softrdma::core;
  const std::uint32_t all = core::access::local_write | core::access::remote_write | core::access::remote_read;
  IwarpConsumerObjects o;
  o.pd = *d.alloc_pd();
  o.cq = *d.create_cq(cqe);
  const auto host = reinterpret_cast<std::uint64_t>(buffer.data());
  o.mr = *d.reg_mr(o.pd, host, buffer.size(), host, all);
  core::QpInitAttr init;
  init.pd = o.pd;
  init.send_cq = init.recv_cq = o.cq;
  init.cap = cap;
  o.qpn = d.create_qp(init)->qpn;
  core::QpAttr attr;
  attr.qp_state = core::QpState::init;
  attr.port_num = 1;
  attr.qp_access_flags = all;
  namespace mask = core::qp_attr;
  d.modify_qp(0, o.qpn, attr, mask::state | mask::pkey_index | mask::port | mask::access_flags);
  return o;
}

}  // namespace test
