// CallLanes: each lane's threads, the total, and the queue are bounded at
// the documented limits, and a lane whose calls wait holds up no other.
#include "daemon/server/call_lanes.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace hrx::daemon {
namespace {

#define ASSERT_QUEUED(admitted) \
  ASSERT_EQ((admitted), CallLanes::Admitted::kQueued)

// Work that waits until `release` is notified, counting itself while it runs.
std::function<void()> Blocked(absl::Notification& release,
                              std::atomic<int>& running) {
  return [&release, &running] {
    running.fetch_add(1);
    release.WaitForNotification();
    running.fetch_sub(1);
  };
}

void WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 5000 && !done(); ++i)
    absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(done());
}

TEST(CallLanesTest, ALaneRunsAtMostItsThreadsAndHoldsUpNoOtherLane) {
  CallLanes lanes(absl::Milliseconds(50));
  absl::Notification release;
  std::atomic<int> running{0};
  for (size_t i = 0; i < kLaneThreads + 3; ++i) {
    ASSERT_QUEUED(lanes.Run("uid:1", Blocked(release, running)));
  }
  WaitFor([&] { return running.load() == static_cast<int>(kLaneThreads); });
  EXPECT_EQ(lanes.threads(), kLaneThreads);
  // Another caller's call runs at once.
  absl::Notification other;
  ASSERT_QUEUED(lanes.Run("uid:2", [&other] { other.Notify(); }));
  EXPECT_TRUE(other.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
  WaitFor([&] { return running.load() == 0; });
  // Idle threads end.
  WaitFor([&] { return lanes.threads() == 0; });
}

TEST(CallLanesTest, ALanesQueueIsBoundedAtItsLimit) {
  CallLanes lanes(absl::Milliseconds(50));
  absl::Notification release;
  std::atomic<int> running{0};
  for (size_t i = 0; i < kLaneThreads; ++i) {
    ASSERT_QUEUED(lanes.Run("uid:1", Blocked(release, running)));
  }
  WaitFor([&] { return running.load() == static_cast<int>(kLaneThreads); });
  std::atomic<size_t> ran{0};
  for (size_t i = 0; i < kMaxLaneQueuedCalls; ++i) {
    ASSERT_QUEUED(lanes.Run("uid:1", [&ran] { ran.fetch_add(1); })) << i;
  }
  EXPECT_EQ(lanes.Run("uid:1", [] {}), CallLanes::Admitted::kLaneFull)
      << "past the queue's limit";
  release.Notify();
  WaitFor([&] { return ran.load() == kMaxLaneQueuedCalls; });
}

TEST(CallLanesTest, PastTheTotalOfThreadsANewLaneIsTurnedBack) {
  CallLanes lanes(absl::Milliseconds(50));
  absl::Notification release;
  std::atomic<int> running{0};
  const size_t full_lanes = kMaxLaneThreads / kLaneThreads;
  for (size_t lane = 0; lane < full_lanes; ++lane) {
    for (size_t i = 0; i < kLaneThreads; ++i) {
      ASSERT_QUEUED(
          lanes.Run(absl::StrCat("uid:", lane), Blocked(release, running)));
    }
  }
  WaitFor([&] { return running.load() == static_cast<int>(kMaxLaneThreads); });
  EXPECT_EQ(lanes.threads(), kMaxLaneThreads);
  // The caller then runs it itself (the server: on the gRPC thread).
  EXPECT_EQ(lanes.Run("uid:new", [] {}), CallLanes::Admitted::kNoThread);
  // A lane with threads of its own still queues.
  EXPECT_EQ(lanes.Run("uid:0", [] {}), CallLanes::Admitted::kQueued);
  release.Notify();
  WaitFor([&] { return lanes.threads() == 0; });
}

TEST(CallLanesTest, CallsPastTheirLanesPaceWaitThereAndHoldUpNoOtherLane) {
  CallLanes lanes(absl::Milliseconds(50));
  lanes.SetPace(/*calls_per_second=*/20, /*burst=*/1);
  std::atomic<int> ran{0};
  // Five calls of one caller: one at once, the rest 50 ms apart, on its
  // own lane; none refused.
  for (int i = 0; i < 5; ++i) {
    ASSERT_QUEUED(lanes.Run("uid:1", [&ran] { ran.fetch_add(1); }));
  }
  // Another caller's call has a pace of its own.
  absl::Notification other;
  ASSERT_QUEUED(lanes.Run("uid:2", [&other] { other.Notify(); }));
  EXPECT_TRUE(other.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // An unpaced call (a stream's message) still waits its turn in the lane.
  absl::Notification unpaced;
  ASSERT_QUEUED(lanes.Run(
      "uid:1", [&unpaced] { unpaced.Notify(); }, /*paced=*/false));
  WaitFor([&] { return ran.load() == 5; });
  EXPECT_TRUE(unpaced.WaitForNotificationWithTimeout(absl::Seconds(10)));
  WaitFor([&] { return lanes.threads() == 0; });
}

}  // namespace
}  // namespace hrx::daemon
