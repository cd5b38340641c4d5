// Pinned host buffers that reads and writes of ordinary (pageable) host
// memory bounce through. A copy between the device and pageable memory is
// synchronous with respect to the host: it would block the enqueuing thread
// until the stream reached it, which may wait on another queue, and so on a
// later call of the same client. Through a pinned buffer the copy stays
// asynchronous; the host side is copied by memcpy when enqueuing (writes)
// or once the read completed.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_PINNED_POOL_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_PINNED_POOL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hrx::backend {

// How many idle bounce buffers a queue keeps for reuse (each as large as
// the largest transfer it served); beyond that, returned buffers are freed.
inline constexpr size_t kMaxIdleBounceBuffers = 4;

class HipPinnedPool : public std::enable_shared_from_this<HipPinnedPool> {
 public:
  // A pinned buffer of at least `bytes`, back in the pool (or freed) when
  // the last reference goes.
  using BufferRef = std::shared_ptr<uint8_t>;

  explicit HipPinnedPool(int device) : device_(device) {}
  ~HipPinnedPool();
  absl::StatusOr<BufferRef> Take(uint64_t bytes);
  size_t idle_count() const;

 private:
  struct Block {
    uint64_t bytes;
    uint8_t* data;
  };
  void Give(Block block);

  const int device_;
  mutable absl::Mutex mu_;
  std::vector<Block> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_PINNED_POOL_H_
