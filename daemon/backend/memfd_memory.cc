#include "daemon/backend/memfd_memory.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/bytes.h"
#include "shared/refusal.h"

namespace hrx::backend {

absl::Status MemoryAccounting::Reserve(uint64_t bytes) {
  uint64_t used = in_use_bytes_.load(std::memory_order_relaxed);
  while (true) {
    if (bytes > limit_bytes_ - std::min(used, limit_bytes_)) {
      return Refusal(
          Reason::kDeviceMemoryExhausted,
          absl::StrFormat(
              "allocate %s: the device would use %s of "
              "its %s (%u + %u > %u bytes). Fix: free buffers, or %s.",
              shared::FormatBytes(bytes), shared::FormatBytes(used + bytes),
              shared::FormatBytes(limit_bytes_), used, bytes, limit_bytes_,
              fix_));
    }
    if (in_use_bytes_.compare_exchange_weak(used, used + bytes)) {
      return absl::OkStatus();
    }
  }
}

uint64_t NextMemoryId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

absl::StatusOr<MemfdMapping> MemfdMapping::Create(uint64_t bytes) {
  // Sealable, so that udmabuf can wrap it (it requires a shrink seal).
  const int fd = memfd_create("hrx-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return Refusal(
        Reason::kMemfdFailed,
        absl::StrFormat("allocate %u bytes: memfd_create: %s. Fix: raise the "
                        "daemon's open-file limit.",
                        bytes, std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return Refusal(
        Reason::kMemfdFailed,
        absl::StrFormat("allocate %u bytes: ftruncate: %s. Fix: free memory or "
                        "allocate less.",
                        bytes, std::strerror(error)));
  }
  // Only hrxd's own user may open the file again through /proc: a client
  // holding a description (or only an O_PATH reference) of another uid
  // cannot make itself a new one that hrxd would not know of.
  (void)fchmod(fd, 0600);
  // The size never changes, and nobody adds seals later (a client could
  // otherwise seal the file against the daemon's own writes): seal both.
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return Refusal(
        Reason::kMmapFailed,
        absl::StrFormat("allocate %u bytes: mmap: %s. Fix: free memory or "
                        "allocate less.",
                        bytes, std::strerror(error)));
  }
  return MemfdMapping(fd, static_cast<uint8_t*>(data), bytes);
}

absl::StatusOr<MemfdMapping> MemfdMapping::Adopt(int fd, uint64_t bytes) {
  // The maker is another process (an executor, which runs tenant code): the
  // file must be sealed against shrinking, or it could truncate the pages
  // under this mapping and fault hrxd with SIGBUS on the next touch; and it
  // must be ordinary shared memory (tmpfs), not hugetlbfs, whose pages, once
  // punched out with the pool exhausted, fault with SIGBUS too.
  const int seals = fcntl(fd, F_GET_SEALS);
  struct stat info {};
  struct statfs filesystem {};
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0 || fstat(fd, &info) != 0 ||
      static_cast<uint64_t>(info.st_size) < bytes ||
      fstatfs(fd, &filesystem) != 0 || filesystem.f_type != TMPFS_MAGIC) {
    close(fd);
    return Refusal(Reason::kMmapFailed,
                   absl::StrFormat("map a %u-byte memfd: it is not a tmpfs "
                                   "memfd sealed against shrinking, or is "
                                   "smaller. Fix: report a bug (or a hostile "
                                   "executor).",
                                   bytes));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return Refusal(Reason::kMmapFailed,
                   absl::StrFormat("map a %u-byte memfd: mmap: %s. Fix: free "
                                   "memory or allocate less.",
                                   bytes, std::strerror(error)));
  }
  return MemfdMapping(fd, static_cast<uint8_t*>(data), bytes, /*owned=*/false);
}

MemfdMapping::MemfdMapping(MemfdMapping&& other) noexcept
    : fd_(other.fd_),
      data_(other.data_),
      size_(other.size_),
      owned_(other.owned_) {
  other.fd_ = -1;
  other.data_ = nullptr;
  other.size_ = 0;
}

MemfdMapping::~MemfdMapping() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0 && owned_) {
    // Free the pages now, even if a reference hrxd cannot see (an O_PATH
    // descriptor in some process) would keep the file itself alive.
    (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                    static_cast<off_t>(size_));
  }
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<int> MemfdMapping::ExportShm() const {
  const int copy = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    return Refusal(
        Reason::kExportFailed,
        absl::StrFormat("dup of a %u-byte memfd: %s. Fix: raise the daemon's "
                        "open-file limit.",
                        size_, std::strerror(errno)));
  }
  return copy;
}

absl::StatusOr<int> MemfdMapping::ExportUdmabuf() const {
  const int device = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (device < 0) {
    return Refusal(
        Reason::kDmabufUnavailable,
        absl::StrFormat(
            "export dma-buf: /dev/udmabuf cannot be opened "
            "(%s); host memory becomes a dma-buf through it. Fix: load the "
            "udmabuf kernel module and give the daemon access to the device, "
            "or "
            "export as shm.",
            std::strerror(errno)));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (size_ % page != 0) {
    close(device);
    return Refusal(
        Reason::kDmabufUnaligned,
        absl::StrFormat("export dma-buf: a %u-byte buffer is not a whole "
                        "number of %u-byte pages. Fix: allocate a multiple of "
                        "the page size.",
                        size_, page));
  }
  udmabuf_create request{};
  request.memfd = static_cast<uint32_t>(fd_);
  request.flags = UDMABUF_FLAGS_CLOEXEC;
  request.offset = 0;
  request.size = size_;
  const int dmabuf = ioctl(device, UDMABUF_CREATE, &request);
  const int error = errno;
  close(device);
  if (dmabuf < 0) {
    return Refusal(
        Reason::kDmabufUnavailable,
        absl::StrFormat("export dma-buf: UDMABUF_CREATE failed (%s). Fix: "
                        "check the kernel's udmabuf limits, or export as shm.",
                        std::strerror(error)));
  }
  return dmabuf;
}

bool UdmabufAvailable() { return access("/dev/udmabuf", R_OK | W_OK) == 0; }

}  // namespace hrx::backend
