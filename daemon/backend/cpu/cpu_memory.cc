#include "daemon/backend/cpu/cpu_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/bytes.h"

namespace hrx::backend {
namespace {

// Takes `bytes` from the device limit, or refuses without changing anything.
absl::Status Reserve(CpuAccounting& accounting, uint64_t bytes) {
  uint64_t used = accounting.in_use_bytes.load(std::memory_order_relaxed);
  while (true) {
    if (bytes > accounting.limit_bytes - std::min(used, accounting.limit_bytes)) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "device_memory_exhausted: allocate %s: the device would use %s of its "
          "%s (%u + %u > %u bytes). Fix: free buffers, or start hrxd with a "
          "larger --cpu_memory_bytes.",
          shared::FormatBytes(bytes), shared::FormatBytes(used + bytes),
          shared::FormatBytes(accounting.limit_bytes), used, bytes,
          accounting.limit_bytes));
    }
    if (accounting.in_use_bytes.compare_exchange_weak(used, used + bytes)) {
      return absl::OkStatus();
    }
  }
}

uint64_t NextMemoryId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

absl::StatusOr<std::shared_ptr<CpuMemory>> CpuMemory::Create(
    uint64_t bytes, MemoryKind kind,
    std::shared_ptr<CpuAccounting> accounting) {
  if (absl::Status reserved = Reserve(*accounting, bytes); !reserved.ok()) {
    return reserved;
  }
  auto release = [&] { accounting->in_use_bytes.fetch_sub(bytes); };
  const int fd = memfd_create("hrx-buffer", MFD_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    release();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memfd_failed: allocate %u bytes: memfd_create: %s. Fix: raise the "
        "daemon's open-file limit.",
        bytes, std::strerror(error)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    release();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memfd_failed: allocate %u bytes: ftruncate: %s. Fix: free memory or "
        "allocate less.",
        bytes, std::strerror(error)));
  }
  void* data =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(fd);
    release();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "mmap_failed: allocate %u bytes: mmap: %s. Fix: free memory or "
        "allocate less.",
        bytes, std::strerror(error)));
  }
  return std::shared_ptr<CpuMemory>(new CpuMemory(
      bytes, kind, fd, static_cast<uint8_t*>(data), std::move(accounting)));
}

CpuMemory::CpuMemory(uint64_t size, MemoryKind kind, int fd, uint8_t* data,
                     std::shared_ptr<CpuAccounting> accounting)
    : size_(size),
      kind_(kind),
      id_(NextMemoryId()),
      fd_(fd),
      data_(data),
      accounting_(std::move(accounting)) {}

CpuMemory::~CpuMemory() {
  munmap(data_, size_);
  close(fd_);
  accounting_->in_use_bytes.fetch_sub(size_);
}

}  // namespace hrx::backend
