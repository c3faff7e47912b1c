// Fuzzes tag matching end to end: SENDs of arbitrary payloads (each starting, or not, with a
// TMH and an RVH) from a plain RC QP to one on a tag-matching SRQ, with tagged buffers and
// ordinary WQEs posted, every packet moved across until both sides are quiet. Header bytes:
//   0: tagged buffers (mod 5), tags 1..n, each matching only itself
//   1: ordinary SRQ WQEs (mod 8)
//   2: bit 0 path MTU 256 (else 1024), so a longer message spans packets
// then messages, each a length byte (x 8 bytes) and its payload, cut short where the input ends.
// Checks that the routing never names a buffer that was not posted: a match completes a tagged
// buffer's wr_id, anything else an ordinary WQE's; after each message software reports its
// unexpected count, as tag_matching.md asks.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "emulator/core/device.hpp"

namespace {

namespace core = softrdma::core;

constexpr std::size_t kBuffer = 1 << 16;
constexpr std::uint64_t kTaggedWrId = 100, kOrdinaryWrId = 200;

core::Gid gid_of(std::uint8_t last) { return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, last}; }

struct Side {
  explicit Side(std::uint8_t last) : buffer(kBuffer) {
    core::DeviceConfig config;
    config.gids = {gid_of(last)};
    dev = std::make_unique<core::Device>(config, memory);
    pd = *dev->alloc_pd();
    cq = *dev->create_cq(4096);
    const std::uint32_t all = core::access::local_write | core::access::remote_write | core::access::remote_read;
    lkey = dev->reg_mr(pd, addr(0), kBuffer, addr(0), all)->lkey;
  }
  std::uint64_t addr(std::size_t offset) { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }

  // Creates an RC QP (on `srq` when non-zero) and moves it to RTS towards `peer`.
  void bring_up(const Side& peer, std::uint32_t srq, core::Mtu mtu) {
    using namespace core::qp_attr;
    core::QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.srq = srq;
    init.cap = {64, srq ? 0u : 64u, 2, 2, 0};
    qpn = dev->create_qp(init)->qpn;
    core::QpAttr a;
    a.qp_state = core::QpState::init;
    a.qp_access_flags = core::access::local_write | core::access::remote_write | core::access::remote_read;
    dev->modify_qp(0, qpn, a, state | pkey_index | port | access_flags);
    a.qp_state = core::QpState::rtr;
    a.path_mtu = mtu;
    a.dest_qp_num = peer.dev->config().first_qpn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.dgid = peer.dev->config().gids[0];
    dev->modify_qp(0, qpn, a, state | av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer);
    a.qp_state = core::QpState::rts;
    a.timeout = 14;
    a.retry_cnt = 1;
    a.rnr_retry = 1;  // a message no WQE takes ends the QP soon, not after 7 waits
    a.max_rd_atomic = 4;
    dev->modify_qp(0, qpn, a, state | timeout | sq_psn | retry_cnt | rnr_retry | max_qp_rd_atomic);
  }

  core::DirectMemory memory;
  std::vector<std::uint8_t> buffer;
  std::unique_ptr<core::Device> dev;
  std::uint32_t pd = 0, cq = 0, qpn = 0, lkey = 0;
};

struct Pair {
  Pair(unsigned tags, unsigned ordinary, core::Mtu mtu) : a(1), b(2) {
    tm_cq = *b.dev->create_cq(4096);
    srq = *b.dev->create_srq(b.pd, 64, 2, 0, std::nullopt, core::Device::TmSrq{tm_cq, 8, 8});
    a.bring_up(b, 0, mtu);
    b.bring_up(a, srq, mtu);
    for (unsigned i = 0; i < tags; ++i) {
      core::SrqOp op;
      op.recv_wr_id = kTaggedWrId + i;
      op.sg_list = {{b.addr(4096 * i), 4096, b.lkey}};
      op.tag = i + 1;
      op.mask = ~std::uint64_t{0};
      if (b.dev->post_srq_ops(srq, op) != 0) std::abort();
    }
    for (unsigned i = 0; i < ordinary; ++i) {
      core::RecvWr r;
      r.wr_id = kOrdinaryWrId + i;
      r.sg_list = {{b.addr(32768 + 4096 * i), 4096, b.lkey}};
      if (b.dev->post_srq_recv(srq, r) != 0) std::abort();
    }
  }

  // Moves packets both ways, with time passing, until neither side has one to send.
  void exchange() {
    for (int round = 0; round < 64; ++round) {
      bool moved = false;
      for (auto [from, to] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        while (auto p = from->dev->transmit(now)) {
          to->dev->receive(now,
                           {p->bytes, from->dev->config().gids[0], to->dev->config().gids[0], p->route.src_port, true});
          moved = true;
        }
      }
      now += 1'000'000;
      a.dev->advance(now);
      b.dev->advance(now);
      if (!moved && !a.dev->next_deadline() && !b.dev->next_deadline()) return;
    }
  }

  // Checks b's TM completions; counts the unexpected ones and reports the count back.
  void check_completions() {
    std::vector<core::Wc> wcs(64);
    for (int n; (n = b.dev->poll_cq(tm_cq, wcs)) > 0;) {
      for (int i = 0; i < n; ++i) {
        const core::Wc& wc = wcs[static_cast<std::size_t>(i)];
        const bool tagged = wc.wr_id >= kTaggedWrId && wc.wr_id < kTaggedWrId + 8;
        const bool ordinary = wc.wr_id >= kOrdinaryWrId && wc.wr_id < kOrdinaryWrId + 8;
        const bool matched = wc.wc_flags & (core::wc_flags::tm_match | core::wc_flags::tm_data_valid);
        if (wc.opcode == core::WcOpcode::tm_recv && wc.status == core::WcStatus::success && matched != tagged)
          std::abort();
        if (wc.opcode == core::WcOpcode::tm_no_tag && !ordinary) std::abort();
        if (wc.opcode == core::WcOpcode::tm_recv && !matched && wc.status == core::WcStatus::success) ++unexpected;
      }
    }
    core::SrqOp sync;
    sync.opcode = core::SrqOpcode::tag_sync;
    sync.flags = core::srq_op_flags::tm_sync;
    sync.unexpected_cnt = unexpected;
    if (b.dev->post_srq_ops(srq, sync) != 0) std::abort();
    std::vector<core::Wc> rest(64);
    while (a.dev->poll_cq(a.cq, rest) > 0) {
    }
    while (b.dev->poll_cq(b.cq, rest) > 0) {
    }
  }

  Side a, b;
  std::uint32_t tm_cq = 0, srq = 0, unexpected = 0;
  core::Time now = 1'000'000;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t header = 3;
  if (size < header) return 0;
  Pair p(data[0] % 5, data[1] % 8, (data[2] & 1) ? core::Mtu::mtu256 : core::Mtu::mtu1024);
  std::size_t at = header;
  for (std::uint64_t id = 0; at < size; ++id) {
    const std::size_t wanted = data[at++] * 8u;
    const std::size_t length = std::min(wanted, size - at);
    std::copy_n(data + at, length, p.a.buffer.begin());
    at += length;
    core::SendWr w;
    w.wr_id = id;
    w.sg_list = {{p.a.addr(0), static_cast<std::uint32_t>(length), p.a.lkey}};
    if (p.a.dev->post_send(p.now, p.a.qpn, w) != 0) break;
    p.exchange();
    p.check_completions();
  }
  return 0;
}
