#include "daemon/backend/backend.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::backend {

absl::StatusOr<MemoryRef> Backend::ImportShm(int fd, uint64_t bytes,
                                             MemoryKind kind) {
  close(fd);
  return Refusal(
      Reason::kCrossExecutorMemory,
      absl::StrFormat("use a %u-byte buffer of another tenant's executor: "
                      "the %s backend runs only on memory its own executor "
                      "made. Fix: give both tenants isolation: "
                      "ISOLATION_SHARED_EXECUTOR in the config, or copy the "
                      "bytes through the host.",
                      bytes, properties().backend));
}

}  // namespace hrx::backend
