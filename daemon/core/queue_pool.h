// The device's native queues: each tenant has its own bounded pool of them,
// so no queue is ever shared by two tenants — one tenant's long command or
// faulting kernel delays or fails only that tenant's streams. Within a
// tenant, streams are assigned round-robin, without priority or load
// awareness. Queues are created lazily, on first assignment.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_QUEUE_POOL_H_
#define HRX_DAEMON_CORE_QUEUE_POOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/core/device_set.h"
#include "daemon/core/tenants.h"

namespace hrx::daemon {

// Default size of the pool, as in the in-process runtime.
inline constexpr uint32_t kDefaultQueueCount = 8;
inline constexpr uint32_t kMaxQueueCount = 64;

// A queue's lease: the pool owns the queue and alone destroys it; a lease
// (a shared_ptr with no deleter of its own) only counts who still names it,
// so that a retired queue is destroyed once nothing does.
using QueueLease = std::shared_ptr<backend::Queue>;

struct QueueAssignment {
  uint32_t index;
  QueueLease queue;  // alive while leased, and at most until Close
};

class QueuePool {
 public:
  QueuePool(DeviceSet& devices, uint32_t capacity);

  // A queue of `tenant`'s own pool (index within that pool), made by the
  // tenant's backend. Making one may wait on the tenant's executor; only
  // that tenant's Assigns wait behind it.
  absl::StatusOr<QueueAssignment> Assign(const Tenant& tenant);
  // `tenant`'s backend was lost, or the tenant removed: its queues are set
  // aside (streams that still name them see them fail) and the next Assign
  // makes new ones.
  void Retire(const std::string& tenant);
  // Destroys the retired queues nothing leases any more (their streams,
  // events and waits are gone), with what they hold of their backend: an
  // executor's connection, thread and socket go with its last queue. Run
  // by the housekeeper, never on a queue's completion thread; it does not
  // wait for an Assign that is starting an executor. A queue's destruction
  // waits for its work, which a lost executor has already failed. Returns
  // how many it destroyed.
  size_t Sweep();
  // Retired queues not yet destroyed.
  size_t retired() const;
  uint32_t capacity() const;
  uint32_t created() const;

  // Sets each tenant pool's size. Only before the first queue exists:
  // afterwards a different count is FAILED_PRECONDITION "queue_pool_busy"
  // (repeating the current count is allowed). INVALID_ARGUMENT
  // outside 1..kMaxQueueCount.
  absl::Status SetCapacity(uint32_t count);

  // The longest any queue has had work outstanding without a fence
  // completing (zero when every queue is idle): see Queue::StalledSince.
  absl::Duration LongestStall(absl::Time now) const;

  // Waits until everything enqueued so far on every queue has completed.
  void DrainAll();
  // As DrainAll, but gives up after `limit`: false when some queue still had
  // work then (a hung or very long kernel).
  bool DrainAll(absl::Duration limit);
  // Destroys every queue (each drains first, running its completions) and
  // assigns none afterwards (UNAVAILABLE "shutting_down"). The daemon's
  // last step, taken while what those completions reach still exists.
  void Close();

 private:
  struct PooledQueue {
    std::unique_ptr<backend::Queue> queue;
    QueueLease lease;  // the pool's own; use_count() 1: nobody else's
  };
  // One tenant's queues. Its lock is held while a queue is made, which may
  // wait on the tenant's executor (starting it, or its answer): only that
  // tenant's Assigns wait behind it, never another tenant's. Taken before
  // mu_ (briefly, for the counters) or alone.
  struct TenantQueues {
    absl::Mutex mu;
    std::vector<PooledQueue> queues ABSL_GUARDED_BY(mu);
    uint32_t next ABSL_GUARDED_BY(mu) = 0;
    // Set aside (Retire, Close): an Assign that waited for it starts over.
    bool gone ABSL_GUARDED_BY(mu) = false;
  };

  // Leases, so that a queue swept meanwhile is not destroyed under a drain.
  std::vector<QueueLease> AllQueues() const;
  // Takes `pool`'s queues out and marks it gone.
  static std::vector<PooledQueue> Empty(TenantQueues& pool);

  DeviceSet& devices_;

  // Never held while anything waits on an executor.
  mutable absl::Mutex mu_;
  uint32_t capacity_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<TenantQueues>> pools_
      ABSL_GUARDED_BY(mu_);
  uint32_t created_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Queues of lost backends: kept (they fail whatever still names them)
  // until nothing leases them (Sweep) or Close. Taken alone.
  mutable absl::Mutex retired_mu_;
  std::vector<PooledQueue> retired_ ABSL_GUARDED_BY(retired_mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_QUEUE_POOL_H_
