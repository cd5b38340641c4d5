// Abseil's lock-order checking as hrxd chooses it: off unless asked, so a
// latent lock order cannot abort the daemon; on (aborting on a cycle) when
// the test suite asks. Relies on Debian's Abseil being a debug-mode build,
// as daemon/mutex_checks.h says.
#include "daemon/mutex_checks.h"

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace hrx::daemon {
namespace {

// Takes two locks in one order, then in the other: a cycle in the order
// graph, though one thread can never deadlock on it.
void InvertLockOrder() {
  absl::Mutex first, second;
  {
    absl::MutexLock a(&first);
    absl::MutexLock b(&second);
  }
  {
    absl::MutexLock b(&second);
    absl::MutexLock a(&first);
  }
}

TEST(MutexChecksTest, ALockOrderCycleDoesNotEndTheProcessByDefault) {
  unsetenv(kMutexChecksVariable);
  ConfigureMutexChecks();
  InvertLockOrder();  // returns
}

TEST(MutexChecksDeathTest, ALockOrderCycleAbortsWhenAsked) {
  EXPECT_DEATH(
      {
        setenv(kMutexChecksVariable, "1", 1);
        ConfigureMutexChecks();
        InvertLockOrder();
      },
      "deadlock");
}

}  // namespace
}  // namespace hrx::daemon
