// The default build: no GPU backend linked in.
#include "daemon/backend/gpu_backend.h"
#include "shared/refusal.h"

namespace hrx::backend {

absl::StatusOr<std::unique_ptr<Backend>> OpenGpuBackend(
    const GpuBackendOptions&) {
  return Refusal(
      Reason::kHipUnavailable,
      "backend hip: this hrxd binary was built without the "
      "HIP backend. Fix: run with --backend=cpu, or use hrxd_hip_amd or "
      "hrxd_hip_nvidia on a machine with a GPU.");
}

}  // namespace hrx::backend
