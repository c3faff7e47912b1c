// The capture stage (docs/tools.md, "Captures"): SOFTRDMA_CAPTURE=FILE writes every packet the
// device sends and receives to a pcap file (libpcap, link type Ethernet, nanosecond
// timestamps), as it is on the wire. The `udp` backend sees only UDP payloads (BTH..ICRC), so
// the stage synthesises the layers below as our socket sends them:
// - Ethernet: locally administered unicast MACs derived from the IP addresses (mac_for()):
//   IPv4 a.b.c.d -> 02:00:a:b:c:d; IPv6 -> 02 followed by the last five bytes of the
//   address (::1 -> 02:00:00:00:00:01). Loopback has no MACs; these only make the frames
//   Ethernet frames Wireshark decodes, and tell the two ends apart.
// - IPv4: ID 0, DF, TTL the route's hop limit (64 when 0, as the socket does; always 64 on
//   receive, where the socket does not report it), TOS the traffic class, header checksum
//   computed; UDP checksum 0 (the socket sets SO_NO_CHECK).
// - IPv6: hop limit as above, traffic class and flow label, UDP checksum computed (RFC 8200
//   s8.1 requires one; the socket computes it).
// The ICRC the engine sealed is over exactly these headers (core/roce_headers.hpp), so it
// verifies in the file.
//
// Writing is off the packet path: record_tx() queues each sent packet's own buffer with the
// headers it synthesises (no copy of the payload), record_rx() copies a received payload
// (the backend reuses its receive buffers), and a writer thread of the stage's own hands
// each batch to the kernel as whole pcap records with writev(): no copy in user space on the
// way to the file for what the device sends. libpcap creates the file and its header.
// The queue holds at most kMaxQueuedBytes; when the writer falls that far behind (a slow
// disk), further frames are dropped and counted in frames_dropped, as are frames the file
// cannot take (a failed flush: disk full, I/O error). pcap has no record that could carry
// such a count: the counters (HostStats::capture) hold it, and closing the stage names it
// on stderr ("softrdma: capture FILE: N frames dropped (...)").
// A capture is complete when the program exits normally, even one whose host is never
// destroyed (the verbs shim's): close() drains the queue, and an atexit handler drains every
// stage still open. Frames recorded after that, or on _exit() or a fatal signal, are lost.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/core/uninitialised_bytes.hpp"
#include "emulator/net/pcap_file.hpp"
#include "wire/ethernet.hpp"

namespace softrdma::net {

struct CaptureCounters {
  std::uint64_t frames_written = 0;  // frames written to the file (flushed)
  std::uint64_t frames_dropped = 0;  // frames lost: the writer fell behind, or the file refused them
};

enum class Direction : std::uint8_t { tx, rx };

// The MAC the stage gives the host at `gid` (see above).
wire::MacAddress mac_for(const core::Gid& gid);

class CaptureStage;

// The queue is written over at once: no zero-fill first.
using CaptureBuffer = core::UninitialisedBytes;

struct CaptureOpen {
  std::unique_ptr<CaptureStage> stage;  // null on failure
  std::string error;                    // on failure: "cannot write capture FILE: reason"
};

class CaptureStage {
 public:
  static constexpr std::size_t kMaxQueuedBytes = 64 << 20;

  static CaptureOpen open(const std::string& path);

  CaptureStage(const CaptureStage&) = delete;
  CaptureStage& operator=(const CaptureStage&) = delete;
  ~CaptureStage();  // close()s

  // One packet between `route`'s addresses: UDP from route.src_port to `dst_port` carrying
  // `payload` (BTH..ICRC). Queued; the writer thread writes it after the next commit().
  void record(std::uint64_t time_ns, Direction direction, const core::Endpoints& route, std::uint16_t dst_port,
              std::span<const std::uint8_t> payload);
  // A whole frame made elsewhere (the iWARP device's TCP segments, net/tcp_stream_capture.hpp),
  // copied and queued as it is; committed.
  void record_frame(std::uint64_t time_ns, std::span<const std::uint8_t> frame);
  // Wakes the writer for what was recorded (once per burst).
  void commit();
  // Waits until everything recorded so far is in the file.
  void flush();

  // A burst, stamped with the time now, then committed: the packets the backend dealt with
  // (their bytes are taken: the packets are left empty), and the packets it received on local
  // port `local_port`.
  void record_tx(std::span<core::TxPacket> packets);
  void record_rx(std::span<const core::RxPacket> packets, std::uint16_t local_port);

  // Drains the queue, stops the writer and closes the file; says on stderr how many frames
  // were dropped, if any. Later records are counted as dropped.
  void close();

  // Says on stderr how many frames were dropped, if any (close() and the atexit handler do).
  void report_drops();

  CaptureCounters counters() const { return {written_.load(), dropped_.load()}; }
  const std::string& path() const { return path_; }

  static std::uint64_t wall_clock_ns();

 private:
  CaptureStage(std::string path, PcapWriter writer);
  // Ethernet + IPv6 + UDP: the most the stage puts before a payload.
  static constexpr std::size_t kMaxHeaders = 14 + 40 + 8;

  // One frame for the writer: its record header, the headers the stage made, and the UDP
  // payload, either a sent packet's buffer or a range of the queue's copied bytes.
  struct QueuedFrame {
    PcapRecordHeader record;
    std::uint8_t headers_length = 0;
    std::array<std::uint8_t, kMaxHeaders> headers;
    std::vector<std::uint8_t> taken;  // a sent packet's bytes
    std::size_t copied_at = 0;        // or a received packet's, in Queue::copied
    std::size_t copied_length = 0;
  };
  struct Queue {
    std::vector<QueuedFrame> frames;
    CaptureBuffer copied;
    std::size_t bytes = 0;  // what the frames will take in the file
  };

  void run();  // the writer thread
  // A new frame of `frame_len` bytes in the queue, its record header made; null when the
  // queue is full or closing (counted as dropped). mutex_ held.
  QueuedFrame* enqueue_locked(std::uint64_t time_ns, std::size_t frame_len);
  // Queues a frame carrying `payload`, or the bytes of `take` when given (mutex_ held).
  void record_locked(std::uint64_t time_ns, Direction direction, const core::Endpoints& route, std::uint16_t dst_port,
                     std::span<const std::uint8_t> payload, std::vector<std::uint8_t>* take = nullptr);
  // Writes a batch's records to the file; false (errno set) on a write error.
  bool write_batch(const Queue& batch);

  const std::string path_;
  std::optional<PcapWriter> writer_;  // the writer thread's, until close()
  std::mutex mutex_;                  // guards the fields below it
  std::condition_variable wake_;      // the writer: frames queued, or closing
  std::condition_variable drained_;   // flush(): the writer wrote a batch
  Queue queue_;
  bool busy_ = false;  // the writer is writing a batch it took from queue_
  bool closing_ = false;
  bool closed_ = false;
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::string error_;  // the first write error (the writer thread's)
  std::thread thread_;
};

}  // namespace softrdma::net
