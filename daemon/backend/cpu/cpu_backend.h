// The embedded CPU backend: a real execution engine, used wherever no GPU is
// present. Allocations are memfd mappings; queues are worker threads.
#ifndef HRX_DAEMON_BACKEND_CPU_CPU_BACKEND_H_
#define HRX_DAEMON_BACKEND_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <memory>

#include "daemon/backend/backend.h"
#include "daemon/backend/cpu/cpu_memory.h"
#include "daemon/backend/cpu/thread_pool.h"

namespace hrx::backend {

struct CpuBackendOptions {
  // Device memory the backend may hand out; 0 means half of physical memory.
  uint64_t memory_bytes = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options);

  const DeviceProperties& properties() const override { return properties_; }
  absl::StatusOr<MemoryRef> Allocate(uint64_t bytes, MemoryKind kind,
                                     bool zeroed) override;
  absl::StatusOr<MemoryRef> ImportShm(int fd, uint64_t bytes,
                                      MemoryKind kind) override;
  absl::StatusOr<std::unique_ptr<Queue>> CreateQueue() override;
  absl::StatusOr<KernelRef> LoadKernel(std::string_view code,
                                       const std::string& entry) override;
  uint64_t bytes_in_use() const override;
  std::vector<ExportKind> export_kinds() const override;

 private:
  const DeviceProperties properties_;
  const std::shared_ptr<MemoryAccounting> accounting_;
  // Runs every queue's workgroups. Queues must be destroyed before the
  // backend (the core's queue pool is).
  ThreadPool pool_;
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_CPU_BACKEND_H_
