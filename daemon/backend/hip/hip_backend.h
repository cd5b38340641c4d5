// The GPU backend, written against the HIP runtime: AMD GPUs through AMD's
// runtime, NVIDIA GPUs through the project's mapping onto CUDA (see
// hip_platform.h). One device; queues are streams; kernels come from code
// objects; graphs are native graphs.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_BACKEND_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_BACKEND_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/hip/hip_queue.h"
#include "daemon/backend/hip/hip_reclaimer.h"
#include "daemon/backend/memfd_memory.h"

namespace hrx::backend {

struct HipBackendOptions {
  int device = 0;  // the runtime's device ordinal
};

class HipBackend final : public Backend {
 public:
  // UNAVAILABLE naming the runtime's answer when no usable GPU is present
  // (no device, no driver), so "auto" can say why it fell back.
  static absl::StatusOr<std::unique_ptr<HipBackend>> Open(
      const HipBackendOptions& options);

  const DeviceProperties& properties() const override { return properties_; }
  absl::StatusOr<MemoryRef> Allocate(uint64_t bytes, MemoryKind kind,
                                     bool zeroed) override;
  absl::StatusOr<std::unique_ptr<Queue>> CreateQueue() override;
  absl::StatusOr<KernelRef> LoadKernel(std::string_view code,
                                       const std::string& entry) override;
  uint64_t bytes_in_use() const override;
  std::vector<ExportKind> export_kinds() const override;
  // Registers the other executor's pages with this process's runtime.
  absl::StatusOr<MemoryRef> ImportShm(int fd, uint64_t bytes,
                                      MemoryKind kind) override;
  absl::Status device_status() const override { return health_->status(); }
  void OnDeviceLost(DeviceLostHandler lost) override {
    health_->SetOnLost(std::move(lost));
  }

  // Whether device memory comes from the stream-ordered allocator (see
  // hip_reclaimer.h); settled at Open.
  bool stream_ordered_allocation() const {
    return reclaimer_->stream_ordered();
  }

 private:
  HipBackend(int device, DeviceProperties properties, bool driver_dmabuf,
             std::shared_ptr<HipReclaimer> reclaimer);

  const int device_;
  const DeviceProperties properties_;
  const bool driver_dmabuf_;  // the driver exports device memory as dma-buf
  const std::shared_ptr<MemoryAccounting> accounting_;
  // Shared with allocations and kernels, which may outlive the backend.
  const std::shared_ptr<HipReclaimer> reclaimer_;
  const std::shared_ptr<HipDeviceHealth> health_ =
      std::make_shared<HipDeviceHealth>();
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_BACKEND_H_
