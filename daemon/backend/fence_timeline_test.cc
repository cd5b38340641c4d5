#include "daemon/backend/fence_timeline.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::backend {
namespace {

using ::hrx::shared::IsOk;
using ::testing::ElementsAre;

absl::Status Fault() { return absl::InternalError("kernel_failed: fault"); }

TEST(FenceTimelineTest, FencesAreIssuedInOrderAndCompleteUpToThePublishedOne) {
  FenceTimeline timeline;
  EXPECT_EQ(timeline.Issue(), 1u);
  EXPECT_EQ(timeline.Issue(), 2u);
  EXPECT_EQ(timeline.Issue(), 3u);
  EXPECT_EQ(timeline.completed(), 0u);
  timeline.Publish(2);
  EXPECT_EQ(timeline.completed(), 2u);
  timeline.Publish(1);  // never backwards
  EXPECT_EQ(timeline.completed(), 2u);
  timeline.Publish(9);  // never past what was issued
  EXPECT_EQ(timeline.completed(), 3u);
  EXPECT_EQ(timeline.issued(), 3u);
}

TEST(FenceTimelineTest, WaitersRunOnceInFenceOrderWithTheirFencesStatus) {
  FenceTimeline timeline;
  for (int i = 0; i < 4; ++i) timeline.Issue();
  std::vector<std::string> order;
  auto record = [&order](std::string name) {
    return [&order, name](absl::Status status) {
      order.push_back(name + (status.ok() ? ":ok" : ":failed"));
    };
  };
  timeline.OnComplete(4, record("w4"));
  timeline.OnComplete(2, record("w2"));
  timeline.OnComplete(3, record("w3"));
  timeline.Fail(3, Fault());
  timeline.Publish(3, record("first3"));
  EXPECT_THAT(order, ElementsAre("first3:failed", "w2:ok", "w3:failed"));
  timeline.Publish(4);
  EXPECT_THAT(order,
              ElementsAre("first3:failed", "w2:ok", "w3:failed", "w4:failed"));
  // Registered after completion: at once, with the fence's own status.
  timeline.OnComplete(1, record("late1"));
  timeline.OnComplete(4, record("late4"));
  EXPECT_EQ(order.back(), "late4:failed");
  EXPECT_EQ(order[order.size() - 2], "late1:ok");
}

TEST(FenceTimelineTest, TheFirstFailureStandsAndEarlierFencesStayOk) {
  FenceTimeline timeline;
  for (int i = 0; i < 5; ++i) timeline.Issue();
  timeline.Fail(3, Fault());
  timeline.Fail(4, absl::DataLossError("later"));       // ignored: 3 came first
  timeline.Fail(2, absl::UnavailableError("earlier"));  // an earlier fence
  timeline.Publish(5);
  EXPECT_THAT(timeline.StatusOf(1), IsOk());
  EXPECT_EQ(timeline.StatusOf(2).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(timeline.StatusOf(5).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(timeline.failure().code(), absl::StatusCode::kUnavailable);
  timeline.Fail(6, absl::OkStatus());  // OK is not a failure
  EXPECT_EQ(timeline.Wait(5).code(), absl::StatusCode::kUnavailable);
}

TEST(FenceTimelineTest, ALateFailureNeverChangesACompletedFence) {
  FenceTimeline timeline;
  for (int i = 0; i < 3; ++i) timeline.Issue();
  timeline.Publish(2);
  timeline.Fail(1, Fault());  // reported after fence 2 completed OK
  EXPECT_THAT(timeline.StatusOf(1), IsOk());
  EXPECT_THAT(timeline.StatusOf(2), IsOk());
  EXPECT_EQ(timeline.StatusOf(3).code(), absl::StatusCode::kInternal);
}

TEST(FenceTimelineTest, FailAllEndsEverythingOutstandingWithTheLoss) {
  FenceTimeline timeline;
  for (int i = 0; i < 3; ++i) timeline.Issue();
  timeline.Publish(1);
  absl::Status third;
  timeline.OnComplete(3, [&third](absl::Status s) { third = s; });
  EXPECT_EQ(timeline.FailAll(absl::UnavailableError("executor_lost")), 3u);
  EXPECT_EQ(timeline.completed(), 3u);
  EXPECT_THAT(timeline.StatusOf(1), IsOk());  // it had completed
  EXPECT_EQ(timeline.StatusOf(2).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(third.code(), absl::StatusCode::kUnavailable);
}

TEST(FenceTimelineTest, WaitBlocksUntilPublishedOrUntilAFailureWhenAsked) {
  FenceTimeline timeline;
  const Fence fence = timeline.Issue();
  absl::Notification waiting;
  absl::Status waited = absl::UnknownError("not yet");
  std::thread waiter([&] {
    waiting.Notify();
    waited = timeline.Wait(fence);
  });
  waiting.WaitForNotification();
  timeline.Publish(fence);
  waiter.join();
  EXPECT_THAT(waited, IsOk());

  // A faulted device completes nothing more: a waiter that asks returns at
  // the failure.
  const Fence stuck = timeline.Issue();
  timeline.Fail(stuck, Fault());
  EXPECT_EQ(timeline.Wait(stuck, /*stop_at_failure=*/true).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(timeline.completed(), fence);
}

TEST(FenceTimelineTest, ACallbackMayCallBackIntoTheTimeline) {
  FenceTimeline timeline;
  timeline.Issue();
  Fence seen = 0;
  timeline.OnComplete(1, [&](absl::Status) {
    seen = timeline.completed();
    timeline.OnComplete(timeline.Issue(), [](absl::Status) {});
  });
  timeline.Publish(1);
  EXPECT_EQ(seen, 1u);
  EXPECT_EQ(timeline.issued(), 2u);
}

TEST(FenceTimelineTest, AStallIsMeasuredFromTheOldestWait) {
  FenceTimeline timeline;
  const absl::Time now = absl::Now();
  EXPECT_EQ(timeline.StalledSince(now), absl::ZeroDuration());
  timeline.Issue();
  EXPECT_GE(timeline.StalledSince(now + absl::Seconds(5)), absl::Seconds(4));
  timeline.Publish(1);
  EXPECT_EQ(timeline.StalledSince(now + absl::Seconds(5)),
            absl::ZeroDuration());
}

}  // namespace
}  // namespace hrx::backend
