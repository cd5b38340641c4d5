#include "daemon/core/pools.h"

#include <algorithm>

namespace hrx::daemon {

using backend::MemoryRef;

bool UploadStaging::NeedsDrain(uint64_t bytes) const {
  return pending_.size() >= kMaxPendingStagings ||
         bytes >
             kStagingLimitBytes - std::min(pending_bytes_, kStagingLimitBytes);
}

MemoryRef UploadStaging::TakeFitting(uint64_t bytes) {
  auto best = completed_.end();
  for (auto it = completed_.begin(); it != completed_.end(); ++it) {
    if ((*it)->size() >= bytes &&
        (best == completed_.end() || (*it)->size() < (*best)->size())) {
      best = it;
    }
  }
  if (best == completed_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  MemoryRef memory = std::move(*best);
  completed_.erase(best);
  completed_bytes_ -= memory->size();
  return memory;
}

void UploadStaging::AddPending(MemoryRef memory, backend::Fence fence) {
  pending_bytes_ += memory->size();
  pending_.push_back(Pending{std::move(memory), fence});
}

std::vector<MemoryRef> UploadStaging::Reclaim(backend::Fence completed) {
  std::vector<MemoryRef> evicted;
  std::vector<Pending> still_pending;
  for (Pending& entry : pending_) {
    if (entry.fence > completed) {
      still_pending.push_back(std::move(entry));
      continue;
    }
    pending_bytes_ -= entry.memory->size();
    const uint64_t size = entry.memory->size();
    if (size > kStagingLimitBytes) {
      evicted.push_back(std::move(entry.memory));
      ++evictions_;
      continue;
    }
    // Make room by evicting the smallest completed staging first.
    while (completed_.size() >= kMaxPendingStagings ||
           size > kStagingLimitBytes - completed_bytes_) {
      auto smallest =
          std::min_element(completed_.begin(), completed_.end(),
                           [](const MemoryRef& a, const MemoryRef& b) {
                             return a->size() < b->size();
                           });
      completed_bytes_ -= (*smallest)->size();
      evicted.push_back(std::move(*smallest));
      completed_.erase(smallest);
      ++evictions_;
    }
    completed_bytes_ += size;
    completed_.push_back(std::move(entry.memory));
  }
  pending_ = std::move(still_pending);
  return evicted;
}

std::vector<MemoryRef> UploadStaging::TakeAll() {
  std::vector<MemoryRef> all = std::move(completed_);
  for (Pending& entry : pending_) all.push_back(std::move(entry.memory));
  pending_.clear();
  completed_.clear();
  pending_bytes_ = completed_bytes_ = 0;
  return all;
}

std::vector<uint64_t> UploadStaging::pending_ids() const {
  std::vector<uint64_t> ids;
  for (const Pending& entry : pending_) ids.push_back(entry.memory->id());
  return ids;
}

std::vector<uint64_t> UploadStaging::completed_ids() const {
  std::vector<uint64_t> ids;
  for (const MemoryRef& memory : completed_) ids.push_back(memory->id());
  return ids;
}

PoolStats UploadStaging::stats() const {
  return PoolStats{completed_.size(), completed_bytes_, hits_, misses_,
                   evictions_};
}

MemoryRef StagingPool::Take(uint64_t size, StagingUsage usage) {
  auto it = classes_.find({size, usage});
  if (it == classes_.end() || it->second.empty()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  MemoryRef memory = std::move(it->second.back());
  it->second.pop_back();
  --entries_;
  bytes_ -= size;
  return memory;
}

void StagingPool::Give(MemoryRef memory, StagingUsage usage) {
  const uint64_t size = memory->size();
  std::vector<MemoryRef>& members = classes_[{size, usage}];
  if (members.size() >= kStagingClassCap ||
      size > kStagingPoolBytes - std::min(bytes_, kStagingPoolBytes)) {
    ++evictions_;
    return;  // released with `memory`
  }
  members.push_back(std::move(memory));
  ++entries_;
  bytes_ += size;
}

PoolStats StagingPool::stats() const {
  return PoolStats{entries_, bytes_, hits_, misses_, evictions_};
}

MemoryRef AllocationPool::Take(uint64_t bytes) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    // use_count 1: only the pool holds it, so no queued command still does.
    if ((*it)->size() == bytes && it->use_count() == 1) {
      ++hits_;
      MemoryRef memory = std::move(*it);
      free_.erase(it);
      bytes_ -= bytes;
      return memory;
    }
  }
  ++misses_;
  return nullptr;
}

void AllocationPool::Give(MemoryRef memory) {
  const uint64_t size = memory->size();
  if (size > kPoolMaxBufferBytes || free_.size() >= kPoolMaxEntries ||
      size > kPoolMaxBytes - bytes_) {
    ++evictions_;
    return;
  }
  bytes_ += size;
  free_.push_back(std::move(memory));
}

PoolStats AllocationPool::stats() const {
  return PoolStats{free_.size(), bytes_, hits_, misses_, evictions_};
}

}  // namespace hrx::daemon
