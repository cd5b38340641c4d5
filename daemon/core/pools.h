// Bounded pools of device memory, all per session (so reused memory never
// crosses to another tenant) and all counted:
//
// - UploadStaging, one per stream: the host-visible copies behind queued
//   uploads. At most kMaxPendingStagings pending or kStagingLimitBytes in
//   total, past which the stream completes its work first; completed staging
//   is kept (same bounds, smallest evicted first) and reused by the smallest
//   capacity that fits.
// - StagingPool: staging evicted from streams, reused by exact (size, usage),
//   at most kStagingClassCap per class and kStagingPoolBytes in total.
// - AllocationPool: freed buffers of at most kPoolMaxBufferBytes, at most
//   kPoolMaxEntries and kPoolMaxBytes in total, reused by exact size for
//   plain allocations once no queued command uses them.
//
// Thread-compatible: the owning session's lock guards them.
#ifndef HRX_DAEMON_CORE_POOLS_H_
#define HRX_DAEMON_CORE_POOLS_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "daemon/backend/backend.h"
#include "daemon/core/store_stats.h"

namespace hrx::daemon {

inline constexpr size_t kMaxPendingStagings = 8;
inline constexpr uint64_t kStagingLimitBytes = uint64_t{64} << 20;
inline constexpr size_t kStagingClassCap = 16;
inline constexpr uint64_t kStagingPoolBytes = uint64_t{256} << 20;
inline constexpr uint64_t kPoolMaxBufferBytes = uint64_t{64} << 20;
inline constexpr size_t kPoolMaxEntries = 16;
inline constexpr uint64_t kPoolMaxBytes = uint64_t{64} << 20;

using PoolStats = StoreStats;

class UploadStaging {
 public:
  // True when an upload of `bytes` must wait for the stream's earlier work.
  bool NeedsDrain(uint64_t bytes) const;
  // Removes and returns the smallest completed staging of at least `bytes`,
  // or nullptr (a miss) when none fits.
  backend::MemoryRef TakeFitting(uint64_t bytes);
  void AddPending(backend::MemoryRef memory, backend::Fence fence);
  // Moves pending staging whose fence has completed into the completed pool
  // and returns what the pool's bounds evicted.
  std::vector<backend::MemoryRef> Reclaim(backend::Fence completed);
  // Everything, pending or completed (the stream is going away).
  std::vector<backend::MemoryRef> TakeAll();

  size_t pending_count() const { return pending_.size(); }
  uint64_t pending_bytes() const { return pending_bytes_; }
  // Allocation ids, oldest pending first / completed pool in any order.
  std::vector<uint64_t> pending_ids() const;
  std::vector<uint64_t> completed_ids() const;
  PoolStats stats() const;

 private:
  struct Pending {
    backend::MemoryRef memory;
    backend::Fence fence;
  };
  std::vector<Pending> pending_;
  uint64_t pending_bytes_ = 0;
  std::vector<backend::MemoryRef> completed_;
  uint64_t completed_bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

enum class StagingUsage : uint8_t { kUpload = 1, kReadback = 2 };

class StagingPool {
 public:
  backend::MemoryRef Take(uint64_t size, StagingUsage usage);
  void Give(backend::MemoryRef memory, StagingUsage usage);
  PoolStats stats() const;

 private:
  std::map<std::pair<uint64_t, StagingUsage>, std::vector<backend::MemoryRef>>
      classes_;
  uint64_t entries_ = 0, bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

class AllocationPool {
 public:
  // A pooled allocation of exactly `bytes` that no queued command still
  // uses, or nullptr.
  backend::MemoryRef Take(uint64_t bytes);
  // Keeps `memory` when it fits the bounds; otherwise it is released.
  void Give(backend::MemoryRef memory);
  PoolStats stats() const;

 private:
  std::vector<backend::MemoryRef> free_;
  uint64_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_POOLS_H_
