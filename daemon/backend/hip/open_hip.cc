// The HIP build variants' GPU backend.
#include "daemon/backend/gpu_backend.h"
#include "daemon/backend/hip/hip_backend.h"

namespace hrx::backend {

absl::StatusOr<std::unique_ptr<Backend>> OpenGpuBackend(
    const GpuBackendOptions& options) {
  auto backend = HipBackend::Open(HipBackendOptions{.device = options.device});
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(*std::move(backend));
}

}  // namespace hrx::backend
