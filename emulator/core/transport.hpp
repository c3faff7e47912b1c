// The three engines of the transport (IBTA vol. 1 s9.7), as Linux rxe splits them: the
// requester turns send WQEs into request packets, the responder executes request packets and
// answers them, the completer turns answers (and their absence) into send completions. They
// share the Device's objects; device_net.cpp routes packets and time to them.
#pragma once

#include <optional>
#include <span>

#include "emulator/core/device.hpp"
#include "wire/ib_packet.hpp"

namespace softrdma::core {

struct Requester {
  // The next request packet of `qp`, if its send queue has one to send now.
  static std::optional<TxPacket> next(Device& d, Qp& qp, Time now);
  // Local operations at the head of the queue (LOCAL_INV, BIND_MW) execute when reached.
  static void execute_local(Device& d, Qp& qp, SendWqe& w);
};

struct Responder {
  static void on_request(Device& d, Qp& qp, const wire::IbPacket& p, const RxPacket& rx);
  // The next ACK/NAK, atomic ACK or READ response of `qp`.
  static std::optional<TxPacket> next(Device& d, Qp& qp);
};

struct Completer {
  static void on_response(Device& d, Qp& qp, const wire::IbPacket& p, Time now);
  static void on_timer(Device& d, Qp& qp, Time now);
  // Retires completed WQEs at the head of the send queue, in order, posting their WCs; a
  // failed one moves the QP to the error state.
  static void retire(Device& d, Qp& qp);
  // In SQD, ends draining (and raises SQ_DRAINED if asked) once nothing started is outstanding.
  static void note_if_drained(Device& d, Qp& qp);
  // Ends `w` with `status` (an error ends the QP too, once retired).
  static void fail(Device& d, Qp& qp, SendWqe& w, WcStatus status);
};

// Tag-matching SRQs (tag_matching.hpp): the responder routes a SEND by its TMH, and the
// completer ends a rendezvous when its READ does.
struct TagReceiver {
  static Srq* srq_of(Device& d, const Qp& qp);  // the QP's SRQ, if a tag-matching one
  // Whether a SEND starting with `first` finds a buffer now: a matching tag or an ordinary WQE.
  static bool can_receive(Device& d, Srq& srq, std::span<const std::uint8_t> first, bool whole);
  // Routes a SEND by its first packet, setting qp.recv and qp.recv_tm for the packets that
  // follow; false for a matched rendezvous request, which is handled whole here.
  static bool start(Device& d, Qp& qp, Srq& srq, std::span<const std::uint8_t> first, bool whole);
  // A rendezvous READ ended with `status`: the tagged receive completes; with `send_fin`
  // after a success, the FIN goes back to the sender.
  static void finish_rendezvous(Device& d, Qp& qp, const Rendezvous& r, WcStatus status, bool send_fin);
};

// The transport a QP type's packets carry in their opcode (IBTA vol. 1 s9.2, table 35).
constexpr wire::Transport transport_of(QpType t) {
  switch (t) {
    case QpType::rc:
      return wire::Transport::rc;
    case QpType::uc:
      return wire::Transport::uc;
    case QpType::ud:
      return wire::Transport::ud;
    case QpType::xrc_send:
    case QpType::xrc_recv:
      return wire::Transport::xrc;
  }
  return wire::Transport::rc;
}

WcOpcode wc_opcode(WrOpcode op);
bool is_read_or_atomic(WrOpcode op);

}  // namespace softrdma::core
