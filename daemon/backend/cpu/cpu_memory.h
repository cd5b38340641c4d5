// CPU-backend allocation: a memfd-backed MAP_SHARED mapping, so the same
// pages can be handed to clients as a file descriptor.
#ifndef HRX_DAEMON_BACKEND_CPU_CPU_MEMORY_H_
#define HRX_DAEMON_BACKEND_CPU_CPU_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/memfd_memory.h"

namespace hrx::backend {

class CpuMemory final : public Memory {
 public:
  // Reserves `bytes` against `accounting`, then maps a fresh memfd (whose
  // pages read as zero until written).
  static absl::StatusOr<std::shared_ptr<CpuMemory>> Create(
      uint64_t bytes, MemoryKind kind,
      std::shared_ptr<MemoryAccounting> accounting);
  // The pages of a memfd another process made (see MemfdMapping::Adopt),
  // counted against no limit here.
  static absl::StatusOr<std::shared_ptr<CpuMemory>> Adopt(int fd,
                                                          uint64_t bytes,
                                                          MemoryKind kind);
  ~CpuMemory() override;
  CpuMemory(const CpuMemory&) = delete;
  CpuMemory& operator=(const CpuMemory&) = delete;

  uint64_t size() const override { return mapping_.size(); }
  MemoryKind kind() const override { return kind_; }
  uint64_t id() const override { return id_; }
  uint8_t* host_address() const override { return mapping_.data(); }
  uint8_t* data() const { return mapping_.data(); }
  absl::StatusOr<int> ExportFd(ExportKind kind) const override;

 private:
  CpuMemory(MemfdMapping mapping, MemoryKind kind,
            std::shared_ptr<MemoryAccounting> accounting);

  const MemfdMapping mapping_;
  const MemoryKind kind_;
  const uint64_t id_;
  const std::shared_ptr<MemoryAccounting> accounting_;
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_CPU_MEMORY_H_
