// A Backend whose device work runs in an executor process: allocations,
// kernels and queues live there; hrxd keeps proxies that name them. Host-
// reachable memory is mapped in hrxd too (the same memfd pages), so uploads
// and mappings work as in-process; device memory the host cannot reach is
// only ever touched by the executor.
//
// Thread-safe.
#ifndef HRX_DAEMON_BACKEND_REMOTE_REMOTE_BACKEND_H_
#define HRX_DAEMON_BACKEND_REMOTE_REMOTE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/memfd_memory.h"
#include "daemon/backend/remote/executor_link.h"

namespace hrx::backend::remote {

class RemoteMemory final : public backend::Memory {
 public:
  RemoteMemory(std::shared_ptr<ExecutorLink> link, uint64_t remote_id,
               uint64_t size, backend::MemoryKind kind,
               std::optional<backend::MemfdMapping> mapping);
  ~RemoteMemory() override;  // the executors forget it

  uint64_t size() const override { return size_; }
  backend::MemoryKind kind() const override { return kind_; }
  uint64_t id() const override { return id_; }
  uint8_t* host_address() const override;
  absl::StatusOr<int> ExportFd(backend::ExportKind kind) const override;

  // This memory's name in `link`'s executor: its own, or an import of the
  // same pages (made once; FAILED_PRECONDITION "cross_executor_memory" where
  // the pages cannot cross).
  absl::StatusOr<uint64_t> IdOn(const std::shared_ptr<ExecutorLink>& link);

 private:
  const std::shared_ptr<ExecutorLink> link_;
  const uint64_t remote_id_;
  const uint64_t size_;
  const backend::MemoryKind kind_;
  const uint64_t id_;
  const std::optional<backend::MemfdMapping> mapping_;
  absl::Mutex mu_;
  // Imports into other executors, by link.
  std::vector<std::pair<std::weak_ptr<ExecutorLink>, uint64_t>> imports_
      ABSL_GUARDED_BY(mu_);
};

class RemoteKernel final : public backend::Kernel {
 public:
  RemoteKernel(std::shared_ptr<ExecutorLink> link, uint64_t remote_id,
               std::string entry, backend::KernelSignature signature);
  ~RemoteKernel() override;

  const std::string& entry() const override { return entry_; }
  const backend::KernelSignature& signature() const override {
    return signature_;
  }
  const ExecutorLink* link() const { return link_.get(); }
  uint64_t remote_id() const { return remote_id_; }

 private:
  const std::shared_ptr<ExecutorLink> link_;
  const uint64_t remote_id_;
  const std::string entry_;
  const backend::KernelSignature signature_;
};

// The executor-side name of `memory` (a RemoteMemory) on `link`.
absl::StatusOr<uint64_t> RemoteIdOf(const backend::MemoryRef& memory,
                                    const std::shared_ptr<ExecutorLink>& link);
// The executor-side name of `kernel` (a RemoteKernel of `link`).
absl::StatusOr<uint64_t> RemoteIdOf(const backend::KernelRef& kernel,
                                    const ExecutorLink& link);

class RemoteBackend final : public backend::Backend {
 public:
  explicit RemoteBackend(std::shared_ptr<ExecutorLink> link);

  const backend::DeviceProperties& properties() const override {
    return properties_;
  }
  absl::StatusOr<backend::MemoryRef> Allocate(uint64_t bytes,
                                              backend::MemoryKind kind,
                                              bool zeroed) override;
  absl::StatusOr<std::unique_ptr<backend::Queue>> CreateQueue() override;
  absl::StatusOr<backend::KernelRef> LoadKernel(
      std::string_view code, const std::string& entry) override;
  uint64_t bytes_in_use() const override { return link_->bytes_in_use(); }
  std::vector<backend::ExportKind> export_kinds() const override;
  absl::Status device_status() const override { return link_->lost(); }

  const std::shared_ptr<ExecutorLink>& link() const { return link_; }

 private:
  const std::shared_ptr<ExecutorLink> link_;
  backend::DeviceProperties properties_;
};

}  // namespace hrx::backend::remote

#endif  // HRX_DAEMON_BACKEND_REMOTE_REMOTE_BACKEND_H_
