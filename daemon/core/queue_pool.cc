#include "daemon/core/queue_pool.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::daemon {

QueuePool::QueuePool(DeviceSet& devices, uint32_t capacity)
    : devices_(devices), capacity_(capacity) {}

absl::StatusOr<QueueAssignment> QueuePool::Assign(const Tenant& tenant) {
  while (true) {
    std::shared_ptr<TenantQueues> pool;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) {
        return Refusal(Reason::kShuttingDown,
                       "create stream: hrxd is stopping and runs no new "
                       "queues. Fix: reconnect once it has restarted.");
      }
      std::shared_ptr<TenantQueues>& slot = pools_[tenant.name()];
      if (slot == nullptr) slot = std::make_shared<TenantQueues>();
      pool = slot;
    }
    // Unlocked pool-wide: making a queue may wait on this tenant's
    // executor, and no other tenant may wait behind it.
    absl::MutexLock lock(&pool->mu);
    if (pool->gone) continue;  // retired while this waited: a fresh pool
    const uint32_t index = pool->next;
    const bool make = index == pool->queues.size();
    if (make) {
      auto backend = devices_.For(tenant);
      if (!backend.ok()) return backend.status();
      auto queue = (*backend)->CreateQueue();
      if (!queue.ok()) return queue.status();
      PooledQueue pooled;
      pooled.queue = *std::move(queue);
      pooled.lease = QueueLease(pooled.queue.get(), [](backend::Queue*) {});
      pool->queues.push_back(std::move(pooled));
    }
    uint32_t capacity = 0;
    {
      absl::MutexLock counters(&mu_);
      if (make) ++created_;
      capacity = capacity_;
    }
    pool->next = (index + 1) % capacity;
    return QueueAssignment{index, pool->queues[index].lease};
  }
}

std::vector<QueuePool::PooledQueue> QueuePool::Empty(TenantQueues& pool) {
  absl::MutexLock lock(&pool.mu);
  pool.gone = true;
  pool.next = 0;
  return std::move(pool.queues);
}

void QueuePool::Retire(const std::string& tenant) {
  std::shared_ptr<TenantQueues> pool;
  {
    absl::MutexLock lock(&mu_);
    auto it = pools_.find(tenant);
    if (it == pools_.end()) return;
    pool = std::move(it->second);
    pools_.erase(it);
  }
  // Waits for an Assign of this tenant in progress, which its lost
  // executor answers at once (the loss fails every call).
  std::vector<PooledQueue> queues = Empty(*pool);
  absl::MutexLock retired_lock(&retired_mu_);
  for (auto& queue : queues) retired_.push_back(std::move(queue));
}

size_t QueuePool::Sweep() {
  std::vector<PooledQueue> unleased;
  {
    // Not mu_, which Assign holds while an executor starts.
    absl::MutexLock lock(&retired_mu_);
    // A retired queue is never handed out again, so once the pool's lease
    // is the only one, no other can appear.
    auto still_leased = [](const PooledQueue& pooled) {
      return pooled.lease.use_count() > 1;
    };
    auto gone =
        std::stable_partition(retired_.begin(), retired_.end(), still_leased);
    std::move(gone, retired_.end(), std::back_inserter(unleased));
    retired_.erase(gone, retired_.end());
  }
  for (PooledQueue& pooled : unleased) {
    // Dropping the last lease orders every earlier holder's use of the
    // queue before its destruction (unlocked: it may wait on its backend).
    pooled.lease.reset();
    pooled.queue.reset();
  }
  return unleased.size();
}

size_t QueuePool::retired() const {
  absl::MutexLock lock(&retired_mu_);
  return retired_.size();
}

void QueuePool::Close() {
  std::map<std::string, std::shared_ptr<TenantQueues>> closing;
  std::vector<PooledQueue> retired;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    closing.swap(pools_);
  }
  {
    absl::MutexLock retired_lock(&retired_mu_);
    retired.swap(retired_);
  }
  // Each queue drains as it is destroyed, unlocked.
  for (auto& [tenant, pool] : closing) Empty(*pool).clear();
  retired.clear();
}

std::vector<QueueLease> QueuePool::AllQueues() const {
  std::vector<std::shared_ptr<TenantQueues>> pools;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [tenant, pool] : pools_) pools.push_back(pool);
  }
  std::vector<QueueLease> all;
  for (const auto& pool : pools) {
    absl::MutexLock lock(&pool->mu);
    for (const auto& pooled : pool->queues) all.push_back(pooled.lease);
  }
  return all;
}

uint32_t QueuePool::capacity() const {
  absl::MutexLock lock(&mu_);
  return capacity_;
}

absl::Status QueuePool::SetCapacity(uint32_t count) {
  if (count == 0 || count > kMaxQueueCount) {
    return Refusal(
        Reason::kBadQueueCount,
        absl::StrFormat("set queue count %u: the pool holds 1 to %u queues. "
                        "Fix: pass a count in that range.",
                        count, kMaxQueueCount));
  }
  absl::MutexLock lock(&mu_);
  if (count == capacity_) return absl::OkStatus();
  if (created_ != 0) {
    return Refusal(
        Reason::kQueuePoolBusy,
        absl::StrFormat(
            "set queue count %u: streams already run on %u "
            "queue(s) of a pool of %u. Fix: set the count before the first "
            "stream is created (or restart hrxd with --queue_count=%u).",
            count, created_, capacity_, count));
  }
  capacity_ = count;
  return absl::OkStatus();
}

uint32_t QueuePool::created() const {
  absl::MutexLock lock(&mu_);
  return created_;
}

absl::Duration QueuePool::LongestStall(absl::Time now) const {
  absl::Duration longest = absl::ZeroDuration();
  for (const QueueLease& queue : AllQueues()) {
    longest = std::max(longest, queue->StalledSince(now));
  }
  return longest;
}

void QueuePool::DrainAll() {
  const std::vector<QueueLease> queues = AllQueues();
  for (const QueueLease& queue : queues) {
    auto fence = queue->EnqueueHostCallback([](absl::Status) {});
    if (fence.ok()) (void)queue->Wait(*fence);
  }
}

bool QueuePool::DrainAll(absl::Duration limit) {
  const std::vector<QueueLease> queues = AllQueues();
  // Shared with the callbacks, which may run after this returns.
  struct Pending {
    absl::Mutex mu;
    size_t remaining ABSL_GUARDED_BY(mu) = 0;
  };
  auto pending = std::make_shared<Pending>();
  for (const QueueLease& queue : queues) {
    {
      absl::MutexLock lock(&pending->mu);
      ++pending->remaining;
    }
    auto fence = queue->EnqueueHostCallback([pending](absl::Status) {
      absl::MutexLock lock(&pending->mu);
      --pending->remaining;
    });
    if (!fence.ok()) {
      absl::MutexLock lock(&pending->mu);
      --pending->remaining;
    }
  }
  absl::MutexLock lock(&pending->mu);
  auto drained = [&pending]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return pending->remaining == 0;
  };
  return pending->mu.AwaitWithTimeout(absl::Condition(&drained), limit);
}

}  // namespace hrx::daemon
