#include "daemon/core/queue_pool.h"

#include <utility>

namespace hrx::daemon {

QueuePool::QueuePool(backend::Backend& backend, uint32_t capacity)
    : backend_(backend), capacity_(capacity) {}

absl::StatusOr<QueueAssignment> QueuePool::Assign() {
  absl::MutexLock lock(&mu_);
  const uint32_t index = next_;
  if (index == queues_.size()) {
    auto queue = backend_.CreateQueue();
    if (!queue.ok()) return queue.status();
    queues_.push_back(*std::move(queue));
  }
  next_ = (next_ + 1) % capacity_;
  return QueueAssignment{index, queues_[index].get()};
}

uint32_t QueuePool::created() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(queues_.size());
}

void QueuePool::DrainAll() {
  std::vector<backend::Queue*> queues;
  {
    absl::MutexLock lock(&mu_);
    for (auto& queue : queues_) queues.push_back(queue.get());
  }
  for (backend::Queue* queue : queues) {
    auto fence = queue->EnqueueHostCallback([](absl::Status) {});
    if (fence.ok()) (void)queue->Wait(*fence);
  }
}

}  // namespace hrx::daemon
