#include "daemon/mutex_checks.h"

#include <cstdlib>
#include <string_view>

#include "absl/synchronization/mutex.h"

namespace hrx::daemon {

void ConfigureMutexChecks() {
  const char* asked = std::getenv(kMutexChecksVariable);
  absl::SetMutexDeadlockDetectionMode(asked != nullptr &&
                                              std::string_view(asked) == "1"
                                          ? absl::OnDeadlockCycle::kAbort
                                          : absl::OnDeadlockCycle::kIgnore);
}

}  // namespace hrx::daemon
