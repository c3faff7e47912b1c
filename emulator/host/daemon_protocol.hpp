// The control protocol between the verbs shim and softrdmad: one ABI for both ends.
//
// Transport: a SOCK_SEQPACKET Unix socket per device, as the kernel has one uverbs file per
// device (kIwarpSocketSuffix), so one send is one message and framing is the kernel's. The
// client connects and sends Hello with one file descriptor attached (SCM_RIGHTS): its end of a
// SOCK_SEQPACKET pair on which the daemon will send Event messages. Then it sends requests,
// one at a time, and reads one reply to each:
//
//   request: u32 Op, then the op's arguments;  reply: i32 errno (0: success), then results.
//
// Both ends are built from this tree: fields are fixed-width host-endian integers, and core
// structs that are trivially copyable travel as their bytes; Hello carries kLayout, which
// changes whenever one of those structs does, so that a shim and a daemon of different
// builds refuse each other with a message instead of misreading each other.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "emulator/core/device.hpp"

namespace softrdma::host::daemon {

inline constexpr std::uint32_t kMagic = 0x53524d44;  // "SRMD"
// 2: CQ rings; 3: work rings; 4: CM; 5: multicast; 6: iWARP CM; 7: XRC; 8: tag matching
inline constexpr std::uint32_t kVersion = 8;
inline constexpr std::uint32_t kLayout =
    sizeof(core::Wc) * 1 + sizeof(core::QpAttr) * 3 + sizeof(core::QpInitAttr) * 5 + sizeof(core::AddressVector) * 7 +
    sizeof(core::Sge) * 11 + sizeof(core::QpCap) * 13 + sizeof(core::AsyncEvent) * 17 + sizeof(core::MrKeys) * 19 +
    sizeof(core::MulticastLimits) * 23 + sizeof(core::TmCaps) * 29;
// A request or reply never exceeds this; the client splits long WR lists to fit.
inline constexpr std::size_t kMaxMessage = 64 * 1024;
// An event message never exceeds this (a CM event carries its 256-byte MAD, an iWARP one up to
// 512 bytes of MPA private data).
inline constexpr std::size_t kMaxEventMessage = 1024;
// Completions one poll_cq request may ask for, WRs one post request may carry.
inline constexpr std::uint32_t kMaxPolled = 1024;
inline constexpr std::uint32_t kMaxWrs = 4096;
// rereg_mr's request: which of its fields apply (ibv_rereg_mr's flags).
inline constexpr std::uint8_t kChangePd = 1;
inline constexpr std::uint8_t kChangeTranslation = 2;
inline constexpr std::uint8_t kChangeAccess = 4;

enum class Op : std::uint32_t {
  alloc_pd = 1,
  dealloc_pd,
  reg_mr,
  rereg_mr,
  dereg_mr,
  alloc_mw,
  dealloc_mw,
  bind_mw,
  create_cq,
  destroy_cq,
  resize_cq,
  poll_cq,
  req_notify_cq,
  create_srq,
  modify_srq,
  query_srq,
  destroy_srq,
  create_ah,
  destroy_ah,
  create_qp,
  modify_qp,
  query_qp,
  destroy_qp,
  post_send,
  post_recv,
  post_srq_recv,
  drain_cq,          // the CQ's ring has room again: move what waits in the engine (cq_ring.hpp)
  attach_work_ring,  // with the client's work ring attached (work_ring.hpp)
  queue_room,        // u8 Device::WorkQueue, u32 handle -> u32 WRs the queue still takes
  // The connection manager of port 1 (DeviceLink::cm_*; daemon_cm_codec.hpp for the bodies).
  cm_listen,
  cm_stop_listening,
  cm_connect,
  cm_accept,
  cm_ready,
  cm_reject,
  cm_disconnect,
  cm_resolve_service,
  cm_answer_service,
  cm_destroy,
  // Multicast (DeviceLink::attach_mcast): u32 QPN, core::Gid group -> errno.
  attach_mcast,
  detach_mcast,
  // The iWARP connection manager (DeviceLink::iw_*; daemon_iwarp_codec.hpp for the bodies).
  iw_listen,
  iw_stop_listening,
  iw_connect,
  iw_accept,
  iw_reject,
  iw_disconnect,
  iw_destroy,
  // XRC (DeviceLink's XRC calls): alloc_xrcd -> handle; dealloc_xrcd u32 -> errno;
  // create_xrc_srq u32 pd, max_wr, max_sge, limit, xrcd, cq -> handle; open_qp u32 xrcd, QPN -> errno.
  alloc_xrcd,
  dealloc_xrcd,
  create_xrc_srq,
  open_qp,
  // Tag matching (DeviceLink's TM calls): create_tm_srq u32 pd, max_wr, max_sge, limit, cq,
  // max_num_tags, max_ops -> handle; post_srq_ops u32 SRQ, then the SrqOp (put_op) -> u32 handle.
  create_tm_srq,
  post_srq_ops,
  end_of_ops,  // not an op: one past the last, so that the daemon's handler table covers each
};

// softrdmad serves its iWARP device, srdmaiw0, on the socket path of srdma0 with this added.
inline constexpr const char* kIwarpSocketSuffix = ".iwarp";

struct Hello {
  std::uint32_t magic = kMagic;
  std::uint32_t version = kVersion;
  std::uint32_t layout = kLayout;
};
// Hello's reply: errno, then the device's core::MulticastLimits (all 0 where its backend joins
// no groups) and core::TmCaps (all 0 where it matches no tags), then its address as text (the
// rest of the message), with the progress thread's doorbell eventfd attached (SCM_RIGHTS) for
// clients that post through a work ring.

enum class EventKind : std::uint32_t {
  cq = 1,     // `a`: the CQ whose notification fired
  async = 2,  // `a`: core::AsyncEventType, `b`: its element
  cm = 3,     // a core::CmEvent follows the Event (daemon_cm_codec.hpp)
  iwarp = 4,  // a core::IwarpEvent follows the Event (daemon_iwarp_codec.hpp)
};
struct Event {
  EventKind kind = EventKind::cq;
  std::uint32_t a = 0;
  std::uint32_t b = 0;
};

static_assert(std::is_trivially_copyable_v<Hello> && std::is_trivially_copyable_v<Event>);

// Appends values to a message.
class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out) { out_.clear(); }
  void clear() { out_.clear(); }

  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "only plain bytes travel");
    append(&value, sizeof(T));
  }
  template <class T>
  void put_vector(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>, "only plain bytes travel");
    put(static_cast<std::uint32_t>(values.size()));
    append(values.data(), values.size_bytes());
  }
  // Overwrites a value put earlier at byte `offset` (a count known only after the items).
  template <class T>
  void put_at(std::size_t offset, const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "only plain bytes travel");
    std::memcpy(out_.data() + offset, &value, sizeof(T));
  }
  void put_wr(const core::SendWr& wr);
  void put_wr(const core::RecvWr& wr);
  void put_op(const core::SrqOp& op);
  std::size_t size() const { return out_.size(); }

 private:
  // resize and memcpy rather than vector::insert, whose inlined copy into a possibly empty
  // vector GCC 12 at -O3 takes for an overflow (-Wstringop-overflow, 42 false alarms).
  void append(const void* bytes, std::size_t n) {
    if (n == 0) return;
    const std::size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, bytes, n);
  }

  std::vector<std::uint8_t>& out_;
};

// Reads values from a message; a short or malformed message makes ok() false and every later
// read return zeros, so a handler checks once at the end.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}

  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>, "only plain bytes travel");
    T value{};
    if (!ok_ || in_.size() - pos_ < sizeof(T)) {
      ok_ = false;
      return value;
    }
    std::memcpy(&value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  template <class T>
  void get_vector(std::vector<T>& out, std::size_t max_count) {
    const auto n = get<std::uint32_t>();
    if (!ok_ || n > max_count || (in_.size() - pos_) / sizeof(T) < n) {
      ok_ = false;
      out.clear();
      return;
    }
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), in_.data() + pos_, n * sizeof(T));  // an empty vector's data() may be null
    pos_ += n * sizeof(T);
  }
  void get_wr(core::SendWr& wr);
  void get_wr(core::RecvWr& wr);
  void get_op(core::SrqOp& op);
  std::span<const std::uint8_t> rest() const { return in_.subspan(pos_); }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == in_.size(); }  // everything read, nothing left over

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// The most SGEs and inline bytes one WR may carry in a message: the device's own limits are
// far lower, so anything beyond is a malformed message rather than a bad WR.
inline constexpr std::size_t kMaxSges = 1024;
inline constexpr std::size_t kMaxInline = 16 * 1024;

}  // namespace softrdma::host::daemon
