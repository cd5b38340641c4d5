// The device's bounded pool of native queues, shared by every stream of every
// session. Streams are assigned round-robin, without priority or load
// awareness: a long command can delay other streams on the same queue.
// Queues are created lazily, on first assignment.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_QUEUE_POOL_H_
#define HRX_DAEMON_CORE_QUEUE_POOL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"

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
  QueuePool(backend::Backend& backend, uint32_t capacity);

  absl::StatusOr<QueueAssignment> Assign();
  uint32_t capacity() const;
  uint32_t created() const;

  // Sets the pool's size. Only before the first queue exists: afterwards a
  // different count is FAILED_PRECONDITION "queue_pool_busy" (repeating the
  // current count is allowed). INVALID_ARGUMENT outside 1..kMaxQueueCount.
  absl::Status SetCapacity(uint32_t count);

  // Waits until everything enqueued so far on every queue has completed.
  void DrainAll();

 private:
  backend::Backend& backend_;

  mutable absl::Mutex mu_;
  uint32_t capacity_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<backend::Queue>> queues_ ABSL_GUARDED_BY(mu_);
  uint32_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_QUEUE_POOL_H_
