// CPU-backend allocation: a memfd-backed MAP_SHARED mapping, so later issues
// can hand the same pages to clients as a file descriptor.
#ifndef HRX_DAEMON_BACKEND_CPU_CPU_MEMORY_H_
#define HRX_DAEMON_BACKEND_CPU_CPU_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"

namespace hrx::backend {

// Shared by a backend and its allocations, which may outlive it briefly.
struct CpuAccounting {
  explicit CpuAccounting(uint64_t limit) : limit_bytes(limit) {}
  const uint64_t limit_bytes;
  std::atomic<uint64_t> in_use_bytes{0};
};

class CpuMemory final : public Memory {
 public:
  // Reserves `bytes` against `accounting`, then maps a fresh memfd (whose
  // pages read as zero until written).
  static absl::StatusOr<std::shared_ptr<CpuMemory>> Create(
      uint64_t bytes, MemoryKind kind,
      std::shared_ptr<CpuAccounting> accounting);
  ~CpuMemory() override;
  CpuMemory(const CpuMemory&) = delete;
  CpuMemory& operator=(const CpuMemory&) = delete;

  uint64_t size() const override { return size_; }
  MemoryKind kind() const override { return kind_; }
  uint64_t id() const override { return id_; }
  uint8_t* host_address() const override { return data_; }
  uint8_t* data() const { return data_; }
  int fd() const { return fd_; }
  absl::StatusOr<int> ExportFd(ExportKind kind) const override;

 private:
  CpuMemory(uint64_t size, MemoryKind kind, int fd, uint8_t* data,
            std::shared_ptr<CpuAccounting> accounting);

  const uint64_t size_;
  const MemoryKind kind_;
  const uint64_t id_;
  const int fd_;
  uint8_t* const data_;
  const std::shared_ptr<CpuAccounting> accounting_;
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_CPU_MEMORY_H_
