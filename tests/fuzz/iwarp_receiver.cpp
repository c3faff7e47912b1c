// Fuzzes the engine's iWARP receiver: the peer's half of a stream, cut into chunks, fed to a
// QP with a registered buffer (STag 0x100 at tagged offset 0x1000, 64 KiB, every access) and
// receive WQEs. Header bytes:
//   0: bit 0 CRCs negotiated
//   1..4: chunk sizes (each + 1), used in turn
// then the stream. Checks that whatever arrives, what the QP sends back (Read Responses, a
// Terminate) is a well-formed FPDU stream, and that it sends nothing after a Terminate.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "emulator/core/device.hpp"
#include "wire/iwarp/mpa_stream.hpp"

namespace {

namespace core = softrdma::core;

constexpr std::uint64_t kIova = 0x1000;
constexpr std::size_t kBuffer = 1 << 16;

struct Receiver {
  explicit Receiver(bool crc) : buffer(kBuffer) {
    core::DeviceConfig config;
    config.gids = {core::Gid{}};
    dev = std::make_unique<core::Device>(config, memory);
    const std::uint32_t pd = *dev->alloc_pd();
    cq = *dev->create_cq(1024);
    const std::uint32_t all = core::access::local_write | core::access::remote_write | core::access::remote_read;
    const core::MrKeys mr = *dev->reg_mr(pd, reinterpret_cast<std::uint64_t>(buffer.data()), kBuffer, kIova, all);
    if (mr.rkey != 0x100) std::abort();  // the seeds name this STag
    core::QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.cap = {64, 64, 2, 2, 0};
    qpn = dev->create_qp(init)->qpn;
    core::QpAttr attr;
    attr.qp_state = core::QpState::init;
    attr.qp_access_flags = all;
    dev->modify_qp(0, qpn, attr, core::qp_attr::state | core::qp_attr::access_flags);
    core::StreamParams params;
    params.crc = crc;
    params.ird = 4;
    dev->stream_attach(qpn, params);
    for (std::uint64_t i = 0; i < 8; ++i) {
      core::RecvWr r;
      r.wr_id = i;
      r.sg_list = {{kIova + i * 4096, 4096, mr.lkey}};
      dev->post_recv(qpn, r);
    }
    answers.start_full_operation(false, crc);
  }

  // Takes what the QP sends and checks it parses, with nothing after a Terminate.
  void drain() {
    softrdma::core::UninitialisedBytes out;
    while (dev->next_stream_ready())
      for (out.clear(); dev->stream_transmit(qpn, out); out.clear())
        answers.feed(out, [&](const wire::iwarp::MpaStreamItem& item) {
          if (terminated || item.kind != wire::iwarp::MpaItemKind::fpdu || (item.fpdu.crc_checked && !item.fpdu.crc_ok))
            std::abort();
          terminated = item.fpdu.message.opcode == wire::iwarp::RdmapOpcode::terminate;
        });
    std::vector<core::Wc> wcs(64);
    while (dev->poll_cq(cq, wcs) > 0) {
    }
    while (dev->next_stream_close()) {
    }
  }

  core::DirectMemory memory;
  std::vector<std::uint8_t> buffer;
  std::unique_ptr<core::Device> dev;
  std::uint32_t cq = 0, qpn = 0;
  wire::iwarp::MpaStreamDecoder answers;
  bool terminated = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t header = 5;
  if (size < header) return 0;
  Receiver r(data[0] & 1);
  std::span<const std::uint8_t> stream(data + header, size - header);
  for (std::size_t turn = 0; !stream.empty(); ++turn) {
    const std::size_t chunk = std::min<std::size_t>(stream.size(), data[1 + turn % 4] + 1u);
    r.dev->stream_receive(r.qpn, stream.first(chunk));
    stream = stream.subspan(chunk);
    r.drain();
  }
  r.dev->stream_lost(r.qpn);
  r.drain();
  return 0;
}
