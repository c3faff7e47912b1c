#include "emulator/host/event_delivery.hpp"

namespace softrdma::host {

void EventDelivery::set_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) {
  std::lock_guard lock(delivering_);
  on_cq_ = std::move(on_cq);
  on_async_ = std::move(on_async);
}

void EventDelivery::set_cm_handler(CmEventHandler on_cm) {
  std::lock_guard lock(delivering_);
  on_cm_ = std::move(on_cm);
}

void EventDelivery::push(std::uint32_t cq) {
  std::lock_guard lock(queue_mutex_);
  queue_.emplace_back(cq);
  pending_.store(true);
}

void EventDelivery::push(const core::AsyncEvent& event) {
  std::lock_guard lock(queue_mutex_);
  queue_.emplace_back(event);
  pending_.store(true);
}

void EventDelivery::push(core::CmEvent event) {
  std::lock_guard lock(queue_mutex_);
  queue_.emplace_back(std::move(event));
  pending_.store(true);
}

bool EventDelivery::pop(Event& out) {
  std::lock_guard lock(queue_mutex_);
  if (queue_.empty()) return false;
  out = std::move(queue_.front());
  queue_.pop_front();
  pending_.store(!queue_.empty());
  return true;
}

void EventDelivery::deliver() {
  // Every thread that pushes calls deliver() afterwards, so a stale `false` here only means
  // that thread will deliver.
  while (pending_.load()) {
    std::unique_lock delivering(delivering_, std::try_to_lock);
    if (!delivering) return;  // the thread holding it delivers ours as well
    Event e;
    while (pop(e)) {
      if (const auto* cq = std::get_if<std::uint32_t>(&e)) {
        if (on_cq_) on_cq_(*cq);
      } else if (const auto* async = std::get_if<core::AsyncEvent>(&e)) {
        if (on_async_) on_async_(*async);
      } else if (on_cm_) {
        on_cm_(std::get<core::CmEvent>(e));
      }
    }
    // An event pushed after the last pop, by a thread whose try_lock failed, is ours to
    // deliver: the loop condition looks again.
  }
}

}  // namespace softrdma::host
