#include "daemon/backend/hip/hip_status.h"

#include "absl/strings/str_cat.h"
#include "shared/refusal.h"

namespace hrx::backend {

absl::Status HipStatus(hipError_t error, std::string_view what,
                       std::string_view call, std::string_view fix) {
  if (error == hipSuccess) return absl::OkStatus();
  const std::string detail =
      absl::StrCat(std::string(what), ": ", std::string(call), " failed with ",
                   hipGetErrorName(error), " (", hipGetErrorString(error),
                   "). Fix: ", std::string(fix));
  switch (error) {
    case hipErrorOutOfMemory:
      return Refusal(Reason::kHipError, detail,
                     absl::StatusCode::kResourceExhausted);
    case hipErrorNoDevice:
    case hipErrorInsufficientDriver:
      return Refusal(Reason::kHipError, detail, absl::StatusCode::kUnavailable);
    default:
      return Refusal(Reason::kHipError, detail);
  }
}

absl::Status BindDevice(int device) {
  thread_local int bound = -1;
  if (bound == device) return absl::OkStatus();
  const hipError_t error = hipSetDevice(device);
  if (error != hipSuccess) {
    return HipStatus(error, "bind the GPU", "hipSetDevice",
                     "check that the GPU is still present and its driver "
                     "loaded");
  }
  bound = device;
  return absl::OkStatus();
}

}  // namespace hrx::backend
