// softrdmad's requests for MRs and MWs. An MR reaches only the client's own memory, through
// process_vm_readv (process_memory.hpp): registering memory the daemon cannot reach fails, and
// the daemon's log says why, as the client learns only the errno.
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::put_created;
using daemon::put_status;

namespace {

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

// A memory range the daemon can reach in the client: its tagged address, or none (EINVAL for an
// address beyond 48 bits, EFAULT where nothing is mapped, EACCES when process_vm_readv is
// refused, e.g. a client that is not dumpable or of another user, to a daemon without
// CAP_SYS_PTRACE; the daemon's log says which).
std::optional<std::uint64_t> DaemonServer::reachable(Client& c, std::uint64_t addr, std::uint64_t length, int& err) {
  const auto tagged = ProcessMemory::tag(c.slot, addr);
  if (!tagged) {
    err = EINVAL;
    return std::nullopt;
  }
  if (length == 0) return tagged;
  std::uint8_t probe = 0;
  int read_errno = 0;
  const bool ok = on_engine([&](core::Device&, core::Time) {
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
}

bool DaemonServer::handle_reg_mr(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto pd = in.get<std::uint32_t>();
  const auto addr = in.get<std::uint64_t>();
  const auto length = in.get<std::uint64_t>();
  const auto iova = in.get<std::uint64_t>();
  const auto access = in.get<std::uint32_t>();
  if (!in.done()) return false;
  int err = owns(c, &Client::pds, pd) ? 0 : EINVAL;
  // An on-demand MR's memory need not be mapped yet: only its address is checked (length 0).
  const std::uint64_t probed = (access & core::access::on_demand) ? 0 : length;
  const auto tagged = err == 0 ? reachable(c, addr, probed, err) : std::nullopt;
  if (!tagged) {
    put_status(out, err);
    return true;
  }
  const auto keys = link_->reg_mr(pd, *tagged, length, iova, access);
  if (keys) adopt(c, &Client::mrs, keys->lkey);
  put_created(out, keys);
  return true;
}

bool DaemonServer::handle_rereg_mr(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto lkey = in.get<std::uint32_t>();
  const auto flags = in.get<std::uint8_t>();
  const auto pd = in.get<std::uint32_t>();
  auto translation = in.get<core::MrTranslation>();
  const auto access = in.get<std::uint32_t>();
  if (!in.done()) return false;
  core::MrChange change;
  int err = owns(c, &Client::mrs, lkey) ? 0 : EINVAL;
  if (flags & daemon::kChangePd) {
    change.pd = pd;
    if (!owns(c, &Client::pds, pd)) err = EINVAL;
  }
  if ((flags & daemon::kChangeTranslation) && err == 0) {
    const auto tagged = reachable(c, translation.host, translation.length, err);
    translation.host = tagged.value_or(0);
    change.translation = translation;
  }
  if (flags & daemon::kChangeAccess) change.access = access;
  put_status(out, err == 0 ? link_->rereg_mr(lkey, change) : err);
  return true;
}

bool DaemonServer::handle_dereg_mr(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return destroy_owned(c, in, out, &Client::mrs, &DeviceLink::dereg_mr);
}

bool DaemonServer::handle_alloc_mw(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto pd = in.get<std::uint32_t>();
  const auto type = in.get<std::int32_t>();
  if (!in.done()) return false;
  if (!owns(c, &Client::pds, pd)) {
    put_status(out, EINVAL);
    return true;
  }
  const auto rkey = link_->alloc_mw(pd, type);
  if (rkey) adopt(c, &Client::mws, *rkey);
  put_created(out, rkey);
  return true;
}

bool DaemonServer::handle_dealloc_mw(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return destroy_owned(c, in, out, &Client::mws, &DeviceLink::dealloc_mw);
}

bool DaemonServer::handle_bind_mw(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto qpn = in.get<std::uint32_t>();
  const auto mw_rkey = in.get<std::uint32_t>();
  const auto mr_lkey = in.get<std::uint32_t>();
  const auto addr = in.get<std::uint64_t>();
  const auto length = in.get<std::uint64_t>();
  const auto access = in.get<std::uint32_t>();
  const auto signaled = in.get<std::uint8_t>();
  const auto wr_id = in.get<std::uint64_t>();
  if (!in.done()) return false;
  if (!owns(c, &Client::qps, qpn) || !owns(c, &Client::mws, mw_rkey) ||
      (mr_lkey != 0 && !owns(c, &Client::mrs, mr_lkey))) {
    put_status(out, EINVAL);
    return true;
  }
  put_created(out, link_->bind_mw(qpn, mw_rkey, mr_lkey, addr, length, access,
                                  signaled != 0 ? std::optional<std::uint64_t>(wr_id) : std::nullopt));
  return true;
}

}  // namespace softrdma::host
