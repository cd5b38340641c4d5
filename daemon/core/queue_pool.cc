#include "daemon/core/queue_pool.h"

#include <utility>

#include "absl/strings/str_format.h"

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

uint32_t QueuePool::capacity() const {
  absl::MutexLock lock(&mu_);
  return capacity_;
}

absl::Status QueuePool::SetCapacity(uint32_t count) {
  if (count == 0 || count > kMaxQueueCount) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad_queue_count: set queue count %u: the pool holds 1 to %u queues. "
        "Fix: pass a count in that range.",
        count, kMaxQueueCount));
  }
  absl::MutexLock lock(&mu_);
  if (count == capacity_) return absl::OkStatus();
  if (!queues_.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "queue_pool_busy: set queue count %u: streams already run on %u "
        "queue(s) of a pool of %u. Fix: set the count before the first "
        "stream is created (or restart hrxd with --queue_count=%u).",
        count, queues_.size(), capacity_, count));
  }
  capacity_ = count;
  return absl::OkStatus();
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
