// Kernels: code a permitted tenant loads, checked against the signature it
// declares, and unloaded with the cached launches that use it.
//
// Contract: nothing of a tenant's code is mapped unless the tenant has
// load_kernels; a kernel stays alive while queued launches use it.
//
// Locking: takes a Session::mu for table updates; loads without holding it.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_KERNELS_H_
#define HRX_DAEMON_CORE_KERNELS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/core/device_set.h"
#include "daemon/core/session_table.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

class Kernels {
 public:
  Kernels(DeviceSet& devices, SessionTable& sessions)
      : devices_(devices), sessions_(sessions) {}

  // Loads `entry` from `code` and learns its signature. When `declared` is
  // set, it must match what the module declares ("signature_mismatch").
  // PERMISSION_DENIED "kernel_loading_not_allowed" for a tenant without
  // load_kernels, before a byte is mapped.
  absl::StatusOr<KernelInfo> Load(
      uint64_t session, std::string_view code, const std::string& entry,
      const backend::KernelSignature* declared = nullptr);
  absl::Status Unload(uint64_t session, uint64_t kernel);
  // The loaded kernel `kernel` of `session` names.
  absl::StatusOr<backend::KernelRef> Find(uint64_t session, uint64_t kernel,
                                          std::string_view what);

 private:
  DeviceSet& devices_;
  SessionTable& sessions_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_KERNELS_H_
