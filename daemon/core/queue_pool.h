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

struct QueueAssignment {
  uint32_t index;
  backend::Queue* queue;  // owned by the pool, alive until the pool dies
};

class QueuePool {
 public:
  QueuePool(DeviceSet& devices, uint32_t capacity);

  // A queue of `tenant`'s own pool (index within that pool), made by the
  // tenant's backend.
  absl::StatusOr<QueueAssignment> Assign(const Tenant& tenant);
  // `tenant`'s backend was lost: its queues are set aside (streams that
  // still name them see them fail) and the next Assign makes new ones.
  void Retire(const std::string& tenant);
  uint32_t capacity() const;
  uint32_t created() const;

  // Sets each tenant pool's size. Only before the first queue exists:
  // afterwards a different count is FAILED_PRECONDITION "queue_pool_busy"
  // (repeating the current count is allowed). INVALID_ARGUMENT
  // outside 1..kMaxQueueCount.
  absl::Status SetCapacity(uint32_t count);

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
  DeviceSet& devices_;

  mutable absl::Mutex mu_;
  uint32_t capacity_ ABSL_GUARDED_BY(mu_);
  struct TenantQueues {
    std::vector<std::unique_ptr<backend::Queue>> queues;
    uint32_t next = 0;
  };
  std::map<std::string, TenantQueues> pools_ ABSL_GUARDED_BY(mu_);
  // Queues of lost backends: kept (they fail whatever still names them)
  // until Close, since streams hold their addresses.
  std::vector<std::unique_ptr<backend::Queue>> retired_ ABSL_GUARDED_BY(mu_);
  uint32_t created_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<backend::Queue*> AllQueues() const;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_QUEUE_POOL_H_
