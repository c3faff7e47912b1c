#include "verbs-shim/rdmacm/system_cm.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

#include "verbs-shim/private_device.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::rdmacm {

// The kernel's event channel beside an application's channel, and the thread that moves its
// events into the application's: programs wait on the one descriptor they hold.
struct Twin {
  rdma_event_channel* kernel = nullptr;
  int stop_fd = -1;
  std::thread pump;
};

namespace system {
namespace {

// rdma-core's librdmacm, in the namespace of the machine's devices.
void* library() {
  static void* const lib = []() -> void* {
    const SoftrdmaSystemNamespace* ns = softrdma_system_namespace();
    if (ns == nullptr) return nullptr;
    const char* error = nullptr;
    void* l = ns->open("librdmacm.so.1", &error);
    if (l == nullptr) {
      std::fprintf(stderr, "softrdma: rdma_cm cannot connect the machine's own RDMA devices: %s\n", error);
    }
    return l;
  }();
  return lib;
}

// The shell a kernel event is for: every kernel ID's context is its shell. A connection request
// makes one for its new kernel ID.
Id* shell_of(const rdma_cm_event& e, Channel& channel) {
  if (e.event != RDMA_CM_EVENT_CONNECT_REQUEST) return static_cast<Id*>(e.id->context);
  auto* shell = new (std::nothrow) Id;
  if (shell == nullptr) return nullptr;
  shell->sys = e.id;
  shell->channel = &channel;
  shell->state = IdState::requested;
  shell->id.channel = &channel.channel;
  // The listener's context, as rdma-core gives a request's ID; the kernel ID's now names the shell.
  shell->id.context = static_cast<Id*>(e.listen_id->context)->id.context;
  e.id->context = shell;
  {
    std::lock_guard lock(channel.mutex);
    ++channel.ids;
  }
  mirror(*shell);
  return shell;
}

// Waits on the kernel channel (made non-blocking) until told to stop.
void pump(Channel& channel, Twin& twin) {
  pollfd fds[2] = {{twin.kernel->fd, POLLIN, 0}, {twin.stop_fd, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    rdma_cm_event* e = nullptr;
    if (SRDMA_KERNEL_CM(rdma_get_cm_event, twin.kernel, &e) != 0) continue;
    Id* shell = shell_of(*e, channel);
    if (shell == nullptr) {
      drop(e);
      continue;
    }
    repost(*shell, {shell, SystemEvent{e}});
  }
}

// The channel's twin, made with its pump on first use; null when the kernel's cannot be made.
Twin* twin_of(Channel& channel) {
  std::lock_guard lock(channel.mutex);
  if (channel.twin != nullptr) return channel.twin;
  auto* t = new (std::nothrow) Twin;
  if (t == nullptr) return nullptr;
  t->kernel = SRDMA_KERNEL_CM(rdma_create_event_channel);
  t->stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (t->kernel == nullptr || t->stop_fd < 0 ||
      ::fcntl(t->kernel->fd, F_SETFL, ::fcntl(t->kernel->fd, F_GETFL) | O_NONBLOCK) != 0) {
    if (t->kernel != nullptr) SRDMA_KERNEL_CM(rdma_destroy_event_channel, t->kernel);
    if (t->stop_fd >= 0) ::close(t->stop_fd);
    delete t;
    return nullptr;
  }
  t->pump = std::thread(pump, std::ref(channel), std::ref(*t));
  channel.twin = t;
  return t;
}

// A wildcard names no device, so it goes where the device list starts: to the machine's devices
// when they come first (SOFTRDMA_REAL_DEVICES=first) or when softrdma's cannot start (kernel
// rxe holds UDP 4791 on every address), else to softrdma's.
bool wildcard_is_kernels() {
  const SoftrdmaSystemNamespace* ns = softrdma_system_namespace();
  return ns != nullptr && (ns->machines_first || softrdma_private_device(nullptr)->link == nullptr);
}

}  // namespace

void* symbol(const char* name) {
  void* lib = library();
  return lib != nullptr ? ::dlsym(lib, name) : nullptr;
}

void enter() {
  if (const SoftrdmaSystemNamespace* ns = softrdma_system_namespace()) ns->enter();
}

void leave() {
  if (const SoftrdmaSystemNamespace* ns = softrdma_system_namespace()) ns->leave();
}

int adopt(Id& id, const sockaddr* address) {
  if (address == nullptr || library() == nullptr) return ENODEV;
  if (is_wildcard(address) && !wildcard_is_kernels()) return ENODEV;
  Twin* twin = twin_of(*id.channel);
  if (twin == nullptr) return ENODEV;
  rdma_cm_id* kernel = nullptr;
  if (SRDMA_KERNEL_CM(rdma_create_id, twin->kernel, &kernel, &id, id.id.ps) != 0) return ENODEV;
  // The kernel binds only an address one of its RDMA devices holds: ENODEV, or
  // EADDRNOTAVAIL for one no interface holds.
  if (SRDMA_KERNEL_CM(rdma_bind_addr, kernel, const_cast<sockaddr*>(address)) != 0) {
    const int err = errno == EADDRNOTAVAIL ? ENODEV : errno;
    SRDMA_KERNEL_CM(rdma_destroy_id, kernel);
    return err;
  }
  id.sys = kernel;
  mirror(id);
  return 0;
}

bool route_source(const sockaddr* dst, sockaddr_storage& source) {
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return false;
  const int fd = ::socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A connected UDP socket sends nothing: connect only asks the routing table for a source.
  sockaddr_storage to{};
  std::memcpy(&to, dst, dst->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(9);  // the same offset in both families
  socklen_t len = sizeof source;
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&source), &len) == 0;
  ::close(fd);
  if (ok) reinterpret_cast<sockaddr_in*>(&source)->sin_port = 0;
  return ok;
}

void mirror(Id& id) {
  rdma_event_channel* const channel = id.id.channel;
  void* const context = id.id.context;
  rdma_cm_event* const event = id.id.event;
  id.id = *id.sys;
  id.id.channel = channel;
  id.id.context = context;
  id.id.event = event;
}

void translate(Id& id, rdma_cm_event* kernel_event, Event& out) {
  out.event = *kernel_event;
  out.event.id = &id.id;
  out.event.listen_id =
      kernel_event->listen_id != nullptr ? &static_cast<Id*>(kernel_event->listen_id->context)->id : nullptr;
  // conn and ud begin alike: the private data and its length.
  rdma_conn_param& param = out.event.param.conn;
  const std::size_t length = std::min<std::size_t>(param.private_data_len, out.private_data.size());
  if (param.private_data != nullptr && length != 0) {
    std::memcpy(out.private_data.data(), param.private_data, length);
    param.private_data = out.private_data.data();
  }
  mirror(id);
  drop(kernel_event);
}

void drop(rdma_cm_event* kernel_event) { SRDMA_KERNEL_CM(rdma_ack_cm_event, kernel_event); }

void destroy_kernel_id(Id& id) {
  SRDMA_KERNEL_CM(rdma_destroy_id, id.sys);
  id.sys = nullptr;
}

void close_twin(Channel& channel) {
  Twin* t = channel.twin;
  if (t == nullptr) return;
  const std::uint64_t one = 1;
  (void)!::write(t->stop_fd, &one, sizeof one);
  t->pump.join();
  SRDMA_KERNEL_CM(rdma_destroy_event_channel, t->kernel);
  ::close(t->stop_fd);
  delete t;
  channel.twin = nullptr;
}

}  // namespace system
}  // namespace softrdma::rdmacm
