// The command path driven through a FaultyBackend: completions held back
// stand in for a slow device, so suspension, parking and ordering are seen
// before anything completes, and no test thread ever waits on the device
// while the core holds work.
#include "daemon/core/command_path.h"

#include <string>
#include <vector>

#include "daemon/core/core_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::daemon::testing::CoreHarness;
using ::hrx::daemon::testing::Pending;
using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::HasSubstr;

std::vector<Command> Uploads(uint64_t buffer, size_t count) {
  std::vector<Command> batch;
  for (size_t i = 0; i < count; ++i) {
    batch.push_back(UploadCommand{{buffer, i, 1}, std::string(1, 'a' + i)});
  }
  return batch;
}

class CommandPathTest : public ::testing::Test {
 protected:
  CoreHarness harness_;
  CommandPath& commands() { return harness_.core().commands(); }

  // Holds completions and submits one upload more than staging takes, so
  // the batch suspends; returns the buffer it uploads to.
  uint64_t SuspendABatch(Pending<absl::StatusOr<size_t>>& submitted) {
    const uint64_t buffer = harness_.Allocate(64);
    harness_.faults().HoldCompletions();
    commands().Submit(harness_.session(), harness_.stream(),
                      Uploads(buffer, kMaxPendingStagings + 1),
                      SubmitErrors::kReturn, submitted.Callback());
    return buffer;
  }
};

TEST_F(CommandPathTest, AnUploadPastTheStagingBoundSuspendsTheBatchNotAThread) {
  const uint64_t buffer = harness_.Allocate(64);
  harness_.faults().HoldCompletions();
  // kMaxPendingStagings uploads fill the staging; the next must wait for
  // the first to complete, which the held device does not report.
  Pending<absl::StatusOr<size_t>> submitted;
  commands().Submit(harness_.session(), harness_.stream(),
                    Uploads(buffer, kMaxPendingStagings + 1),
                    SubmitErrors::kReturn, submitted.Callback());
  EXPECT_FALSE(submitted.arrived());  // Submit returned; nobody waited
  EXPECT_EQ(harness_.core().admin().status().suspended_streams, 1u);

  Pending<absl::Status> synced;
  commands().Synchronize(harness_.session(), harness_.stream(),
                         synced.Callback());
  EXPECT_EQ(harness_.core().admin().status().parked_operations, 1u);
  EXPECT_FALSE(synced.arrived());

  harness_.faults().ReleaseCompletions();
  EXPECT_THAT(submitted.Get(), IsOk());
  EXPECT_EQ(*submitted.Get(), kMaxPendingStagings + 1);
  EXPECT_THAT(synced.Get(), IsOk());
  EXPECT_EQ(harness_.core().admin().status().suspended_streams, 0u);
  EXPECT_EQ(*harness_.Read({buffer, 0, kMaxPendingStagings + 1}),
            std::string("abcdefghi").substr(0, kMaxPendingStagings + 1));
}

TEST_F(CommandPathTest, AStreamHoldsAtMostTheBacklogBoundOfUnfinishedCommands) {
  const uint64_t buffer = harness_.Allocate(64);
  ASSERT_THAT(harness_.Sync(), IsOk());  // its zeroing done: nothing owed
  harness_.faults().HoldCompletions();
  std::vector<Command> fills;
  for (size_t i = 0; i < kMaxCommandsPerSubmit; ++i) {
    fills.push_back(FillCommand{{buffer, i % 64, 1}, 7});
  }
  // Up to the bound (16 whole batches), every batch is enqueued though
  // nothing completes...
  static_assert(kMaxQueueBacklog % kMaxCommandsPerSubmit == 0);
  uint64_t enqueued = 0;
  while (enqueued < kMaxQueueBacklog) {
    Pending<absl::StatusOr<size_t>> submitted;
    commands().Submit(harness_.session(), harness_.stream(), fills,
                      SubmitErrors::kReturn, submitted.Callback());
    ASSERT_TRUE(submitted.arrived()) << "suspended after " << enqueued;
    ASSERT_THAT(submitted.Get(), IsOk());
    enqueued += kMaxCommandsPerSubmit;
  }
  EXPECT_EQ(enqueued, kMaxQueueBacklog);
  EXPECT_EQ(harness_.core().admin().status().suspended_streams, 0u);
  // ...and the batch that crosses it waits, unreported (its client's next
  // request unread), until the queue has done half of what it holds.
  Pending<absl::StatusOr<size_t>> crossing;
  commands().Submit(harness_.session(), harness_.stream(), fills,
                    SubmitErrors::kReturn, crossing.Callback());
  EXPECT_FALSE(crossing.arrived());
  EXPECT_EQ(harness_.core().admin().status().suspended_streams, 1u);
  harness_.faults().ReleaseCompletions();
  EXPECT_THAT(crossing.Get(), IsOk());
  EXPECT_EQ(*crossing.Get(), kMaxCommandsPerSubmit);
  EXPECT_EQ(harness_.core().admin().status().suspended_streams, 0u);
  EXPECT_EQ(*harness_.Read({buffer, 0, 1}), std::string(1, '\x07'));
}

TEST_F(CommandPathTest, ABatchWaitingAtTheBacklogBoundEndsWhenTheQueueFails) {
  const uint64_t buffer = harness_.Allocate(64);
  ASSERT_THAT(harness_.Sync(), IsOk());
  harness_.faults().HoldCompletions();
  std::vector<Command> fills;
  for (size_t i = 0; i < kMaxCommandsPerSubmit; ++i) {
    fills.push_back(FillCommand{{buffer, i % 64, 1}, 7});
  }
  for (uint64_t enqueued = 0; enqueued < kMaxQueueBacklog;
       enqueued += kMaxCommandsPerSubmit) {
    ASSERT_THAT(harness_.Submit(fills), IsOk());
  }
  Pending<absl::StatusOr<size_t>> crossing;
  commands().Submit(harness_.session(), harness_.stream(), fills,
                    SubmitErrors::kReturn, crossing.Callback());
  ASSERT_FALSE(crossing.arrived());
  // The completion it waits for reports a failure: the rest of the batch
  // goes on without waiting again, and the stream's sync reports it.
  harness_.faults().FailCompletions(
      Refusal(Reason::kDeviceFault, "the device failed. Fix: x."));
  harness_.faults().ReleaseCompletions();
  EXPECT_TRUE(crossing.Get().ok()) << crossing.Get().status();
  EXPECT_THAT(harness_.Sync(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("device_fault")));
}

TEST_F(CommandPathTest, OperationsPastTheParkLimitAreRefusedAtOnce) {
  Pending<absl::StatusOr<size_t>> submitted;
  SuspendABatch(submitted);
  std::vector<std::unique_ptr<Pending<absl::Status>>> parked;
  for (size_t i = 0; i < kMaxParkedOps; ++i) {
    parked.push_back(std::make_unique<Pending<absl::Status>>());
    commands().Synchronize(harness_.session(), harness_.stream(),
                           parked.back()->Callback());
  }
  Pending<absl::Status> refused;
  commands().Synchronize(harness_.session(), harness_.stream(),
                         refused.Callback());
  ASSERT_TRUE(refused.arrived());
  EXPECT_EQ(ReasonOf(refused.Get()), Reason::kStreamBusy);
  EXPECT_THAT(refused.Get().message(), HasSubstr("the limit is 64"));
  harness_.faults().ReleaseCompletions();
  for (auto& sync : parked) EXPECT_THAT(sync->Get(), IsOk());
  EXPECT_THAT(submitted.Get(), IsOk());
}

TEST_F(CommandPathTest, ADeferredRefusalIsReportedOnceAtTheNextSyncPoint) {
  std::vector<Command> bad;
  bad.push_back(FillCommand{{/*buffer=*/12345, 0, 1}, 7});
  EXPECT_EQ(*harness_.Submit(std::move(bad), SubmitErrors::kDefer), 0u);
  auto polled = commands().Poll(harness_.session(), harness_.stream());
  EXPECT_THAT(polled.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("submit command 1 of 1 (fill dst)")));
  EXPECT_THAT(harness_.Sync(), IsOk());  // reported once, then cleared
}

TEST_F(CommandPathTest, ADeferredRefusalWaitsItsTurnBehindASuspendedBatch) {
  Pending<absl::StatusOr<size_t>> submitted;
  SuspendABatch(submitted);
  // Parked before the refusal: it completes clean.
  Pending<absl::Status> before;
  commands().Synchronize(harness_.session(), harness_.stream(),
                         before.Callback());
  commands().DeferRefusal(harness_.session(), harness_.stream(),
                          Refusal(Reason::kMalformedRequest, "x. Fix: y."));
  Pending<absl::Status> after;
  commands().Synchronize(harness_.session(), harness_.stream(),
                         after.Callback());
  EXPECT_FALSE(before.arrived());
  EXPECT_FALSE(after.arrived());
  harness_.faults().ReleaseCompletions();
  EXPECT_THAT(before.Get(), IsOk());
  EXPECT_EQ(ReasonOf(after.Get()), Reason::kMalformedRequest);
  EXPECT_THAT(submitted.Get(), IsOk());
}

TEST_F(CommandPathTest, ADeferredRefusalIsKeptEvenWhenTheParkIsFull) {
  Pending<absl::StatusOr<size_t>> submitted;
  SuspendABatch(submitted);
  std::vector<std::unique_ptr<Pending<absl::Status>>> parked;
  for (size_t i = 0; i < kMaxParkedOps; ++i) {
    parked.push_back(std::make_unique<Pending<absl::Status>>());
    commands().Synchronize(harness_.session(), harness_.stream(),
                           parked.back()->Callback());
  }
  commands().DeferRefusal(harness_.session(), harness_.stream(),
                          Refusal(Reason::kMalformedRequest, "x. Fix: y."));
  harness_.faults().ReleaseCompletions();
  EXPECT_THAT(submitted.Get(), IsOk());
  // Kept at once rather than lost: the first sync point reports it.
  EXPECT_EQ(ReasonOf(parked.front()->Get()), Reason::kMalformedRequest);
  for (size_t i = 1; i < parked.size(); ++i) {
    EXPECT_THAT(parked[i]->Get(), IsOk());
  }
}

TEST_F(CommandPathTest, AFailingQueueIsReportedBySync) {
  const uint64_t buffer = harness_.Allocate(16);
  harness_.faults().FailCompletions(
      Refusal(Reason::kKernelFailed, "injected. Fix: none."));
  std::vector<Command> fill;
  fill.push_back(FillCommand{{buffer, 0, 16}, 1});
  ASSERT_THAT(harness_.Submit(std::move(fill)).status(), IsOk());
  EXPECT_EQ(ReasonOf(harness_.Sync()), Reason::kKernelFailed);
}

TEST_F(CommandPathTest, ALostDeviceRefusesTheBatchAndDropsItsEvents) {
  const uint64_t buffer = harness_.Allocate(16);
  harness_.faults().LoseDevice(Refusal(Reason::kDeviceFault, "lost. Fix: x."));
  std::vector<Command> batch;
  batch.push_back(FillCommand{{buffer, 0, 16}, 1});
  batch.push_back(RecordEventCommand{42});
  EXPECT_EQ(ReasonOf(harness_.Submit(std::move(batch)).status()),
            Reason::kDeviceFault);
  // Nobody can wait on an event that was never published.
  EXPECT_EQ(
      ReasonOf(harness_.core().events().Query(harness_.session(), 42).status()),
      Reason::kUnknownEvent);
  EXPECT_EQ(harness_.Usage(Resource::kEvents), 0u);
}

TEST_F(CommandPathTest, ClosingTheSessionCancelsParkedWorkAndTheBatch) {
  Pending<absl::StatusOr<size_t>> submitted;
  SuspendABatch(submitted);
  Pending<absl::Status> synced;
  commands().Synchronize(harness_.session(), harness_.stream(),
                         synced.Callback());
  Pending<absl::StatusOr<CloseSummary>> closed;
  harness_.core().CloseSession(harness_.session(), closed.Callback());
  ASSERT_TRUE(synced.arrived());
  EXPECT_EQ(ReasonOf(synced.Get()), Reason::kSessionClosed);
  harness_.faults().ReleaseCompletions();
  EXPECT_EQ(ReasonOf(submitted.Get().status()), Reason::kSessionClosed);
  EXPECT_THAT(closed.Get().status(), IsOk());
  // The suspended batch's charges go when its last reference does, which
  // may be a moment after its callback reported.
  EXPECT_TRUE(harness_.UsageReaches(Resource::kInflightCommands, 0));
  EXPECT_TRUE(harness_.UsageReaches(Resource::kStreams, 0));
}

}  // namespace
}  // namespace hrx::daemon
