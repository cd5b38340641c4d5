#include "daemon/backend/factory.h"

#include "absl/strings/str_format.h"
#include "daemon/backend/cpu/cpu_backend.h"

namespace hrx::backend {
namespace {

// This build carries no GPU backend; the HIP backend is a separate build
// variant. Reported verbatim so "auto" can say why it fell back.
absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend() {
  return absl::FailedPreconditionError(
      "hip_unavailable: backend hip: this hrxd binary was built without the "
      "HIP backend. Fix: run with --backend=cpu, or use an hrxd built with "
      "the HIP variant on a machine with a GPU.");
}

std::unique_ptr<Backend> OpenCpuBackend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(
      CpuBackendOptions{.memory_bytes = options.cpu_memory_bytes});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(
    const BackendOptions& options, spdlog::logger& log) {
  if (options.choice == "cpu") return OpenCpuBackend(options);
  if (options.choice == "hip") return OpenHipBackend();
  if (options.choice == "auto") {
    auto hip = OpenHipBackend();
    if (hip.ok()) return hip;
    log.warn("no usable GPU backend, falling back to the cpu backend: {}",
             std::string(hip.status().message()));
    return OpenCpuBackend(options);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown_backend: --backend=%s is not a backend. Fix: use auto, cpu or "
      "hip.",
      options.choice));
}

}  // namespace hrx::backend
