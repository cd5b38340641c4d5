#include "daemon/backend/hip/hip_pinned_pool.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "daemon/backend/hip/hip_platform.h"
#include "daemon/backend/hip/hip_status.h"

namespace hrx::backend {

HipPinnedPool::~HipPinnedPool() {
  (void)BindDevice(device_);
  absl::MutexLock lock(&mu_);
  for (const Block& block : idle_) (void)hipHostFree(block.data);
}

absl::StatusOr<HipPinnedPool::BufferRef> HipPinnedPool::Take(uint64_t bytes) {
  Block block{0, nullptr};
  {
    absl::MutexLock lock(&mu_);
    auto fits =
        std::find_if(idle_.begin(), idle_.end(),
                     [bytes](const Block& b) { return b.bytes >= bytes; });
    if (fits != idle_.end()) {
      block = *fits;
      idle_.erase(fits);
    }
  }
  if (block.data == nullptr) {
    void* data = nullptr;
    HRX_HIP_RETURN_IF_ERROR(
        hipHostMalloc(&data, std::max<uint64_t>(bytes, 1), 0),
        absl::StrFormat("allocate a %u-byte pinned bounce buffer", bytes),
        "hipHostMalloc",
        "read and write in smaller pieces, or through shared buffers");
    block = Block{std::max<uint64_t>(bytes, 1), static_cast<uint8_t*>(data)};
  }
  return BufferRef(block.data, [pool = shared_from_this(), block](uint8_t*) {
    pool->Give(block);
  });
}

void HipPinnedPool::Give(Block block) {
  {
    absl::MutexLock lock(&mu_);
    if (idle_.size() < kMaxIdleBounceBuffers) {
      idle_.push_back(block);
      return;
    }
  }
  (void)BindDevice(device_);
  (void)hipHostFree(block.data);
}

size_t HipPinnedPool::idle_count() const {
  absl::MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace hrx::backend
