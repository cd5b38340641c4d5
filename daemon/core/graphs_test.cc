#include "daemon/core/graphs.h"

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
using ::testing::HasSubstr;

GraphNodeSpec Node(decltype(GraphNodeSpec::op) op,
                   std::vector<uint32_t> after = {}) {
  return GraphNodeSpec{std::move(op), std::move(after)};
}

class GraphsTest : public ::testing::Test {
 protected:
  Graphs& graphs() { return harness_.core().graphs(); }
  // fill a[0,32) with 7; join; copy a -> b.
  GraphSpec FillThenCopy(uint64_t a, uint64_t b) {
    GraphSpec spec;
    spec.nodes.push_back(Node(FillCommand{{a, 0, 32}, 7}));
    spec.nodes.push_back(Node(JoinCommand{}, {0}));
    spec.nodes.push_back(Node(CopyCommand{{b, 0, 32}, {a, 0, 32}}, {1}));
    return spec;
  }
  // FillThenCopy between two new buffers, profiled, on the harness stream.
  absl::StatusOr<GraphExecInfo> ProfiledExec() {
    GraphSpec spec = FillThenCopy(harness_.Allocate(32), harness_.Allocate(32));
    spec.profiled = true;
    spec.labels = {"fill", "copy"};
    return graphs().CreateExec(harness_.session(), harness_.stream(),
                               std::move(spec));
  }
  CoreHarness harness_;
};

TEST_F(GraphsTest, APreparedGraphReplaysAndCountsEachBindingOnce) {
  const uint64_t a = harness_.Allocate(32);
  const uint64_t b = harness_.Allocate(32);
  auto exec = graphs().CreateExec(harness_.session(), harness_.stream(),
                                  FillThenCopy(a, b));
  ASSERT_THAT(exec.status(), IsOk());
  EXPECT_EQ(exec->binding_bytes, 64u);  // a twice, b once: 32 + 32
  std::vector<Command> launch;
  launch.push_back(LaunchGraphCommand{exec->handle});
  ASSERT_THAT(harness_.Submit(std::move(launch)).status(), IsOk());
  EXPECT_EQ(*harness_.Read({b, 0, 32}), std::string(32, '\x07'));
}

TEST_F(GraphsTest, NodeShapesAreRefusedWithTheirPosition) {
  const uint64_t a = harness_.Allocate(32);
  GraphSpec forward;
  forward.nodes.push_back(Node(JoinCommand{}, {1}));
  forward.nodes.push_back(Node(JoinCommand{}));
  auto refused = graphs().CreateExec(harness_.session(), harness_.stream(),
                                     std::move(forward));
  EXPECT_EQ(ReasonOf(refused.status()), Reason::kBadGraphNode);
  EXPECT_THAT(refused.status().message(), HasSubstr("graph node 1 of 2"));
  GraphSpec empty_fill;
  empty_fill.nodes.push_back(Node(FillCommand{{a, 0, 0}, 1}));
  EXPECT_EQ(ReasonOf(graphs()
                         .CreateExec(harness_.session(), harness_.stream(),
                                     std::move(empty_fill))
                         .status()),
            Reason::kBadGraphNode);
  GraphSpec labels = FillThenCopy(a, a);
  labels.profiled = true;
  labels.labels = {"only one"};
  EXPECT_EQ(ReasonOf(graphs()
                         .CreateExec(harness_.session(), harness_.stream(),
                                     std::move(labels))
                         .status()),
            Reason::kLabelMismatch);
}

TEST_F(GraphsTest, ARefusedGraphGivesItsChargeBack) {
  const uint64_t a = harness_.Allocate(32);
  const uint64_t freed = harness_.Allocate(32);
  ASSERT_THAT(harness_.core().buffers().Free(harness_.session(), freed),
              IsOk());
  // Refused by the planner, after the graph was charged.
  auto refused = graphs().CreateExec(harness_.session(), harness_.stream(),
                                     FillThenCopy(a, freed));
  EXPECT_EQ(ReasonOf(refused.status()), Reason::kStaleHandle);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("graph node 3 of 3 (copy dst)"));
  EXPECT_EQ(harness_.Usage(Resource::kGraphs), 0u);
}

TEST_F(GraphsTest, AGraphReplaysOnlyOnItsOwnStreamInEitherLaunch) {
  auto exec = ProfiledExec();
  ASSERT_THAT(exec.status(), IsOk());
  auto other = harness_.core().commands().CreateStream(harness_.session());
  ASSERT_THAT(other.status(), IsOk());
  Pending<absl::StatusOr<std::vector<NodeTime>>> profiled;
  graphs().LaunchProfiled(harness_.session(), other->handle, exec->handle,
                          profiled.Callback());
  EXPECT_EQ(ReasonOf(profiled.Get().status()), Reason::kGraphWrongStream);
  Pending<absl::StatusOr<size_t>> submitted;
  std::vector<Command> launch;
  launch.push_back(LaunchGraphCommand{exec->handle});
  harness_.core().commands().Submit(harness_.session(), other->handle,
                                    std::move(launch), SubmitErrors::kReturn,
                                    submitted.Callback());
  EXPECT_EQ(ReasonOf(submitted.Get().status()), Reason::kGraphWrongStream);
}

TEST_F(GraphsTest, AProfiledLaunchReportsTheDeferredRefusalFirst) {
  auto exec = ProfiledExec();
  ASSERT_THAT(exec.status(), IsOk());
  harness_.core().commands().DeferRefusal(
      harness_.session(), harness_.stream(),
      Refusal(Reason::kMalformedRequest, "x. Fix: y."));
  Pending<absl::StatusOr<std::vector<NodeTime>>> first;
  graphs().LaunchProfiled(harness_.session(), harness_.stream(), exec->handle,
                          first.Callback());
  EXPECT_EQ(ReasonOf(first.Get().status()), Reason::kMalformedRequest);
  Pending<absl::StatusOr<std::vector<NodeTime>>> second;
  graphs().LaunchProfiled(harness_.session(), harness_.stream(), exec->handle,
                          second.Callback());
  ASSERT_THAT(second.Get().status(), IsOk());
  ASSERT_EQ(second.Get()->size(), 2u);
  EXPECT_EQ((*second.Get())[0].label, "fill");
  EXPECT_EQ((*second.Get())[1].label, "copy");
}

}  // namespace
}  // namespace hrx::daemon
