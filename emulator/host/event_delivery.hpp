// Completion-channel and async events on their way from the engine to the shim.
//
// The engine queues them (core::Device::next_cq_event / next_async_event); whichever thread
// ran the engine moves them here under the host's lock, and hands them to the handlers after
// releasing it. Several threads may try at once (the progress thread and application threads
// on the fast path); one delivers at a time, in the order the engine raised the events, and
// a thread that finds another delivering leaves its events to it. Handlers therefore run on
// any thread that calls into the host, never under the host's lock, and may call into the
// host again; they must not call set_handlers().
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <variant>

#include "emulator/core/cm_types.hpp"
#include "emulator/core/iwarp_cm.hpp"
#include "emulator/core/verbs_types.hpp"

namespace softrdma::host {

using CqEventHandler = std::function<void(std::uint32_t cq)>;
using AsyncEventHandler = std::function<void(const core::AsyncEvent&)>;
using CmEventHandler = std::function<void(const core::CmEvent&)>;
using IwarpEventHandler = std::function<void(const core::IwarpEvent&)>;  // the iWARP host's own

class EventDelivery {
 public:
  // Events that come while a handler is empty are dropped.
  void set_handlers(CqEventHandler on_cq, AsyncEventHandler on_async);
  void set_cm_handler(CmEventHandler on_cm);

  void push(std::uint32_t cq);
  void push(const core::AsyncEvent& event);
  void push(core::CmEvent event);

  // Delivers what is queued, unless another thread is delivering already (it will deliver
  // these too).
  void deliver();

 private:
  using Event = std::variant<std::uint32_t, core::AsyncEvent, core::CmEvent>;
  bool pop(Event& out);

  std::mutex delivering_;  // held by the one thread calling handlers
  CqEventHandler on_cq_;   // guarded by delivering_
  AsyncEventHandler on_async_;
  CmEventHandler on_cm_;
  std::mutex queue_mutex_;
  std::deque<Event> queue_;           // guarded by queue_mutex_
  std::atomic<bool> pending_{false};  // !queue_.empty(), readable without the mutex
};

}  // namespace softrdma::host
