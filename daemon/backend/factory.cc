#include "daemon/backend/factory.h"

#include "absl/strings/str_format.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/backend/gpu_backend.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend(
    const BackendOptions& options) {
  return OpenGpuBackend(GpuBackendOptions{.device = options.gpu_device});
}

std::unique_ptr<Backend> OpenCpuBackend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(
      CpuBackendOptions{.memory_bytes = options.cpu_memory_bytes});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(
    const BackendOptions& options, spdlog::logger& log) {
  if (options.choice == "cpu") return OpenCpuBackend(options);
  if (options.choice == "hip") return OpenHipBackend(options);
  if (options.choice == "auto") {
    auto hip = OpenHipBackend(options);
    if (hip.ok()) return hip;
    log.warn("no usable GPU backend, falling back to the cpu backend: {}",
             std::string(hip.status().message()));
    return OpenCpuBackend(options);
  }
  return Refusal(
      Reason::kUnknownBackend,
      absl::StrFormat("--backend=%s is not a backend. Fix: use auto, cpu or "
                      "hip.",
                      options.choice));
}

}  // namespace hrx::backend
