#include "emulator/core/receive_queue.hpp"

namespace softrdma::core {

std::optional<RecvWqe> take_recv(Device& d, Qp& q) {
  std::deque<RecvWqe>* queue = &q.rq;
  Srq* srq = nullptr;
  if (q.target.srq) {
    srq = d.find_srq(q.target.srq);
    queue = &srq->queue;
  }
  if (queue->empty()) return std::nullopt;
  RecvWqe r = std::move(queue->front());
  queue->pop_front();
  // The limit event fires once, when the queue drops below the armed limit (s10.2.9.3).
  if (srq && srq->limit && srq->queue.size() < srq->limit) {
    srq->limit = 0;
    d.raise(AsyncEventType::srq_limit_reached, q.target.srq);
  }
  return r;
}

bool recv_available(Device& d, const Qp& q) {
  return q.target.srq ? !d.find_srq(q.target.srq)->queue.empty() : !q.rq.empty();
}

}  // namespace softrdma::core
