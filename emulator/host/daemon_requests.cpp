// DaemonServer::handle: one client request, checked for ownership and run on the engine.
//
// Each handle a request names must be the client's (DaemonServer::Client's sets), else EINVAL
// without touching the engine: the kernel's uverbs answers a handle of another process the
// same way. Objects join the client's sets when created and leave when destroyed.
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::Op;

namespace {

// The key index of an MR or MW (Device keeps both in one table, key = index << 8 | key byte).
std::uint32_t index_of(std::uint32_t key) { return key >> 8; }

bool has_cap_sys_ptrace() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective & CAP_TO_MASK(CAP_SYS_PTRACE)) != 0;
}

// Whether `pid` is not dumpable, as far as /proc shows it: proc(5) gives the files under
// /proc/PID of a process that is not dumpable to root, while /proc/PID itself stays its
// user's. (A client running as root cannot be told apart this way.)
bool not_dumpable(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  struct stat process = {};
  struct stat file = {};
  return ::stat(dir.c_str(), &process) == 0 && ::stat((dir + "/environ").c_str(), &file) == 0 &&
         file.st_uid != process.st_uid;
}

// Yama's ptrace_scope (0 to 3), or -1 when the kernel has no Yama.
int yama_scope() {
  std::FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
  if (f == nullptr) return -1;
  int scope = -1;
  if (std::fscanf(f, "%d", &scope) != 1) scope = -1;
  std::fclose(f);
  return scope;
}

// Why process_vm_readv refused the daemon a client's memory. The kernel lets a reader with
// CAP_SYS_PTRACE in; without it only a reader of the client's own user and group, reading a
// dumpable client, that no security module (Yama) objects to. PR_SET_PTRACER (which the shim
// sets) answers Yama alone: it cannot open a client of another user or one that is not dumpable.
std::string unreachable_reason(pid_t pid, uid_t uid, gid_t gid, int err) {
  switch (err) {
    case ESRCH:
      return "the process is gone";
    case EFAULT:
    case ENOMEM:
      return "nothing is mapped there";
    case EPERM:
      break;
    default:
      return "an error this check does not expect";
  }
  const bool capable = has_cap_sys_ptrace();
  if (!capable && uid != ::getuid()) {
    return "the client runs as uid " + std::to_string(uid) + ", the daemon as uid " + std::to_string(::getuid()) +
           " without CAP_SYS_PTRACE, which it needs to reach other users' memory";
  }
  if (!capable && gid != ::getgid()) {
    return "the client runs as gid " + std::to_string(gid) + ", the daemon as gid " + std::to_string(::getgid()) +
           " without CAP_SYS_PTRACE, which it needs to reach other groups' memory";
  }
  if (!capable && not_dumpable(pid)) {
    return "the client is not dumpable (prctl(PR_SET_DUMPABLE, 0), or it changed credentials) and only a daemon "
           "with CAP_SYS_PTRACE may reach such a process";
  }
  switch (yama_scope()) {
    case 1:
      return "Yama's ptrace_scope is 1: the client must name the daemon with prctl(PR_SET_PTRACER), or the daemon "
             "needs CAP_SYS_PTRACE";
    case 2:
      return "Yama's ptrace_scope is 2: only a daemon with CAP_SYS_PTRACE may reach its clients";
    case 3:
      return "Yama's ptrace_scope is 3: no process may reach another's memory";
    default:
      return "a security module refused it";
  }
}

// Why an MR cannot be registered, for the daemon's log: the client only learns EACCES.
void log_unreachable(pid_t pid, uid_t uid, gid_t gid, std::uint64_t addr, int err) {
  const std::string reason = unreachable_reason(pid, uid, gid, err);
  std::fprintf(stderr, "softrdmad: pid %d: cannot reach its memory at 0x%llx with process_vm_readv (%s): %s\n",
               static_cast<int>(pid), static_cast<unsigned long long>(addr), std::strerror(err), reason.c_str());
}

}  // namespace

bool DaemonServer::handle(Client& c, std::span<const std::uint8_t> request, int& passed,
                          std::vector<std::uint8_t>& reply) {
  daemon::Reader in(request);
  daemon::Writer out(reply);
  const Op op = in.get<Op>();

  // Whether the client owns `key` in the set `member` (under mutex_, as events read the sets).
  auto owns = [&](auto Client::*member, std::uint32_t key) {
    std::lock_guard lock(mutex_);
    const auto& set = c.*member;
    return set.find(key) != set.end();
  };
  auto adopt = [&](std::unordered_set<std::uint32_t> Client::*member, std::uint32_t key) {
    std::lock_guard lock(mutex_);
    (c.*member).insert(key);
  };
  auto adopt_key = [&](std::unordered_map<std::uint32_t, std::uint32_t> Client::*member, std::uint32_t key) {
    std::lock_guard lock(mutex_);
    (c.*member)[index_of(key)] = key;
  };
  auto forget = [&](auto Client::*member, std::uint32_t key) {
    std::lock_guard lock(mutex_);
    (c.*member).erase(key);
  };
  // A memory range the daemon can reach in the client: its tagged address, or none (EINVAL for
  // an address beyond 48 bits, EFAULT where nothing is mapped, EACCES when process_vm_readv is
  // refused, e.g. a client that is not dumpable or of another user, to a daemon without
  // CAP_SYS_PTRACE; the daemon's log says which).
  auto reachable = [&](std::uint64_t addr, std::uint64_t length, int& err) -> std::optional<std::uint64_t> {
    const auto tagged = ProcessMemory::tag(c.slot, addr);
    if (!tagged) {
      err = EINVAL;
      return std::nullopt;
    }
    if (length == 0) return tagged;
    std::uint8_t probe = 0;
    int read_errno = 0;
    const bool ok = host_.call([&](core::Device&, core::Time) {
      const bool read = memory_.read(*tagged, {&probe, 1});
      read_errno = errno;
      return read;
    });
    if (!ok) {
      log_unreachable(c.pid, c.uid, c.gid, addr, read_errno);
      // Nothing mapped there is EFAULT, as the kernel's ibv_reg_mr answers (it pins the pages);
      // memory the daemon may not reach is EACCES.
      err = read_errno == EFAULT || read_errno == ENOMEM ? EFAULT : EACCES;
      return std::nullopt;
    }
    return tagged;
  };
  // Writes the reply of a verb that creates an object: errno, then the value on success.
  auto created = [&](const auto& result, auto on_success) {
    out.put(static_cast<std::int32_t>(result.error()));
    if (result) {
      on_success(*result);
      out.put(*result);
    }
  };
  auto status = [&](int err) { out.put(static_cast<std::int32_t>(err)); };
  auto count_taken = [&](std::uint32_t qpn, int queue, std::size_t n) {
    std::lock_guard lock(mutex_);
    c.taken[qpn][static_cast<std::size_t>(queue)] += static_cast<std::uint32_t>(n);
  };

  switch (op) {
    case Op::alloc_pd: {
      if (!in.done()) return false;
      created(link_.alloc_pd(), [&](std::uint32_t pd) { adopt(&Client::pds, pd); });
      return true;
    }
    case Op::dealloc_pd: {
      const auto pd = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::pds, pd) ? link_.dealloc_pd(pd) : EINVAL;
      if (err == 0) forget(&Client::pds, pd);
      status(err);
      return true;
    }
    case Op::reg_mr: {
      const auto pd = in.get<std::uint32_t>();
      const auto addr = in.get<std::uint64_t>();
      const auto length = in.get<std::uint64_t>();
      const auto iova = in.get<std::uint64_t>();
      const auto access = in.get<std::uint32_t>();
      if (!in.done()) return false;
      int err = owns(&Client::pds, pd) ? 0 : EINVAL;
      const auto tagged = err == 0 ? reachable(addr, length, err) : std::nullopt;
      if (!tagged) {
        status(err);
        return true;
      }
      created(link_.reg_mr(pd, *tagged, length, iova, access),
              [&](const core::MrKeys& keys) { adopt_key(&Client::mrs, keys.lkey); });
      return true;
    }
    case Op::rereg_mr: {
      const auto lkey = in.get<std::uint32_t>();
      const auto flags = in.get<std::uint8_t>();
      const auto pd = in.get<std::uint32_t>();
      auto translation = in.get<core::MrTranslation>();
      const auto access = in.get<std::uint32_t>();
      if (!in.done()) return false;
      core::MrChange change;
      int err = owns(&Client::mrs, index_of(lkey)) ? 0 : EINVAL;
      if (flags & daemon::kChangePd) {
        change.pd = pd;
        if (!owns(&Client::pds, pd)) err = EINVAL;
      }
      if ((flags & daemon::kChangeTranslation) && err == 0) {
        const auto tagged = reachable(translation.host, translation.length, err);
        translation.host = tagged.value_or(0);
        change.translation = translation;
      }
      if (flags & daemon::kChangeAccess) change.access = access;
      status(err == 0 ? link_.rereg_mr(lkey, change) : err);
      return true;
    }
    case Op::dereg_mr: {
      const auto lkey = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::mrs, index_of(lkey)) ? link_.dereg_mr(lkey) : EINVAL;
      if (err == 0) forget(&Client::mrs, index_of(lkey));
      status(err);
      return true;
    }
    case Op::alloc_mw: {
      const auto pd = in.get<std::uint32_t>();
      const auto type = in.get<std::int32_t>();
      if (!in.done()) return false;
      if (!owns(&Client::pds, pd)) {
        status(EINVAL);
        return true;
      }
      created(link_.alloc_mw(pd, type), [&](std::uint32_t rkey) { adopt_key(&Client::mws, rkey); });
      return true;
    }
    case Op::dealloc_mw: {
      const auto rkey = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::mws, index_of(rkey)) ? link_.dealloc_mw(rkey) : EINVAL;
      if (err == 0) forget(&Client::mws, index_of(rkey));
      status(err);
      return true;
    }
    case Op::bind_mw: {
      const auto qpn = in.get<std::uint32_t>();
      const auto mw_rkey = in.get<std::uint32_t>();
      const auto mr_lkey = in.get<std::uint32_t>();
      const auto addr = in.get<std::uint64_t>();
      const auto length = in.get<std::uint64_t>();
      const auto access = in.get<std::uint32_t>();
      const auto signaled = in.get<std::uint8_t>();
      const auto wr_id = in.get<std::uint64_t>();
      if (!in.done()) return false;
      if (!owns(&Client::qps, qpn) || !owns(&Client::mws, index_of(mw_rkey)) ||
          (mr_lkey != 0 && !owns(&Client::mrs, index_of(mr_lkey)))) {
        status(EINVAL);
        return true;
      }
      created(link_.bind_mw(qpn, mw_rkey, mr_lkey, addr, length, access,
                            signaled != 0 ? std::optional<std::uint64_t>(wr_id) : std::nullopt),
              [](std::uint32_t) {});
      return true;
    }
    case Op::create_cq: {
      // With the client's ring attached (cq_ring.hpp), completions go there; without one the
      // client polls with requests.
      const auto cqe = in.get<std::uint32_t>();
      if (!in.done()) return false;
      std::unique_ptr<CqRing> ring;
      if (passed >= 0) {
        ring = CqRing::adopt(passed);
        ::close(passed);
        passed = -1;
        if (!ring) {
          status(EINVAL);
          return true;
        }
      }
      created(link_.create_cq(cqe), [&](std::uint32_t cq) {
        adopt(&Client::cqs, cq);
        if (ring) {
          std::lock_guard lock(rings_mutex_);
          rings_[cq] = OwnedRing{std::move(ring), &c};
        }
      });
      return true;
    }
    case Op::drain_cq: {
      const auto cq = in.get<std::uint32_t>();
      if (!in.done()) return false;
      if (!owns(&Client::cqs, cq)) {
        status(EINVAL);
        return true;
      }
      host_.call([&](core::Device& d, core::Time) {
        std::lock_guard lock(rings_mutex_);
        fill_ring(d, cq);
      });
      status(0);
      return true;
    }
    case Op::destroy_cq: {
      const auto cq = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::cqs, cq) ? link_.destroy_cq(cq) : EINVAL;
      if (err == 0) {
        forget(&Client::cqs, cq);
        forget_ring(cq);
      }
      status(err);
      return true;
    }
    case Op::resize_cq: {
      const auto cq = in.get<std::uint32_t>();
      const auto cqe = in.get<std::uint32_t>();
      if (!in.done()) return false;
      status(owns(&Client::cqs, cq) ? link_.resize_cq(cq, cqe) : EINVAL);
      return true;
    }
    case Op::poll_cq: {
      const auto cq = in.get<std::uint32_t>();
      const auto max = in.get<std::uint32_t>();
      if (!in.done() || max > daemon::kMaxPolled) return false;
      thread_local std::vector<core::Wc> wcs;
      wcs.resize(max);
      const int n = owns(&Client::cqs, cq) ? link_.poll_cq(cq, wcs) : -EINVAL;
      status(n < 0 ? -n : 0);
      if (n >= 0) out.put_vector(std::span<const core::Wc>(wcs.data(), static_cast<std::size_t>(n)));
      return true;
    }
    case Op::req_notify_cq: {
      const auto cq = in.get<std::uint32_t>();
      const auto solicited_only = in.get<std::uint8_t>();
      if (!in.done()) return false;
      status(owns(&Client::cqs, cq) ? link_.req_notify_cq(cq, solicited_only != 0) : EINVAL);
      return true;
    }
    case Op::create_srq: {
      const auto pd = in.get<std::uint32_t>();
      const auto max_wr = in.get<std::uint32_t>();
      const auto max_sge = in.get<std::uint32_t>();
      const auto limit = in.get<std::uint32_t>();
      if (!in.done()) return false;
      if (!owns(&Client::pds, pd)) {
        status(EINVAL);
        return true;
      }
      created(link_.create_srq(pd, max_wr, max_sge, limit), [&](std::uint32_t srq) { adopt(&Client::srqs, srq); });
      return true;
    }
    case Op::modify_srq: {
      const auto srq = in.get<std::uint32_t>();
      const auto max_wr = in.get<std::uint32_t>();
      const auto limit = in.get<std::uint32_t>();
      const auto set_max_wr = in.get<std::uint8_t>();
      const auto set_limit = in.get<std::uint8_t>();
      if (!in.done()) return false;
      status(owns(&Client::srqs, srq) ? link_.modify_srq(srq, max_wr, limit, set_max_wr != 0, set_limit != 0) : EINVAL);
      return true;
    }
    case Op::query_srq: {
      const auto srq = in.get<std::uint32_t>();
      if (!in.done()) return false;
      std::uint32_t max_wr = 0, max_sge = 0, limit = 0;
      const int err = owns(&Client::srqs, srq) ? link_.query_srq(srq, max_wr, max_sge, limit) : EINVAL;
      status(err);
      if (err == 0) {
        out.put(max_wr);
        out.put(max_sge);
        out.put(limit);
      }
      return true;
    }
    case Op::destroy_srq: {
      const auto srq = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::srqs, srq) ? link_.destroy_srq(srq) : EINVAL;
      if (err == 0) forget(&Client::srqs, srq);
      status(err);
      return true;
    }
    case Op::create_ah: {
      const auto pd = in.get<std::uint32_t>();
      const auto av = in.get<core::AddressVector>();
      if (!in.done()) return false;
      if (!owns(&Client::pds, pd)) {
        status(EINVAL);
        return true;
      }
      created(link_.create_ah(pd, av), [&](std::uint32_t ah) { adopt(&Client::ahs, ah); });
      return true;
    }
    case Op::destroy_ah: {
      const auto ah = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::ahs, ah) ? link_.destroy_ah(ah) : EINVAL;
      if (err == 0) forget(&Client::ahs, ah);
      status(err);
      return true;
    }
    case Op::create_qp: {
      const auto init = in.get<core::QpInitAttr>();
      if (!in.done()) return false;
      if (!owns(&Client::pds, init.pd) || !owns(&Client::cqs, init.send_cq) || !owns(&Client::cqs, init.recv_cq) ||
          (init.srq != 0 && !owns(&Client::srqs, init.srq))) {
        status(EINVAL);
        return true;
      }
      created(link_.create_qp(init), [&](const core::QpCreated& qp) { adopt(&Client::qps, qp.qpn); });
      return true;
    }
    case Op::modify_qp: {
      const auto qpn = in.get<std::uint32_t>();
      const auto attr = in.get<core::QpAttr>();
      const auto mask = in.get<std::uint32_t>();
      if (!in.done()) return false;
      status(owns(&Client::qps, qpn) ? link_.modify_qp(qpn, attr, mask) : EINVAL);
      return true;
    }
    case Op::query_qp: {
      const auto qpn = in.get<std::uint32_t>();
      if (!in.done()) return false;
      core::QpAttr attr;
      core::QpInitAttr init;
      const int err = owns(&Client::qps, qpn) ? link_.query_qp(qpn, attr, init) : EINVAL;
      status(err);
      if (err == 0) {
        out.put(attr);
        out.put(init);
      }
      return true;
    }
    case Op::destroy_qp: {
      const auto qpn = in.get<std::uint32_t>();
      if (!in.done()) return false;
      const int err = owns(&Client::qps, qpn) ? link_.destroy_qp(qpn) : EINVAL;
      if (err == 0) {
        forget(&Client::qps, qpn);
        std::lock_guard lock(mutex_);
        c.taken.erase(qpn);  // a QP that takes this QPN next counts from 0
      }
      status(err);
      return true;
    }
    case Op::post_send: {
      const auto qpn = in.get<std::uint32_t>();
      const auto count = in.get<std::uint32_t>();
      thread_local std::vector<core::SendWr> wrs;
      if (!in.ok() || count > daemon::kMaxWrs) return false;
      wrs.resize(count);
      for (core::SendWr& wr : wrs) in.get_wr(wr);
      if (!in.done()) return false;
      // The objects a WR names beyond its SGEs (whose lkeys the engine checks against the QP's
      // PD). A UD WR's AH must be the client's own: else the post fails with EINVAL and the WRs
      // before it are posted, as bad_wr semantics require. A bind's or a local invalidation's
      // key that is not the client's becomes key 0, which names nothing, and the engine
      // completes the WR with the error a NIC gives for a key the QP may not use (MW bind
      // error, local protection error; IBTA vol. 1 s10.6.7.2, s10.6.5): an EINVAL for a post
      // that came through the work ring would reach no one, and the client would wait forever.
      auto own_keys_only = [&](core::SendWr& wr) {
        if (wr.opcode == core::WrOpcode::bind_mw) {
          if (!owns(&Client::mws, index_of(wr.mw_rkey))) wr.mw_rkey = 0;
          if (!owns(&Client::mrs, index_of(wr.bind_mr_lkey))) wr.bind_mr_lkey = 0;
        }
        if (wr.opcode == core::WrOpcode::local_inv && !owns(&Client::mrs, index_of(wr.invalidate_rkey)) &&
            !owns(&Client::mws, index_of(wr.invalidate_rkey)))
          wr.invalidate_rkey = 0;
        return wr.ah == 0 || owns(&Client::ahs, wr.ah);
      };
      const bool qp_owned = owns(&Client::qps, qpn);
      std::size_t checked = 0;
      while (qp_owned && checked < wrs.size() && own_keys_only(wrs[checked])) ++checked;
      std::size_t posted = 0;
      int err = qp_owned ? link_.post_send(qpn, std::span<const core::SendWr>(wrs.data(), checked), posted) : EINVAL;
      if (err == 0 && checked < wrs.size()) err = EINVAL;
      count_taken(qpn, 0, posted);
      status(err);
      out.put(static_cast<std::uint32_t>(posted));
      return true;
    }
    case Op::attach_work_ring: {
      if (!in.done()) return false;
      std::unique_ptr<WorkRing> ring = passed >= 0 ? WorkRing::adopt(passed) : nullptr;
      if (passed >= 0) ::close(passed);
      passed = -1;
      std::lock_guard ring_lock(ring_clients_mutex_);
      std::lock_guard work_lock(c.work_mutex);
      if (!ring || c.work) {
        status(EINVAL);  // no ring, or a second one
        return true;
      }
      // Asleep until the progress thread says otherwise: it may be asleep already, having
      // announced it to the rings it knew, and the client's first post must then wake it.
      ring->set_asleep(true);
      c.work = std::move(ring);
      ring_clients_.push_back(&c);
      status(0);
      return true;
    }
    case Op::queue_room: {
      const auto which = in.get<core::Device::WorkQueue>();
      const auto handle = in.get<std::uint32_t>();
      if (!in.done() || which > core::Device::WorkQueue::srq) return false;
      const bool owned = which == core::Device::WorkQueue::srq ? owns(&Client::srqs, handle) : owns(&Client::qps, handle);
      const auto room = owned ? host_.call([&](core::Device& d, core::Time) { return d.room(which, handle); })
                              : std::nullopt;
      status(room ? 0 : EINVAL);
      if (room) out.put(*room);
      return true;
    }
    case Op::post_recv:
    case Op::post_srq_recv: {
      const auto queue = in.get<std::uint32_t>();
      const auto count = in.get<std::uint32_t>();
      thread_local std::vector<core::RecvWr> wrs;
      if (!in.ok() || count > daemon::kMaxWrs) return false;
      wrs.resize(count);
      for (core::RecvWr& wr : wrs) in.get_wr(wr);
      if (!in.done()) return false;
      std::size_t posted = 0;
      int err = EINVAL;
      if (op == Op::post_recv && owns(&Client::qps, queue)) {
        err = link_.post_recv(queue, wrs, posted);
        count_taken(queue, 1, posted);
      }
      if (op == Op::post_srq_recv && owns(&Client::srqs, queue)) err = link_.post_srq_recv(queue, wrs, posted);
      status(err);
      out.put(static_cast<std::uint32_t>(posted));
      return true;
    }
    default:
      return handle_cm(c, op, in, out);  // false for what is not an operation
  }
}

}  // namespace softrdma::host
