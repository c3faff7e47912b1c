#include "emulator/net/capture_stage.hpp"

#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <system_error>

#include "emulator/core/copy_bytes.hpp"
#include "emulator/core/roce_headers.hpp"
#include "emulator/net/roce_encapsulation.hpp"
#include "wire/udp.hpp"

namespace softrdma::net {

namespace {

// The stages open in this process, which the atexit handler drains: a program that exits
// without destroying its host (the verbs shim never does) still gets a whole capture.
// A forked child has the stages but not their writer threads: it leaves them alone.
struct OpenStages {
  std::mutex mutex;
  std::set<CaptureStage*> stages;
  pid_t owner = ::getpid();
};

OpenStages& open_stages() {
  static OpenStages* s = new OpenStages;  // outlives static destructors
  return *s;
}

void flush_open_stages() {
  OpenStages& s = open_stages();
  if (s.owner != ::getpid()) return;
  std::lock_guard lock(s.mutex);
  for (CaptureStage* stage : s.stages) {
    stage->flush();
    stage->report_drops();
  }
}

}  // namespace

wire::MacAddress mac_for(const core::Gid& gid) {
  if (core::is_ipv4_mapped(gid)) return {0x02, 0x00, gid[12], gid[13], gid[14], gid[15]};
  return {0x02, gid[11], gid[12], gid[13], gid[14], gid[15]};
}

CaptureOpen CaptureStage::open(const std::string& path) {
  std::string error;
  // A buffer that holds a batch of frames: few write() calls.
  std::optional<PcapWriter> writer = PcapWriter::create(path, kLinkEthernet, error, 1 << 20);
  if (!writer) return {nullptr, "cannot write capture " + path + ": " + error};
  // The file header goes out now: the file is a valid, empty capture from the start.
  if (!writer->flush()) return {nullptr, "cannot write capture " + path + ": " + std::strerror(errno)};
  std::unique_ptr<CaptureStage> stage(new CaptureStage(path, std::move(*writer)));
  try {
    stage->thread_ = std::thread([s = stage.get()] { s->run(); });
  } catch (const std::system_error& e) {
    stage->closed_ = true;
    return {nullptr, "cannot write capture " + path + ": cannot start its writer thread: " + e.what()};
  }
  static const bool registered = [] { return std::atexit(flush_open_stages) == 0; }();
  (void)registered;
  OpenStages& open = open_stages();
  std::lock_guard lock(open.mutex);
  open.stages.insert(stage.get());
  return {std::move(stage), {}};
}

CaptureStage::CaptureStage(std::string path, PcapWriter writer) : path_(std::move(path)), writer_(std::move(writer)) {
  queue_.frames.reserve(1024);
  queue_.copied.reserve(1 << 20);
}

CaptureStage::~CaptureStage() { close(); }

std::uint64_t CaptureStage::wall_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

void CaptureStage::record(std::uint64_t time_ns, Direction direction, const core::Endpoints& route,
                          std::uint16_t dst_port, std::span<const std::uint8_t> payload) {
  std::lock_guard lock(mutex_);
  record_locked(time_ns, direction, route, dst_port, payload);
}

CaptureStage::QueuedFrame* CaptureStage::enqueue_locked(std::uint64_t time_ns, std::size_t frame_len) {
  if (closing_ || queue_.bytes + sizeof(PcapRecordHeader) + frame_len > kMaxQueuedBytes) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  QueuedFrame& f = queue_.frames.emplace_back();
  f.record = PcapRecordHeader::make(time_ns, static_cast<std::uint32_t>(frame_len));
  queue_.bytes += sizeof(PcapRecordHeader) + frame_len;
  return &f;
}

void CaptureStage::record_locked(std::uint64_t time_ns, Direction direction, const core::Endpoints& route,
                                 std::uint16_t dst_port, std::span<const std::uint8_t> payload,
                                 std::vector<std::uint8_t>* take) {
  const wire::EthernetRepr eth{mac_for(route.dst), mac_for(route.src), -1};
  const std::size_t headers_len = roce_headers_length(eth, route);
  QueuedFrame* queued = enqueue_locked(time_ns, headers_len + payload.size());
  if (queued == nullptr) return;
  QueuedFrame& f = *queued;
  f.headers_length = static_cast<std::uint8_t>(headers_len);
  // The header the engine sealed the ICRC over, with the TTL the socket really sends: the
  // route's hop limit, the kernel's default (64) for 0; a received packet's is not reported
  // to us.
  core::Endpoints as_sent = route;
  as_sent.hop_limit = direction == Direction::tx && route.hop_limit != 0 ? route.hop_limit : 64;
  write_roce_headers(eth, as_sent, dst_port, payload, f.headers.data());
  if (take != nullptr) {
    f.taken = std::move(*take);
  } else {
    f.copied_at = queue_.copied.size();
    f.copied_length = payload.size();
    queue_.copied.resize(f.copied_at + payload.size());
    core::copy_bytes(queue_.copied.data() + f.copied_at, payload.data(), payload.size());  // see copy_bytes.hpp
  }
}

void CaptureStage::record_frame(std::uint64_t time_ns, std::span<const std::uint8_t> frame) {
  {
    std::lock_guard lock(mutex_);
    QueuedFrame* queued = enqueue_locked(time_ns, frame.size());
    if (queued == nullptr) return;
    QueuedFrame& f = *queued;
    f.copied_at = queue_.copied.size();
    f.copied_length = frame.size();
    queue_.copied.resize(f.copied_at + frame.size());
    core::copy_bytes(queue_.copied.data() + f.copied_at, frame.data(), frame.size());
  }
  commit();
}

void CaptureStage::commit() { wake_.notify_one(); }

void CaptureStage::flush() {
  std::unique_lock lock(mutex_);
  wake_.notify_one();
  drained_.wait(lock, [&] { return (queue_.frames.empty() && !busy_) || closed_; });
}

void CaptureStage::record_tx(std::span<core::TxPacket> packets) {
  if (packets.empty()) return;
  const std::uint64_t now = wall_clock_ns();
  {
    std::lock_guard lock(mutex_);
    for (core::TxPacket& p : packets) record_locked(now, Direction::tx, p.route, wire::kRoceV2Port, p.bytes, &p.bytes);
  }
  commit();
}

void CaptureStage::record_rx(std::span<const core::RxPacket> packets, std::uint16_t local_port) {
  if (packets.empty()) return;
  const std::uint64_t now = wall_clock_ns();
  {
    std::lock_guard lock(mutex_);
    for (const core::RxPacket& p : packets) {
      core::Endpoints route;
      route.src = p.src_gid;
      route.dst = p.dst_gid;
      route.src_port = p.src_port;
      route.ipv4_id = p.ipv4_id;
      record_locked(now, Direction::rx, route, local_port, p.bytes);
    }
  }
  commit();
}

void CaptureStage::run() {
  Queue batch;
  batch.frames.reserve(1024);
  batch.copied.reserve(1 << 20);
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return !queue_.frames.empty() || closing_; });
    if (queue_.frames.empty()) break;  // closing, and everything is written
    std::swap(batch, queue_);          // queue_ takes the empty batch's buffers, their capacity kept
    busy_ = true;
    lock.unlock();
    if (write_batch(batch)) {
      written_.fetch_add(batch.frames.size(), std::memory_order_relaxed);
    } else {
      // A short or failed write leaves the file's end unknown: the batch counts as lost.
      const int err = errno;
      dropped_.fetch_add(batch.frames.size(), std::memory_order_relaxed);
      lock.lock();
      if (error_.empty()) error_ = std::strerror(err);
      lock.unlock();
    }
    batch.frames.clear();  // frees the sent packets' buffers
    batch.copied.clear();
    batch.bytes = 0;
    lock.lock();
    busy_ = false;
    drained_.notify_all();
  }
}

bool CaptureStage::write_batch(const Queue& batch) {
  // Three pieces a frame (record header, synthesised headers, payload), IOV_MAX at a time.
  constexpr std::size_t kMaxIov = IOV_MAX;
  iovec iov[kMaxIov];
  const int fd = writer_->fd();
  std::size_t n = 0;
  const auto write_out = [&]() {
    for (std::size_t first = 0; first < n;) {
      const ssize_t w = ::writev(fd, iov + first, static_cast<int>(std::min(n - first, kMaxIov)));
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      if (w == 0) {
        errno = EIO;
        return false;
      }
      // Skips what was written; a partial piece keeps its rest.
      for (auto left = static_cast<std::size_t>(w); left > 0;) {
        if (left >= iov[first].iov_len) {
          left -= iov[first++].iov_len;
        } else {
          iov[first].iov_base = static_cast<std::uint8_t*>(iov[first].iov_base) + left;
          iov[first].iov_len -= left;
          left = 0;
        }
      }
    }
    n = 0;
    return true;
  };
  for (const QueuedFrame& f : batch.frames) {
    if (n + 3 > kMaxIov && !write_out()) return false;
    const std::uint8_t* payload = f.taken.empty() ? batch.copied.data() + f.copied_at : f.taken.data();
    const std::size_t payload_len = f.taken.empty() ? f.copied_length : f.taken.size();
    iov[n++] = {const_cast<PcapRecordHeader*>(&f.record), sizeof f.record};
    iov[n++] = {const_cast<std::uint8_t*>(f.headers.data()), f.headers_length};
    if (payload_len != 0) iov[n++] = {const_cast<std::uint8_t*>(payload), payload_len};
  }
  return write_out();
}

void CaptureStage::close() {
  {
    std::lock_guard lock(mutex_);
    if (closing_) return;
    closing_ = true;
  }
  {
    OpenStages& open = open_stages();
    std::lock_guard lock(open.mutex);
    open.stages.erase(this);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  writer_.reset();  // pcap_dump_close
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  drained_.notify_all();
  report_drops();
}

void CaptureStage::report_drops() {
  const std::uint64_t dropped = dropped_.load();
  if (dropped == 0) return;
  std::fprintf(stderr, "softrdma: capture %s: %llu frames dropped (%s)\n", path_.c_str(),
               static_cast<unsigned long long>(dropped), error_.empty() ? "the writer fell behind" : error_.c_str());
}

}  // namespace softrdma::net
