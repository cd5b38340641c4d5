#include "daemon/backend/cpu/cpu_queue.h"

#include <cstring>
#include <utility>

#include "daemon/backend/cpu/cpu_memory.h"

namespace hrx::backend {
namespace {

// The core only hands a queue memory from the same backend.
uint8_t* Bytes(const MemoryRef& memory) {
  return static_cast<CpuMemory*>(memory.get())->data();
}

}  // namespace

CpuQueue::CpuQueue() : worker_([this] { RunWorker(); }) {}

CpuQueue::~CpuQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

Fence CpuQueue::Enqueue(Work work, CompletionCallback callback) {
  absl::MutexLock lock(&mu_);
  const Fence fence = ++submitted_;
  pending_.push_back(Entry{fence, std::move(work), std::move(callback)});
  return fence;
}

void CpuQueue::RunWorker() {
  while (true) {
    Entry entry;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !pending_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (pending_.empty()) return;  // stopping and drained
      entry = std::move(pending_.front());
      pending_.pop_front();
    }
    absl::Status result = entry.work ? entry.work() : absl::OkStatus();
    absl::Status queue_status;
    {
      absl::MutexLock lock(&mu_);
      if (!result.ok() && status_.ok()) status_ = result;
      completed_ = entry.fence;
      queue_status = status_;
    }
    if (entry.callback) entry.callback(queue_status);
  }
}

absl::StatusOr<Fence> CpuQueue::EnqueueFill(const MemoryRef& dst,
                                            uint64_t offset, uint64_t length,
                                            uint8_t value) {
  return Enqueue(
      [dst, offset, length, value] {
        std::memset(Bytes(dst) + offset, value, length);
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueCopy(const MemoryRef& dst,
                                            uint64_t dst_offset,
                                            const MemoryRef& src,
                                            uint64_t src_offset,
                                            uint64_t length) {
  return Enqueue(
      [dst, dst_offset, src, src_offset, length] {
        // memmove: the core refuses overlap, but distinct views of one memfd
        // mapping must never be undefined behaviour here.
        std::memmove(Bytes(dst) + dst_offset, Bytes(src) + src_offset, length);
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueWrite(
    const MemoryRef& dst, uint64_t offset,
    std::shared_ptr<const std::string> bytes) {
  return Enqueue(
      [dst, offset, bytes = std::move(bytes)] {
        std::memcpy(Bytes(dst) + offset, bytes->data(), bytes->size());
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueRead(const MemoryRef& src,
                                            uint64_t offset, uint64_t length,
                                            void* host) {
  return Enqueue(
      [src, offset, length, host] {
        std::memcpy(host, Bytes(src) + offset, length);
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueHostCallback(
    CompletionCallback callback) {
  return Enqueue(nullptr, std::move(callback));
}

Fence CpuQueue::completed() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

absl::Status CpuQueue::Wait(Fence fence) {
  absl::MutexLock lock(&mu_);
  auto done = [this, fence]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_ >= fence;
  };
  mu_.Await(absl::Condition(&done));
  return status_;
}

}  // namespace hrx::backend
