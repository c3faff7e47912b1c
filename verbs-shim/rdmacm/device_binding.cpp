// Which device an address means, and the ports IDs hold. In embedded mode each process has
// one device holding one address: binding that address (or a wildcard) binds the device, and
// binding an address before the device has started starts it there, so a server that binds
// 127.0.0.1 gets the device on 127.0.0.1 and its client, starting later, the next free one.
#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "verbs-shim/private_device.hpp"
#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/devices.hpp"

namespace softrdma::rdmacm {
namespace {

// Ports handed out to IDs bound to port 0 (Linux's default ephemeral range).
constexpr std::uint16_t kFirstEphemeral = 32768;
constexpr std::uint16_t kLastEphemeral = 60999;

struct Ports {
  std::mutex mutex;
  std::map<std::uint16_t, Id*> taken;
  std::uint16_t next = kFirstEphemeral;
};

Ports* the_ports = new Ports;  // outlives static destructors, like the device

Ports& ports() { return *the_ports; }

// The device rdma_cm opened, and the lock under which it opens it.
struct Opened {
  std::mutex mutex;
  const Device* device = nullptr;
};
Opened* the_opened = new Opened;

std::string text_of(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a->sa_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  if (a->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  return buf;
}

bool parse_address(const char* text, sockaddr_storage& out) {
  out = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    return true;
  }
  return false;
}

// The device's context and shared PD are the ones rdma_get_devices hands out (devices.hpp),
// as rdma-core's id->verbs is.
Device* open_device(const shim::PrivateDevice& p) {
  auto* d = new Device;
  d->link = p.link;
  d->iwarp = p.iwarp;
  if (!parse_address(p.address, d->address)) return nullptr;
  d->gid = gid_of(reinterpret_cast<const sockaddr*>(&d->address));
  if (init_devices() != 0) return nullptr;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return nullptr;
  // The device of the transport the link serves: srdma0 is first, srdmaiw0 the iWARP one.
  __be64 guid = 0;
  for (int i = 0; i < n && guid == 0; ++i) {
    if ((list[i]->transport_type == IBV_TRANSPORT_IWARP) == p.iwarp) guid = ibv_get_device_guid(list[i]);
  }
  ibv_free_device_list(list);
  CmDevice* cm = acquire_device(guid);
  if (cm == nullptr) return nullptr;
  d->context = cm->verbs;
  d->pd = cm->pd;
  start_events(*d->link);
  return d;
}

std::uint16_t free_port(Ports& p) {
  for (int tries = kLastEphemeral - kFirstEphemeral + 1; tries > 0; --tries) {
    const std::uint16_t port = p.next;
    p.next = p.next == kLastEphemeral ? kFirstEphemeral : p.next + 1;
    if (!p.taken.count(port)) return port;
  }
  return 0;
}

}  // namespace

void forget_binding_after_fork() noexcept {
  the_ports = new Ports;
  the_opened = new Opened;
}

const Device* device(const sockaddr* preferred) {
  Opened& o = *the_opened;
  std::lock_guard lock(o.mutex);
  const Device*& opened = o.device;
  if (opened != nullptr) return opened;
  const std::string prefer = preferred != nullptr && !is_wildcard(preferred) ? text_of(preferred) : "";
  const shim::PrivateDevice* p = softrdma_private_device(prefer.empty() ? nullptr : prefer.c_str());
  if (p->link == nullptr) {
    std::fprintf(stderr, "softrdma: no device for rdma_cm: %s\n", p->error);
    errno = ENODEV;
    return nullptr;
  }
  opened = open_device(*p);
  if (opened == nullptr) errno = ENODEV;
  return opened;
}

bool is_wildcard(const sockaddr* a) {
  if (a == nullptr) return true;
  if (a->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a->sa_family == AF_INET6) return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

core::Gid gid_of(const sockaddr* a) {
  core::Gid g{};
  if (a->sa_family == AF_INET) {
    g[10] = g[11] = 0xff;  // ::ffff:a.b.c.d, the RoCEv2 GID of an IPv4 address (annex A17.4.5.1)
    std::memcpy(g.data() + 12, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else if (a->sa_family == AF_INET6) {
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  }
  return g;
}

bool serves(const Device& d, const sockaddr* a) { return is_wildcard(a) || gid_of(a) == d.gid; }

std::uint16_t port_of(const sockaddr* a) {
  if (a == nullptr) return 0;
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  return 0;
}

socklen_t address_length(const sockaddr* a) {
  return a != nullptr && a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int bind_id(Id& id, const sockaddr* address) {
  if (address != nullptr && address->sa_family != AF_INET && address->sa_family != AF_INET6) return EAFNOSUPPORT;
  const Device* d = device(address);
  if (d == nullptr) return ENODEV;
  if (!serves(*d, address)) return EADDRNOTAVAIL;
  Ports& p = ports();
  std::lock_guard lock(p.mutex);
  std::uint16_t port = port_of(address);
  if (port == 0) port = free_port(p);
  if (port == 0) return EADDRINUSE;
  if (p.taken.count(port)) return EADDRINUSE;
  p.taken[port] = &id;
  id.port = port;
  sockaddr_storage& src = id.id.route.addr.src_storage;
  src = {};
  const sockaddr* chosen = address != nullptr ? address : reinterpret_cast<const sockaddr*>(&d->address);
  std::memcpy(&src, chosen, address_length(chosen));
  if (src.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&src)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&src)->sin6_port = htons(port);
  id.id.verbs = d->context;
  if (id.id.pd == nullptr) id.id.pd = d->pd;  // the device's shared PD, as rdma_reg_msgs expects
  id.id.port_num = 1;
  std::memcpy(id.id.route.addr.addr.ibaddr.sgid.raw, d->gid.data(), 16);
  id.id.route.addr.addr.ibaddr.pkey = htons(0xFFFF);
  id.state = IdState::bound;
  return 0;
}

void release_port(Id& id) {
  if (id.port == 0) return;
  Ports& p = ports();
  std::lock_guard lock(p.mutex);
  const auto it = p.taken.find(id.port);
  if (it != p.taken.end() && it->second == &id) p.taken.erase(it);
  id.port = 0;
}

int bind_and_listen(Id& id, const sockaddr* address) {
  // More than one process of one daemon holding the ports tried is unlikely; past this many,
  // the port space looks exhausted.
  constexpr int kTries = 64;
  const bool any_port = port_of(address) == 0;
  for (int tries = 1;; ++tries) {
    if (const int err = bind_id(id, address)) return err;
    const int err = start_listening(id);
    if (err == 0) return 0;
    release_port(id);
    id.state = IdState::idle;
    if (err != EADDRINUSE || !any_port || tries == kTries) return err;
  }
}

}  // namespace softrdma::rdmacm
