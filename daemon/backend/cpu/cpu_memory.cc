#include "daemon/backend/cpu/cpu_memory.h"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
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

// Wraps a memfd in a dma-buf through /dev/udmabuf (Linux 4.20+). The memfd
// must be sealed against shrinking and its size page-aligned.
absl::StatusOr<int> UdmabufFromMemfd(int memfd, uint64_t size) {
  const int device = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (device < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "dmabuf_unavailable: export dma-buf: /dev/udmabuf cannot be opened "
        "(%s); the CPU backend makes dma-bufs from memfds through it. Fix: "
        "load the udmabuf kernel module and give the daemon access to the "
        "device, or export as shm.",
        std::strerror(errno)));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (size % page != 0) {
    close(device);
    return absl::FailedPreconditionError(absl::StrFormat(
        "dmabuf_unaligned: export dma-buf: a %u-byte buffer is not a whole "
        "number of %u-byte pages. Fix: allocate a multiple of the page size.",
        size, page));
  }
  udmabuf_create request{};
  request.memfd = static_cast<uint32_t>(memfd);
  request.flags = UDMABUF_FLAGS_CLOEXEC;
  request.offset = 0;
  request.size = size;
  const int dmabuf = ioctl(device, UDMABUF_CREATE, &request);
  const int error = errno;
  close(device);
  if (dmabuf < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "dmabuf_unavailable: export dma-buf: UDMABUF_CREATE failed (%s). Fix: "
        "check the kernel's udmabuf limits, or export as shm.",
        std::strerror(error)));
  }
  return dmabuf;
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
  // Sealable, so that udmabuf can wrap it (it requires a shrink seal).
  const int fd = memfd_create("hrx-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
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
  // The size never changes: seal it, so importers can trust their mapping.
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
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

absl::StatusOr<int> CpuMemory::ExportFd(ExportKind kind) const {
  if (kind == ExportKind::kShm) {
    const int copy = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "export_failed: dup of a %u-byte memfd: %s. Fix: raise the daemon's "
          "open-file limit.",
          size_, std::strerror(errno)));
    }
    return copy;
  }
  return UdmabufFromMemfd(fd_, size_);
}

CpuMemory::~CpuMemory() {
  munmap(data_, size_);
  close(fd_);
  accounting_->in_use_bytes.fetch_sub(size_);
}

}  // namespace hrx::backend
