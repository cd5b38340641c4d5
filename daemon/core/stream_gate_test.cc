#include "daemon/core/stream_gate.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::IsOk;

// An operation that records, in `log`, its name and how it was told to run.
GatedOp Op(std::vector<std::string>& log, std::string name) {
  return [&log, name](absl::Status cancelled, Deferred&) {
    log.push_back(name + (cancelled.ok()
                              ? ""
                              : ":" + std::string(ReasonToken(cancelled))));
  };
}

class StreamGateTest : public ::testing::Test {
 protected:
  StreamEntry stream_{/*id=*/1, /*queue_index=*/0, /*queue=*/nullptr};
  Deferred after_;
  std::vector<std::string> log_;
};

TEST_F(StreamGateTest, OperationsRunAtOnceUnlessABatchIsSuspended) {
  RunInOrder(stream_, Op(log_, "a"), after_);
  EXPECT_EQ(log_, std::vector<std::string>{"a"});
  stream_.suspended = true;
  RunInOrder(stream_, Op(log_, "b"), after_);
  RunInOrder(stream_, Op(log_, "c"), after_);
  EXPECT_EQ(log_.size(), 1u);
  stream_.suspended = false;
  RunParked(stream_, after_);
  EXPECT_EQ(log_, (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(StreamGateTest, TheParkLimitIsInclusive) {
  stream_.suspended = true;
  for (size_t i = 0; i < kMaxParkedOps; ++i) {
    RunInOrder(stream_, Op(log_, "p"), after_);
  }
  EXPECT_TRUE(log_.empty());
  RunInOrder(stream_, Op(log_, "over"), after_);
  EXPECT_EQ(log_, std::vector<std::string>{"over:stream_busy"});
}

TEST_F(StreamGateTest, ClosingCancelsWhatIsParkedAndWhatComesLater) {
  stream_.suspended = true;
  RunInOrder(stream_, Op(log_, "parked"), after_);
  CloseStream(stream_, after_);
  RunInOrder(stream_, Op(log_, "late"), after_);
  EXPECT_EQ(log_, (std::vector<std::string>{"parked:session_closed",
                                            "late:session_closed"}));
}

TEST_F(StreamGateTest, TheFirstDeferredRefusalIsKeptAndTakenOnce) {
  DeferRefusal(stream_, Refusal(Reason::kCopyOverlap, "first. Fix: a."));
  DeferRefusal(stream_, Refusal(Reason::kUploadTooLarge, "second. Fix: b."));
  EXPECT_EQ(ReasonOf(TakeDeferredRefusal(stream_)), Reason::kCopyOverlap);
  EXPECT_THAT(TakeDeferredRefusal(stream_), IsOk());
}

TEST_F(StreamGateTest, ASyncPointReportsCancellationBeforeTheDeferredRefusal) {
  DeferRefusal(stream_, Refusal(Reason::kCopyOverlap, "x. Fix: y."));
  absl::Status reported;
  DoneCallback done = [&](absl::Status status) { reported = status; };
  EXPECT_TRUE(ReportedAtSyncPoint(stream_, SessionClosed(), done, after_));
  RunDeferred(after_);
  EXPECT_EQ(ReasonOf(reported), Reason::kSessionClosed);
  EXPECT_TRUE(ReportedAtSyncPoint(stream_, absl::OkStatus(), done, after_));
  RunDeferred(after_);
  EXPECT_EQ(ReasonOf(reported), Reason::kCopyOverlap);
  EXPECT_FALSE(ReportedAtSyncPoint(stream_, absl::OkStatus(), done, after_));
}

}  // namespace
}  // namespace hrx::daemon
