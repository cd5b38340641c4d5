// The planner against a real session and a stream whose queue never runs
// anything here: it only checks and prepares.
#include "daemon/core/planner.h"

#include <string>
#include <variant>
#include <vector>

#include "daemon/core/core_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon::planner {
namespace {

using ::hrx::daemon::testing::CoreHarness;
using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

class PlannerTest : public ::testing::Test {
 protected:
  PlannerTest() {
    buffer_ = harness_.Allocate(64);
    session_ = *harness_.core().sessions().Find(harness_.session());
    absl::MutexLock lock(&session_->mu);
    stream_ = **session_->streams.Find(harness_.stream(), "test");
  }

  // Prepares `commands` as one batch named by `noun`.
  absl::StatusOr<Plan> Prepare(std::vector<Command> commands,
                               std::string noun = "submit command",
                               bool use_caches = true) {
    absl::MutexLock lock(&session_->mu);
    Planner planner(*session_, *stream_, commands.size(), noun, use_caches);
    planner.AssertSessionLocked();
    for (size_t i = 0; i < commands.size(); ++i) {
      if (absl::Status added = planner.Add(i, commands[i]); !added.ok()) {
        return added;
      }
    }
    return planner.Take();
  }

  CoreHarness harness_;
  std::shared_ptr<Session> session_;
  std::shared_ptr<StreamEntry> stream_;
  uint64_t buffer_ = 0;
};

TEST_F(PlannerTest, AFillIsPreparedAsAFillNeverACopy) {
  auto plan = Prepare({FillCommand{{buffer_, 8, 16}, 0xab}});
  ASSERT_THAT(plan.status(), IsOk());
  ASSERT_EQ(plan->steps.size(), 1u);
  const auto* fill = std::get_if<backend::FillOp>(&plan->steps[0]);
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->offset, 8u);
  EXPECT_EQ(fill->length, 16u);
  EXPECT_EQ(fill->value, 0xab);
}

TEST_F(PlannerTest, RepeatedTransfersHitTheStreamCacheUnlessDisabled) {
  ASSERT_THAT(Prepare({FillCommand{{buffer_, 0, 8}, 1}}).status(), IsOk());
  EXPECT_EQ(stream_->transfer_cache.stats().hits, 0u);
  auto again = Prepare({FillCommand{{buffer_, 0, 8}, 1}});
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(stream_->transfer_cache.stats().hits, 1u);
  EXPECT_TRUE(std::holds_alternative<backend::FillOp>(again->steps[0]));
  ASSERT_THAT(Prepare({FillCommand{{buffer_, 0, 8}, 1}}, "graph node",
                      /*use_caches=*/false)
                  .status(),
              IsOk());
  EXPECT_EQ(stream_->transfer_cache.stats().hits, 1u);
}

// A dispatch whose "kernel" is the handle `not_a_kernel`.
DispatchCommand ForeignDispatch(uint64_t not_a_kernel) {
  DispatchCommand dispatch;
  dispatch.kernel = not_a_kernel;
  return dispatch;
}

// A handle of `kind` this session never issued.
uint64_t NeverIssued(shared::HandleKind kind) {
  return shared::Handle{kind, /*slot=*/7, /*generation=*/1}.Encode();
}

// Refusals, each naming the command's position in its batch or graph.
struct RefusalCase {
  std::string name;
  std::vector<Command> commands;
  std::string noun;
  Reason reason;
  std::string position;
};

TEST_F(PlannerTest, RefusalsNameWhatTheyBelongTo) {
  const uint64_t b = buffer_;
  const std::vector<RefusalCase> cases = {
      {"fill past the end",
       {FillCommand{{b, 60, 8}, 0}},
       "submit command",
       Reason::kViewOutOfRange,
       "submit command 1 of 1 (fill dst)"},
      {"graph copy of unequal views",
       {FillCommand{{b, 0, 1}, 0}, CopyCommand{{b, 0, 8}, {b, 16, 4}}},
       "graph node",
       Reason::kCopyLengthMismatch,
       "graph node 2 of 2 (copy)"},
      {"overlapping copy",
       {CopyCommand{{b, 0, 8}, {b, 4, 8}}},
       "submit command",
       Reason::kCopyOverlap,
       "submit command 1 of 1 (copy)"},
      {"upload larger than its view",
       {UploadCommand{{b, 0, 2}, std::string("abc")}},
       "submit command",
       Reason::kUploadTooLarge,
       "submit command 1 of 1 (upload dst)"},
      {"event id zero",
       {RecordEventCommand{0}},
       "submit command",
       Reason::kEventIdInUse,
       "submit command 1 of 1 (record_event)"},
      {"event recorded twice",
       {RecordEventCommand{5}, RecordEventCommand{5}},
       "submit command",
       Reason::kEventIdInUse,
       "submit command 2 of 2 (record_event)"},
      {"wait on an unknown event",
       {WaitEventCommand{9}},
       "submit command",
       Reason::kUnknownEvent,
       "submit command 1 of 1 (wait_event)"},
      {"dispatch through a buffer handle",
       {ForeignDispatch(b)},
       "graph node",
       Reason::kWrongHandleKind,
       "graph node 1 of 1 (dispatch)"},
      {"launch through a buffer handle",
       {LaunchGraphCommand{b}},
       "submit command",
       Reason::kWrongHandleKind,
       "submit command 1 of 1 (launch_graph)"},
      {"dispatch of a kernel never loaded",
       {ForeignDispatch(NeverIssued(shared::HandleKind::kKernel))},
       "submit command",
       Reason::kUnknownHandle,
       "submit command 1 of 1 (dispatch)"},
      {"launch of a graph never made",
       {LaunchGraphCommand{NeverIssued(shared::HandleKind::kGraphExec)}},
       "graph node",
       Reason::kUnknownHandle,
       "graph node 1 of 1 (launch_graph)"},
  };
  for (const RefusalCase& c : cases) {
    auto plan = Prepare(c.commands, c.noun);
    EXPECT_EQ(ReasonOf(plan.status()), c.reason)
        << c.name << ": " << plan.status();
    EXPECT_THAT(plan.status().message(), HasSubstr(c.position)) << c.name;
  }
}

TEST_F(PlannerTest, AWaitOnThisStreamsOwnEventNeedsNoQueueWait) {
  auto plan = Prepare({RecordEventCommand{3}, WaitEventCommand{3}});
  ASSERT_THAT(plan.status(), IsOk());
  ASSERT_EQ(plan->steps.size(), 2u);
  const auto* wait = std::get_if<PreparedWait>(&plan->steps[1]);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->queue, nullptr);
  EXPECT_EQ(plan->recorded_events, std::vector<uint64_t>{3});
}

}  // namespace
}  // namespace hrx::daemon::planner
