// The communication manager of one port (IBTA vol. 1 chapter 12): connections set up with
// REQ/REP/RTU, refused with REJ, delayed with MRA, torn down with DREQ/DREP, and UD services
// resolved with SIDR_REQ/SIDR_REP. Sans-I/O like the rest of the engine: it takes MADs that
// arrived on QP1, consumer calls and the time, and returns MADs to send, events and its next
// deadline. Moving the consumer's QP through INIT/RTR/RTS with what the MADs carry is the
// consumer's business (as librdmacm does over the kernel's CM).
//
// Every MAD that expects an answer (REQ, REP, DREQ, SIDR_REQ) is resent when the answer does
// not come within the response timeout, up to the retry count, and a duplicate of a MAD
// already answered is answered again (s12.9.1, s12.9.6).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>

#include "emulator/core/cm_types.hpp"
#include "emulator/core/counters.hpp"
#include "emulator/core/expected.hpp"
#include "emulator/core/verbs_types.hpp"
#include "wire/cm_mad.hpp"

namespace softrdma::core {

// A MAD for the GSI to send to QP1 at `to`.
struct OutgoingMad {
  Gid to{};
  wire::CmMad mad;
};

class ConnectionManager {
 public:
  // `local_gid` and `ca_guid` fill the REQ's and REP's addressing fields; `id_seed` varies the
  // communication IDs (s12.6.5: unique among the port's connections).
  ConnectionManager(const Gid& local_gid, std::uint64_t ca_guid, std::uint32_t id_seed);

  // Consumer calls. Each returns 0 or an errno value: EINVAL for an unknown ID, a call the
  // connection's state does not take, or oversized private data; EADDRINUSE for a service ID
  // already listened on.
  Expected<std::uint32_t> listen(std::uint64_t service_id);
  // A service that stops being listened on stays reserved for one response timeout (with its
  // IP CM port in every port space): a REQ for it meanwhile is not answered, so that its retry
  // finds a listener the server makes again (perftest -R listens anew for its data
  // connection) rather than a REJ.
  int stop_listening(Time now, std::uint32_t listener);
  Expected<std::uint32_t> connect(Time now, const CmConnect& request);                 // sends REQ
  int accept(Time now, std::uint32_t id, const CmAccept& reply);                       // sends REP
  int ready(Time now, std::uint32_t id, std::span<const std::uint8_t> private_data);   // sends RTU
  int reject(Time now, std::uint32_t id, std::span<const std::uint8_t> private_data);  // REJ, consumer reject
  // DREQ when established; DREP when the peer's DREQ is waiting for one.
  int disconnect(Time now, std::uint32_t id, std::span<const std::uint8_t> private_data);
  Expected<std::uint32_t> resolve_service(Time now, const CmServiceQuery& query);  // sends SIDR_REQ
  int answer_service(Time now, std::uint32_t id, const CmServiceAnswer& answer);   // sends SIDR_REP
  // Forgets the connection. One the peer still counts on hears of it as IBTA's CM does when
  // its consumer goes away: REJ before establishment, DREQ after.
  void destroy(Time now, std::uint32_t id);

  // The network side.
  void receive(Time now, const Gid& from, const wire::CmMad& mad);
  void note_malformed() { ++counters_.malformed; }
  std::optional<OutgoingMad> next_mad();
  bool has_mad_to_send() const { return !outbox_.empty(); }
  void advance(Time now);
  std::optional<Time> next_deadline() const;
  std::optional<CmEvent> next_event();

  const CmCounters& counters() const { return counters_; }
  // The REQ a connection was set up with, on either side (what its QP's attributes come from).
  const wire::CmReq* request_of(std::uint32_t id) const;
  const wire::CmRep* reply_of(std::uint32_t id) const;

 private:
  enum class State : std::uint8_t {
    req_sent,
    req_rcvd,
    rep_sent,
    rep_rcvd,
    established,
    dreq_sent,
    dreq_rcvd,
    timewait,
    sidr_req_sent,
    sidr_req_rcvd,
  };
  struct Connection {
    State state = State::req_sent;
    std::uint32_t local_id = 0;
    std::uint32_t remote_id = 0;
    Gid remote_gid{};
    std::uint64_t tid = 0;  // of the exchange under way
    std::uint32_t listener = 0;
    std::optional<wire::CmReq> req;  // sent or received
    std::optional<wire::CmRep> rep;
    std::optional<wire::CmMad> last_sent;  // what a timeout or a duplicate sends again
    Time resend_at = 0;                    // 0: nothing awaits an answer
    Time response_timeout = 0;
    std::uint8_t retries_left = 0;
  };

  Connection* find(std::uint32_t id);
  const Connection* find(std::uint32_t id) const;
  Connection* find_remote(const Gid& from, std::uint32_t remote_id);
  std::optional<std::uint32_t> listener_for(std::uint64_t service_id) const;
  bool reserved(Time now, std::uint64_t service_id);
  // A connection this side starts (REQ or SIDR_REQ): a new ID and exchange, our timeout.
  Connection& open(State state, const Gid& remote);
  // A connection a peer starts (its REQ or SIDR_REQ, exchange `tid`) for `listener`.
  Connection& open_for(State state, const Gid& from, std::uint32_t remote_id, std::uint64_t tid,
                       std::uint32_t listener);
  std::uint32_t new_id();
  std::uint64_t new_tid();
  // Sends a MAD on `c`'s behalf; with an answer expected, arms the resend timer.
  void send(Connection& c, wire::CmMessage message, std::optional<Time> await_until = std::nullopt);
  void send_to(const Gid& to, std::uint64_t tid, wire::CmMessage message);
  // A REJ of `c`'s exchange (s12.6.7); `j` may carry private data.
  void send_rej(Connection& c, std::uint8_t message_rejected, std::uint16_t reason, wire::CmRej j = {});
  void reject_unknown(const Gid& from, std::uint64_t tid, std::uint32_t remote_id, std::uint8_t message_rejected,
                      std::uint16_t reason);
  void emit(CmEventType type, const Connection& c, std::optional<wire::CmMad> mad);

  void on_req(Time now, const Gid& from, const wire::CmMad& mad);
  void on_rep(Time now, const Gid& from, const wire::CmMad& mad);
  void on_rtu(const Gid& from, const wire::CmMad& mad);
  void on_rej(const Gid& from, const wire::CmMad& mad);
  void on_mra(Time now, const Gid& from, const wire::CmMad& mad);
  void on_dreq(const Gid& from, const wire::CmMad& mad);
  void on_drep(const Gid& from, const wire::CmMad& mad);
  void on_sidr_req(Time now, const Gid& from, const wire::CmMad& mad);
  void on_sidr_rep(const Gid& from, const wire::CmMad& mad);
  void on_timeout(Time now, Connection& c);

  Gid local_gid_;
  std::uint64_t ca_guid_;
  std::uint32_t next_id_;
  std::uint64_t next_tid_;
  std::map<std::uint32_t, std::uint64_t> listeners_;  // handle -> service ID
  std::map<std::uint64_t, Time> reserved_until_;      // services no longer listened on, for a while
  std::uint32_t next_listener_ = 1;
  std::map<std::uint32_t, Connection> connections_;  // by local ID
  std::deque<OutgoingMad> outbox_;
  std::deque<CmEvent> events_;
  CmCounters counters_;
};

}  // namespace softrdma::core
