// Event channels: a queue per channel and an eventfd whose count is the queue's length, so
// that blocking, non-blocking (O_NONBLOCK on the fd) and poll()-driven programs all work as
// with rdma-core's channel fd. The engine's events reach a channel through the routes from
// its connections and listeners to IDs; events that come before their ID is known wait.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#include "emulator/host/device_link.hpp"
#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/system_cm.hpp"

namespace softrdma::rdmacm {
namespace {

struct Routes {
  std::mutex mutex;
  std::map<std::uint32_t, Id*> connections;
  std::map<std::uint32_t, Id*> listeners;
  std::map<std::uint32_t, std::vector<EngineEvent>> early;  // for connections not yet routed
  // Requests for a listener whose handle start_listening has not recorded yet: through
  // softrdmad the event can overtake the reply that names the listener.
  std::map<std::uint32_t, std::vector<EngineEvent>> early_requests;
};

Routes* the_routes = new Routes;  // events may arrive during static destruction

Routes& routes() { return *the_routes; }

void post(Channel& c, Queued q) {
  {
    std::lock_guard lock(c.mutex);
    c.queue.push_back(std::move(q));
  }
  const std::uint64_t one = 1;
  (void)!::write(c.channel.fd, &one, sizeof one);
}

void post(Id& id, EngineEvent e) {
  std::visit([&id](auto& event) { post(*id.channel, {&id, std::move(event)}); }, e);
}

bool is_request(const core::CmEvent& e) {
  return e.type == core::CmEventType::request || e.type == core::CmEventType::service_request;
}
bool is_request(const core::IwarpEvent& e) { return e.type == core::IwarpEventType::connect_request; }

// Runs on whichever thread delivers the engine's events, never under the host's lock.
template <class E>
void on_engine_event(const E& e) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  auto& map = is_request(e) ? r.listeners : r.connections;
  const auto it = map.find(is_request(e) ? e.listener : e.id);
  if (it == map.end()) {
    (is_request(e) ? r.early_requests[e.listener] : r.early[e.id]).push_back(e);
    return;
  }
  Id& id = *it->second;
  if (is_request(e) && !id.accepting) {
    id.held_requests.push_back(e);
    return;
  }
  post(*id.channel, {&id, e});
}

// The next queued event, waiting for one unless the fd is non-blocking. A count whose event
// was purged with its ID leaves `out` empty.
int take(Channel& c, std::optional<Queued>& out) {
  std::uint64_t count = 0;
  if (::read(c.channel.fd, &count, sizeof count) != static_cast<ssize_t>(sizeof count)) return errno;
  std::lock_guard lock(c.mutex);
  if (c.queue.empty()) return 0;
  out = std::move(c.queue.front());
  c.queue.pop_front();
  out->id->events_in_hand.fetch_add(1);  // before purge() can see the queue without it
  return 0;
}

// rdma_get_cm_event is done with an event it took for `id`: the last touch of the ID.
void put_down(Id& id) {
  std::lock_guard lock(id.mutex);
  id.events_in_hand.fetch_sub(1);
  id.acked.notify_all();
}

// A destroyed channel is closed and freed only after kRetiredChannels more have been
// destroyed: programs destroy their channel while another thread still loops on
// rdma_get_cm_event (rping's CM thread does). Emptied, it keeps that thread waiting, as one
// already asleep on the channel's descriptor goes on waiting, instead of handing it freed
// memory or an error that such a program takes for a failure.
constexpr std::size_t kRetiredChannels = 64;

void retire(Channel& c) {
  {
    std::lock_guard lock(c.mutex);
    c.queue.clear();
  }
  const int flags = ::fcntl(c.channel.fd, F_GETFL);
  ::fcntl(c.channel.fd, F_SETFL, flags | O_NONBLOCK);
  std::uint64_t count = 0;
  while (::read(c.channel.fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
  }
  ::fcntl(c.channel.fd, F_SETFL, flags & ~O_NONBLOCK);
  static std::mutex mutex;
  static auto* retired = new std::deque<Channel*>;
  std::lock_guard lock(mutex);
  retired->push_back(&c);
  if (retired->size() > kRetiredChannels) {
    ::close(retired->front()->channel.fd);
    delete retired->front();
    retired->pop_front();
  }
}

void fill_local(Id& id, const Local& l, Event& out) {
  out.event.id = &id.id;
  out.event.event = l.type;
  out.event.status = l.status;
}

// A process's device goes with it, so its connections end first, as the kernel ends those of a
// process that exits: each peer hears a DREQ or a REJ (ConnectionManager::destroy) instead of
// retrying into silence.
void end_connections_at_exit() {
  std::vector<std::uint32_t> open;
  {
    Routes& r = routes();
    std::lock_guard lock(r.mutex);  // released before the link delivers events back here
    for (const auto& [connection, id] : r.connections) open.push_back(connection);
    r.connections.clear();
  }
  for (const std::uint32_t connection : open) destroy_connection(connection);
}

}  // namespace

void forget_routes_after_fork() noexcept { the_routes = new Routes; }

void start_events(host::DeviceLink& link) {
  link.set_cm_handler(on_engine_event<core::CmEvent>);
  link.set_iw_handler(on_engine_event<core::IwarpEvent>);
  std::atexit(end_connections_at_exit);
}

void queue_local(Id& id, rdma_cm_event_type type, int status) { post(*id.channel, {&id, Local{type, status}}); }

void queue_joined(Id& id, std::uint64_t serial) { post(*id.channel, {&id, Joined{serial}}); }

void repost(Id& id, Queued q) { post(*id.channel, std::move(q)); }

void route_connection(Id& id, std::uint32_t connection) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  id.connection = connection;
  r.connections[connection] = &id;
  const auto early = r.early.find(connection);
  if (early == r.early.end()) return;
  for (EngineEvent& e : early->second) post(id, std::move(e));
  r.early.erase(early);
}

int start_listening(Id& id) {
  const Device& d = dev();
  const auto listener = d.iwarp ? d.link->iw_listen(endpoint_of(&id.id.route.addr.src_addr, id.port))
                                : d.link->cm_listen(service_id(id.id.ps, id.port));
  if (!listener) return listener.error();
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  id.listener = *listener;
  r.listeners[*listener] = &id;
  if (const auto early = r.early_requests.find(*listener); early != r.early_requests.end()) {
    for (EngineEvent& e : early->second) id.held_requests.push_back(std::move(e));
    r.early_requests.erase(early);
  }
  return 0;
}

void accept_requests(Id& id) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  id.accepting = true;
  for (EngineEvent& e : id.held_requests) post(id, std::move(e));
  id.held_requests.clear();
}

void stop_listening(Id& id) {
  if (id.listener == 0) return;
  std::vector<EngineEvent> held;
  {
    Routes& r = routes();
    std::lock_guard lock(r.mutex);
    r.listeners.erase(id.listener);
    held.swap(id.held_requests);
  }
  const Device& d = dev();
  d.iwarp ? d.link->iw_stop_listening(id.listener) : d.link->cm_stop_listening(id.listener);
  id.listener = 0;
  id.accepting = false;
  // A REJ for each, or a closed TCP connection.
  for (const EngineEvent& e : held) std::visit([](const auto& event) { destroy_connection(event.id); }, e);
}

void unroute(Id& id) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  if (id.connection != 0) {
    r.connections.erase(id.connection);
    r.early.erase(id.connection);
  }
}

void purge(Id& id) {
  if (id.channel == nullptr) return;
  std::lock_guard lock(id.channel->mutex);
  std::erase_if(id.channel->queue, [&id](const Queued& q) {
    if (q.id != &id) return false;
    // The kernel waits for each of its events to be acknowledged before it destroys the ID.
    if (const auto* kernel = std::get_if<SystemEvent>(&q.what)) system::drop(kernel->event);
    return true;
  });
}

int fail(int err) {
  errno = err;
  return -1;
}

int wait_for(Id& id, rdma_cm_event_type expected) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(id.channel == nullptr ? nullptr : &id.channel->channel, &event) != 0) return -1;
  const rdma_cm_event_type got = event->event;
  const int status = event->status;
  rdma_ack_cm_event(event);
  if (got == expected) return 0;
  // The synchronous calls fail as librdmacm's do: the event's status, or ECONNREFUSED.
  return fail(status < 0 ? -status : status > 0 ? ECONNREFUSED : EINVAL);
}

}  // namespace softrdma::rdmacm

using namespace softrdma::rdmacm;

SRDMA_RDMACM_VERSION(rdma_create_event_channel, "RDMACM_1.0")
rdma_event_channel* srdma_rdmacm_rdma_create_event_channel() {
  auto* c = new (std::nothrow) Channel;
  if (c == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  c->channel.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (c->channel.fd < 0) {
    const int err = errno;
    delete c;
    errno = err;
    return nullptr;
  }
  return &c->channel;
}

SRDMA_RDMACM_VERSION(rdma_destroy_event_channel, "RDMACM_1.0")
void srdma_rdmacm_rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel == nullptr) return;
  system::close_twin(channel_of(channel));
  retire(channel_of(channel));
}

SRDMA_RDMACM_VERSION(rdma_get_cm_event, "RDMACM_1.0")
int srdma_rdmacm_rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) return fail(EINVAL);
  Channel& c = channel_of(channel);
  for (;;) {
    std::optional<Queued> taken;
    if (const int err = take(c, taken)) return fail(err);
    if (!taken) continue;
    Queued& q = *taken;
    Id& id = *q.id;
    auto* out = new (std::nothrow) Event;
    if (out == nullptr) {
      put_down(id);
      return fail(ENOMEM);
    }
    bool reported = true;
    if (const auto* local = std::get_if<Local>(&q.what)) {
      fill_local(id, *local, *out);
    } else if (const auto* joined = std::get_if<Joined>(&q.what)) {
      reported = translate_join(id, *joined, *out);
    } else if (const auto* kernel = std::get_if<SystemEvent>(&q.what)) {
      system::translate(id, kernel->event, *out);
    } else if (const auto* iwarp = std::get_if<core::IwarpEvent>(&q.what)) {
      reported = translate(id, *iwarp, *out);
    } else {
      reported = translate(id, std::get<core::CmEvent>(q.what), *out);
    }
    if (!reported) {
      delete out;
      put_down(id);
      continue;
    }
    Id& owner = id_of(out->event.id);
    {
      std::lock_guard lock(owner.mutex);
      ++owner.unacked_events;
    }
    put_down(id);
    *event = &out->event;
    return 0;
  }
}

SRDMA_RDMACM_VERSION(rdma_ack_cm_event, "RDMACM_1.0")
int srdma_rdmacm_rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return fail(EINVAL);
  Id& owner = id_of(event->id);
  {
    // Notified under the lock: rdma_destroy_id, waiting for this, frees the ID as soon as it
    // can take the lock again, and nothing of the ID may be touched after it is released.
    std::lock_guard lock(owner.mutex);
    --owner.unacked_events;
    owner.acked.notify_all();
  }
  delete reinterpret_cast<Event*>(event);
  return 0;
}
