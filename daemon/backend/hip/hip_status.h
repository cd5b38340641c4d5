// hipError_t to absl::Status, with the call that failed and a Fix.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_STATUS_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "daemon/backend/hip/hip_platform.h"
#include "shared/status_macros.h"

namespace hrx::backend {

// OK for hipSuccess. Otherwise "hip_error: <what>: <call> failed with
// <name> (<text>). Fix: <fix>", coded RESOURCE_EXHAUSTED for out-of-memory,
// UNAVAILABLE for a missing device or driver, INTERNAL otherwise.
absl::Status HipStatus(hipError_t error, std::string_view what,
                       std::string_view call, std::string_view fix);

// Returns the HipStatus of `expr` from the enclosing function unless OK.
#define HRX_HIP_RETURN_IF_ERROR(expr, what, call, fix) \
  HRX_RETURN_IF_ERROR(::hrx::backend::HipStatus((expr), what, call, fix))

// Makes `device` current on the calling thread (once per thread); every
// backend entry point calls it before touching the runtime.
absl::Status BindDevice(int device);

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_STATUS_H_
