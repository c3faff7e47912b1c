// The objects of softrdma's librdmacm: event channels, communication IDs and events, each an
// rdma-core struct the application reads at fixed offsets, followed by what the library keeps
// beside it. The protocol underneath is the engine's connection manager (emulator/core/
// connection_manager.hpp), reached through the device's link (private_device.hpp); this
// layer adds what rdma_cm adds over IBTA's CM: IP addresses and ports (annex A11), the QP's
// transitions, and events on a pollable channel.
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "emulator/core/cm_types.hpp"
#include "emulator/core/iwarp_cm.hpp"
#include "verbs-shim/rdmacm/rdmacm_api.hpp"
#include "wire/cm_mad.hpp"

namespace softrdma::host {
class DeviceLink;
}

namespace softrdma::rdmacm {

namespace core = softrdma::core;  // for the exported functions, defined outside this namespace

struct Id;

// RDMA_UDP_QKEY: the Q_Key of rdma_cm's UD QPs and multicast groups in RDMA_PS_UDP.
inline constexpr std::uint32_t kUdpQkey = 0x01234567;

// The IP CM service ID of a port in an rdma_cm port space (annex A11.3.1).
inline std::uint64_t service_id(rdma_port_space ps, std::uint16_t port) {
  return wire::ip_cm_service_id(static_cast<std::uint8_t>(ps & 0xFF), port);
}

// An event the library made itself (address and route resolution, connection errors).
struct Local {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_RESOLVED;
  int status = 0;
};

// RDMA_CM_EVENT_MULTICAST_JOIN for the ID's membership `serial` (multicast.cpp).
struct Joined {
  std::uint64_t serial = 0;
};

// What the device's connection manager reports: the IB CM's events (RoCE), or the iWARP
// CM's (core/iwarp_cm.hpp).
using EngineEvent = std::variant<core::CmEvent, core::IwarpEvent>;

// An event of the kernel's rdma_cm for a shell ID (system_cm.hpp), not yet acknowledged.
struct SystemEvent {
  rdma_cm_event* event = nullptr;
};

// An event on its way to rdma_get_cm_event: for `id` (a listener, for a request), from the
// engine or made here.
struct Queued {
  Id* id = nullptr;
  std::variant<Local, core::CmEvent, Joined, core::IwarpEvent, SystemEvent> what;
};

struct Twin;  // the kernel's channel beside this one, and its pump (system_cm.cpp)

struct Channel {
  rdma_event_channel channel{};  // first: the application holds &channel; fd is an eventfd
  std::mutex mutex;
  std::deque<Queued> queue;  // one eventfd count per entry
  int ids = 0;               // IDs reporting here: destroying the channel waits for none
  Twin* twin = nullptr;      // made by the first shell ID on the channel
};

// What rdma_get_cm_event hands out; rdma_ack_cm_event frees it.
struct Event {
  rdma_cm_event event{};  // first
  std::array<std::uint8_t, 256> private_data{};
};

// A multicast group an ID joined (rdma_join_multicast).
struct Membership {
  std::uint64_t serial = 0;  // unique in the process: its join event names it
  core::Gid mgid{};          // the group's address as a GID (multicast.cpp)
  void* context = nullptr;   // the join's: its event's private_data
  bool send_only = false;    // RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: the QP is not attached
};

enum class IdState : std::uint8_t {
  idle,
  bound,
  addr_resolved,
  route_resolved,
  listening,
  connecting,  // REQ or SIDR_REQ sent
  requested,   // a REQ or SIDR_REQ from a peer, not yet answered
  accepted,    // REP sent, waiting for the RTU
  replied,     // REP received, no QP to ready: waiting for rdma_establish
  connected,
  disconnecting,  // DREQ sent
  disconnected,
};

struct Id {
  rdma_cm_id id{};            // first
  rdma_cm_id* sys = nullptr;  // a shell's kernel ID (system_cm.hpp): every call goes to it
  Channel* channel = nullptr;
  bool own_channel = false;  // a synchronous ID (rdma_create_ep): its calls wait for their events
  IdState state = IdState::idle;
  std::uint16_t port = 0;        // host order; 0 until bound
  std::uint32_t connection = 0;  // the engine's connection (its local communication ID)
  std::uint32_t listener = 0;    // the engine's listen handle, from rdma_bind_addr on
  // Requests that came between rdma_bind_addr and rdma_listen: rdma_listen reports them.
  bool accepting = false;
  std::vector<EngineEvent> held_requests;
  bool peer_disconnected = false;  // a DREQ came: rdma_disconnect answers it
  std::optional<wire::CmReq> req;  // sent or received
  std::optional<wire::CmRep> rep;
  std::uint8_t responder_resources = 0;     // what the QP ends up with (max_dest_rd_atomic)
  std::uint8_t initiator_depth = 0;         // (max_rd_atomic)
  std::uint32_t sq_psn = 0;                 // the peer's starting PSN (its REQ's or REP's)
  std::uint32_t rq_psn = 0;                 // ours, sent in our REQ or REP
  ibv_sa_path_rec path{};                   // route.path_rec points here once resolved
  std::uint8_t tos = 0;                     // RDMA_OPTION_ID_TOS: the GRH's traffic class
  std::optional<std::uint8_t> ack_timeout;  // RDMA_OPTION_ID_ACK_TIMEOUT
  int unacked_events = 0;                   // rdma_destroy_id waits for these (rdma_cma.h)
  // Events rdma_get_cm_event has taken off the channel and not yet handed out: it still reads
  // the ID, so rdma_destroy_id waits for these too.
  std::atomic<int> events_in_hand{0};
  std::mutex mutex;
  std::condition_variable acked;
  bool own_cqs = false;  // send_cq and recv_cq (and their channels) are this library's
  // A passive rdma_create_ep's QP attributes: rdma_get_request gives each request's ID a QP.
  std::optional<ibv_qp_init_attr> request_qp;
  std::vector<Membership> groups;  // guarded by `mutex`
};

inline Id& id_of(rdma_cm_id* id) { return *reinterpret_cast<Id*>(id); }
inline Channel& channel_of(rdma_event_channel* c) { return *reinterpret_cast<Channel*>(c); }

// The process's device, as rdma_cm sees it (device_binding.cpp).
struct Device {
  host::DeviceLink* link = nullptr;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;        // rdma_create_qp's when the application gives none
  sockaddr_storage address{};  // the address the device holds, port 0
  core::Gid gid{};
  bool iwarp = false;  // srdmaiw0: connections through the iWARP CM (iwarp_connection.cpp)
};

// The device, started on `preferred` when it has not started yet and nothing in the
// environment chooses its address; null with errno set (ENODEV) when it cannot start.
const Device* device(const sockaddr* preferred);
// The device, once an ID has been bound (and so the device started).
inline const Device& dev() { return *device(nullptr); }
// Whether `address` (port ignored) is the device's, or a wildcard of either family.
bool is_wildcard(const sockaddr* address);
bool serves(const Device& d, const sockaddr* address);
// Binds `id` to `address` (wildcard or the device's) and a port: its own, or a free one for 0.
// 0 or an errno value (ENODEV for an address no device holds, EADDRINUSE for a taken port).
int bind_id(Id& id, const sockaddr* address);
void release_port(Id& id);
socklen_t address_length(const sockaddr* address);
core::Gid gid_of(const sockaddr* address);
std::uint16_t port_of(const sockaddr* address);  // host order

// Gives `id` the one path of a RoCE port between its two addresses (cm_id.cpp).
void fill_path(Id& id);
// A listener's request as a new ID on its channel, between `local` and `remote`, in state
// requested (connection.cpp); null when out of memory.
Id* new_passive_id(Id& listener, const sockaddr_storage& local, const sockaddr_storage& remote,
                   const core::Gid& remote_gid);

// Events (event_channel.cpp).
void queue_local(Id& id, rdma_cm_event_type type, int status = 0);
void queue_joined(Id& id, std::uint64_t serial);
// Queues an event taken off another channel on the ID's (rdma_migrate_id).
void repost(Id& id, Queued q);
// Sends the engine's events for `connection` (or `listener`) to `id` from now on, with any
// that came before it was known.
void route_connection(Id& id, std::uint32_t connection);
// Takes `id`'s port's requests from the engine: held from rdma_bind_addr on, so that a
// client told the port before the server calls rdma_listen (qperf does) is not refused,
// and reported from rdma_listen on (accept_requests). 0 or an errno value.
int start_listening(Id& id);
// bind_id, then start_listening. A port chosen for port 0 may be another process's on the same
// softrdmad (each process chooses its own): then the next free one is tried.
int bind_and_listen(Id& id, const sockaddr* address);
void accept_requests(Id& id);
// Gives the port's requests up (an explicitly bound ID used to connect, or destroyed): the
// held ones are refused.
void stop_listening(Id& id);
void unroute(Id& id);
// Drops the events still queued for `id` (it is being destroyed).
void purge(Id& id);
// Makes the engine's events flow to the routes above (once).
void start_events(host::DeviceLink& link);

// A forked child gets a device of its own (verbs-shim/fork.cpp), so it forgets the parent's:
// its device, ports and event routes (fork.cpp calls these; the parent's objects are left,
// never freed, as their locks may have been held by threads the child does not have).
void forget_binding_after_fork() noexcept;
void forget_routes_after_fork() noexcept;
// Waits for the next event on a synchronous ID's own channel; it must be `expected`.
int wait_for(Id& id, rdma_cm_event_type expected);

// The engine's events become the application's (connection.cpp); false when one is
// consumed here without reaching it.
bool translate(Id& id, const core::CmEvent& e, Event& out);

// The iWARP device's side of the connection calls (iwarp_connection.cpp), over the iWARP CM:
// TCP and the MPA exchange instead of REQ/REP/RTU, the QP moved to RTS by the CM, private
// data without annex A11's header. Each returns 0 or -1 with errno, as the calls do.
int iwarp_connect(Id& id, const rdma_conn_param* param);
int iwarp_accept(Id& id, const rdma_conn_param* param);
int iwarp_reject(Id& id, std::span<const std::uint8_t> private_data);
int iwarp_disconnect(Id& id);
bool translate(Id& id, const core::IwarpEvent& e, Event& out);
// The TCP endpoint of an address and port (a wildcard: the device's address).
core::TcpEndpoint endpoint_of(const sockaddr* address, std::uint16_t port);
// Ends an engine connection or refuses a held request, on whichever CM the device has.
void destroy_connection(std::uint32_t connection);
// A join's event (multicast.cpp): the QP attached to the group as it is taken, as rdma-core
// attaches it; false when the ID has left the group since.
bool translate_join(Id& id, const Joined& j, Event& out);
// Gives `id` the QP `qp` (created on its device), moved to INIT, or for UD to RTS
// (rdma_create_qp's contract); 0 or an errno value (the QP is destroyed then).
int create_qp_on(Id& id, ibv_qp* qp);
// CQs (with completion channels) for a QP whose attributes name none, as rdma_create_ep's
// users expect (rdma_get_send_comp reads them from the ID); and their end.
int create_missing_cqs(Id& id, ibv_qp_init_attr_ex& attr);
void destroy_own_cqs(Id& id);
// Frees the request event rdma_get_request left in id->event (no longer counted as unacked).
void release_request_event(Id& id);

// Sets errno to `err` and returns -1, as librdmacm's calls fail.
int fail(int err);

}  // namespace softrdma::rdmacm
