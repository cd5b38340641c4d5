// Chooses and opens the backend named by --backend.
#ifndef HRX_DAEMON_BACKEND_FACTORY_H_
#define HRX_DAEMON_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "spdlog/logger.h"

namespace hrx::backend {

struct BackendOptions {
  std::string choice = "auto";    // "auto", "cpu" or "hip"
  uint64_t cpu_memory_bytes = 0;  // see CpuBackendOptions
  int gpu_device = 0;             // see GpuBackendOptions
};

// "auto" opens a GPU backend when one is usable and otherwise falls back to
// the CPU backend, logging why. An explicit "hip" that cannot open is an
// error (FAILED_PRECONDITION naming what is missing); an unknown choice is
// INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(
    const BackendOptions& options, spdlog::logger& log);

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_FACTORY_H_
