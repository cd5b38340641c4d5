// Pieces every backend's allocations share: the device-wide byte limit, and
// memfd-backed host mappings that can be handed to another process (as the
// memfd itself, or wrapped in a dma-buf through udmabuf).
#ifndef HRX_DAEMON_BACKEND_MEMFD_MEMORY_H_
#define HRX_DAEMON_BACKEND_MEMFD_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hrx::backend {

// Shared by a backend and its allocations, which may outlive it briefly.
class MemoryAccounting {
 public:
  // `fix` completes the refusal's "Fix: …" sentence: how to get a larger
  // limit on this backend.
  MemoryAccounting(uint64_t limit_bytes, std::string fix)
      : limit_bytes_(limit_bytes), fix_(std::move(fix)) {}

  // Takes `bytes` from the limit, or refuses (RESOURCE_EXHAUSTED naming the
  // use, the ask and the limit) without changing anything.
  absl::Status Reserve(uint64_t bytes);
  void Release(uint64_t bytes) { in_use_bytes_.fetch_sub(bytes); }

  uint64_t limit_bytes() const { return limit_bytes_; }
  uint64_t in_use_bytes() const { return in_use_bytes_.load(); }

 private:
  const uint64_t limit_bytes_;
  const std::string fix_;
  std::atomic<uint64_t> in_use_bytes_{0};
};

// Unique among this process's allocations, whatever backend made them.
uint64_t NextMemoryId();

// A sealed memfd of a fixed size, mapped MAP_SHARED into this process.
// Pages read as zero until written. Move-only; unmaps and closes on
// destruction.
class MemfdMapping {
 public:
  static absl::StatusOr<MemfdMapping> Create(uint64_t bytes);
  // Maps `bytes` of a memfd another process made (taking `fd`). Its pages
  // are the maker's: they are not punched out when this mapping goes.
  static absl::StatusOr<MemfdMapping> Adopt(int fd, uint64_t bytes);
  MemfdMapping(MemfdMapping&& other) noexcept;
  MemfdMapping& operator=(MemfdMapping&&) = delete;
  MemfdMapping(const MemfdMapping&) = delete;
  ~MemfdMapping();

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }

  // A new descriptor of the same memfd (the caller owns it).
  absl::StatusOr<int> ExportShm() const;
  // A dma-buf over the same pages, through /dev/udmabuf (Linux 4.20+).
  // FAILED_PRECONDITION naming what is missing where it is not available.
  absl::StatusOr<int> ExportUdmabuf() const;

 private:
  MemfdMapping(int fd, uint8_t* data, uint64_t size, bool owned = true)
      : fd_(fd), data_(data), size_(size), owned_(owned) {}

  int fd_;
  uint8_t* data_;
  uint64_t size_;
  bool owned_;  // made here: its pages are freed when it goes
};

// True when this process can make dma-bufs from memfds.
bool UdmabufAvailable();

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_MEMFD_MEMORY_H_
