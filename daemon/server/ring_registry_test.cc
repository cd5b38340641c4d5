// RingRegistry at hrxd's stop: rings end at once, and their streams stay
// with their sessions (a unary call naming one while the stop reaches its
// client must fail as the stop, not as a freed stream).
#include "daemon/server/ring_registry.h"

#include <chrono>
#include <thread>

#include "daemon/core/core_harness.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::daemon::testing::CoreHarness;
using ::hrx::daemon::testing::Me;
using ::hrx::shared::IsOk;

TEST(RingRegistryTest, AStopEndsTheRingsButLeavesTheirStreamsToTheSession) {
  CoreHarness harness;
  RingRegistry rings(harness.core());
  const Caller caller(harness.core().handles(), harness.session());
  auto opened = rings.Open(caller, Me());
  ASSERT_THAT(opened.status(), IsOk());
  EXPECT_EQ(rings.live(), 1u);
  ASSERT_THAT(harness.core()
                  .commands()
                  .GetStreamStats(harness.session(), opened->stream)
                  .status(),
              IsOk());

  rings.StopAll();
  for (int i = 0; i < 1000 && rings.live() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(rings.live(), 0u) << "the ring did not end";
  EXPECT_THAT(harness.core()
                  .commands()
                  .GetStreamStats(harness.session(), opened->stream)
                  .status(),
              IsOk());
  // No ring opens once the stop began.
  EXPECT_EQ(rings.Open(caller, Me()).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hrx::daemon
