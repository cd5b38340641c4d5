#include "daemon/backend/cpu/cpu_memory.h"

namespace hrx::backend {

absl::StatusOr<std::shared_ptr<CpuMemory>> CpuMemory::Create(
    uint64_t bytes, MemoryKind kind,
    std::shared_ptr<MemoryAccounting> accounting) {
  if (absl::Status reserved = accounting->Reserve(bytes); !reserved.ok()) {
    return reserved;
  }
  auto mapping = MemfdMapping::Create(bytes);
  if (!mapping.ok()) {
    accounting->Release(bytes);
    return mapping.status();
  }
  return std::shared_ptr<CpuMemory>(
      new CpuMemory(*std::move(mapping), kind, std::move(accounting)));
}

absl::StatusOr<std::shared_ptr<CpuMemory>> CpuMemory::Adopt(int fd,
                                                            uint64_t bytes,
                                                            MemoryKind kind) {
  auto mapping = MemfdMapping::Adopt(fd, bytes);
  if (!mapping.ok()) return mapping.status();
  return std::shared_ptr<CpuMemory>(
      new CpuMemory(*std::move(mapping), kind, nullptr));
}

CpuMemory::CpuMemory(MemfdMapping mapping, MemoryKind kind,
                     std::shared_ptr<MemoryAccounting> accounting)
    : mapping_(std::move(mapping)),
      kind_(kind),
      id_(NextMemoryId()),
      accounting_(std::move(accounting)) {}

absl::StatusOr<int> CpuMemory::ExportFd(ExportKind kind) const {
  return kind == ExportKind::kShm ? mapping_.ExportShm()
                                  : mapping_.ExportUdmabuf();
}

CpuMemory::~CpuMemory() {
  if (accounting_ != nullptr) accounting_->Release(mapping_.size());
}

}  // namespace hrx::backend
