// The GPU backend a build variant carries. Each hrxd variant links exactly
// one definition: //daemon/backend:no_gpu (the default build) or the HIP
// backend for AMD or NVIDIA (//daemon/backend/hip).
#ifndef HRX_DAEMON_BACKEND_GPU_BACKEND_H_
#define HRX_DAEMON_BACKEND_GPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"

namespace hrx::backend {

struct GpuBackendOptions {
  int device = 0;  // the runtime's device ordinal
};

// The GPU backend, or why there is none (FAILED_PRECONDITION when this build
// carries none, UNAVAILABLE when no usable GPU is present), worded for the
// log line of "auto" falling back to cpu.
absl::StatusOr<std::unique_ptr<Backend>> OpenGpuBackend(
    const GpuBackendOptions& options);

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_GPU_BACKEND_H_
