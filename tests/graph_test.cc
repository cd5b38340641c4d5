// Graphs through the daemon on the CPU backend: recording rules, dependency
// order on every replay, launch rules, failure marking, profiling, budgets.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "hrx/v1/graph.grpc.pb.h"
#include "shared/grpc_status.h"
#include "tests/client_fixture.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

class GraphTest : public ClientFixture {};

TEST_F(GraphTest, ACopyAfterAFillSeesTheFillOnEveryReplay) {
  Buffer a = Allocate(*stream_, 1 << 16);
  Buffer b = Allocate(*stream_, 1 << 16);
  Graph graph = stream_->BeginGraph();
  auto fill = graph.Fill({}, a.Binding(), 0x3c);
  ASSERT_THAT(fill.status(), IsOk());
  const Node after_fill[] = {*fill};
  auto copy = graph.Copy(after_fill, b.Binding(), a.Binding());
  ASSERT_THAT(copy.status(), IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  EXPECT_EQ(exec->node_count(), 2u);
  for (int replay = 0; replay < 5; ++replay) {
    ASSERT_THAT(stream_->Fill(b.Binding(), 0), IsOk());  // reset b
    ASSERT_THAT(stream_->Launch(*exec), IsOk());
    EXPECT_THAT(ReadAll(*stream_, b.Binding()), Each(0x3c)) << replay;
  }
}

TEST_F(GraphTest, JoinsOrderIndependentBranchesBeforeTheirSuccessors) {
  constexpr int kBranches = 8;
  std::vector<Buffer> parts;
  for (int i = 0; i < kBranches; ++i) parts.push_back(Allocate(*stream_, 4096));
  Buffer total = Allocate(*stream_, 4096 * kBranches);
  Graph graph = stream_->BeginGraph();
  std::vector<Node> fills;
  for (int i = 0; i < kBranches; ++i) {
    fills.push_back(
        *graph.Fill({}, parts[i].Binding(), static_cast<uint8_t>(i + 1)));
  }
  auto join = graph.Join(fills);
  ASSERT_THAT(join.status(), IsOk());
  const Node after_join[] = {*join};
  for (int i = 0; i < kBranches; ++i) {
    ASSERT_THAT(
        graph.Copy(after_join, *total.Slice(i * 4096, 4096), parts[i].Binding())
            .status(),
        IsOk());
  }
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  // Distinct allocations, each once: 8 parts + total.
  EXPECT_EQ(exec->binding_bytes(), 4096u * kBranches * 2);
  ASSERT_THAT(stream_->Launch(*exec), IsOk());
  const std::vector<uint8_t> bytes = ReadAll(*stream_, total.Binding());
  for (int i = 0; i < kBranches; ++i) {
    EXPECT_EQ(bytes[i * 4096], i + 1);
    EXPECT_EQ(bytes[i * 4096 + 4095], i + 1);
  }
}

TEST_F(GraphTest, DispatchNodesRunKernels) {
  auto add = stream_->LoadKernelFile(KernelPath("add_f32"), "add_f32");
  ASSERT_THAT(add.status(), IsOk());
  Buffer data = Allocate(*stream_, 256 * 4);
  ASSERT_THAT(stream_->Fill(data.Binding(), 0), IsOk());
  Constants constants;
  ASSERT_THAT(constants.Push(uint32_t{256}), IsOk());
  ASSERT_THAT(constants.Push(1.0f), IsOk());
  const View binding = data.Binding();
  Graph graph = stream_->BeginGraph();
  auto first = graph.Dispatch({}, *add, {1, 1, 1}, {256, 1, 1}, constants,
                              {&binding, 1});
  ASSERT_THAT(first.status(), IsOk());
  const Node after[] = {*first};
  ASSERT_THAT(graph
                  .Dispatch(after, *add, {1, 1, 1}, {256, 1, 1}, constants,
                            {&binding, 1})
                  .status(),
              IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT(stream_->Launch(*exec), IsOk());
  std::vector<uint8_t> bytes = ReadAll(*stream_, binding);
  float value;
  std::memcpy(&value, bytes.data() + 4 * 255, 4);
  EXPECT_EQ(value, 6.0f);  // 3 launches x 2 nodes x 1.0
}

TEST_F(GraphTest, RecordingRefusesBadNodes) {
  Buffer a = Allocate(*stream_, 64);
  Buffer b = Allocate(*stream_, 32);
  Graph graph = stream_->BeginGraph();
  Graph other = stream_->BeginGraph();
  auto foreign = other.Fill({}, a.Binding(), 1);
  ASSERT_THAT(foreign.status(), IsOk());
  const Node from_other[] = {*foreign};
  EXPECT_THAT(
      graph.Fill(from_other, a.Binding(), 1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("foreign_node")));
  const Node past_end[] = {Node{graph.id(), 7}};
  EXPECT_THAT(graph.Join(past_end), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("foreign_node")));
  EXPECT_THAT(graph.Fill({}, *a.Slice(0, 0), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_graph_node")));
  EXPECT_THAT(graph.Copy({}, a.Binding(), b.Binding()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_graph_node")));
  EXPECT_THAT(graph.Copy({}, *a.Slice(0, 0), *b.Slice(0, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_graph_node")));
}

TEST_F(GraphTest, NodeCapacityIsInclusive) {
  Buffer a = Allocate(*stream_, 8);
  Graph graph = stream_->BeginGraph();
  for (size_t i = 0; i < kMaxGraphNodes; ++i) {
    ASSERT_THAT(graph.Join({}).status(), IsOk()) << i;
  }
  EXPECT_THAT(
      graph.Fill({}, a.Binding(), 1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("graph_full")));
  EXPECT_THAT(graph.Finish().status(), IsOk());
}

TEST_F(GraphTest, TheDaemonRefusesNodesThatWaitOnLaterOnesOrTooManyNodes) {
  RawSession raw(daemon_->socket_path());
  const hrx::v1::Handle stream = *raw.CreateStream();
  const hrx::v1::Handle buffer = *raw.Allocate(64);
  auto graphs = hrx::v1::Graphs::NewStub(raw.channel);
  auto create = [&](const hrx::v1::CreateGraphExecRequest& request) {
    auto context = raw.Context();
    hrx::v1::CreateGraphExecResponse response;
    return shared::FromGrpcStatus(
        graphs->CreateExec(context.get(), request, &response));
  };
  hrx::v1::CreateGraphExecRequest request;
  *request.mutable_stream() = stream;
  hrx::v1::GraphNode* fill = request.add_nodes();
  *fill->mutable_fill()->mutable_dst()->mutable_buffer() = buffer;
  fill->mutable_fill()->mutable_dst()->set_length(64);
  fill->add_after(1);  // a later node
  request.add_nodes()->mutable_join();
  EXPECT_THAT(create(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bad_graph_node: graph node 1 of 2"),
                             HasSubstr("not an earlier node"))));
  hrx::v1::CreateGraphExecRequest big;
  *big.mutable_stream() = stream;
  for (size_t i = 0; i <= kMaxGraphNodes; ++i) big.add_nodes()->mutable_join();
  EXPECT_THAT(create(big), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("graph_too_large")));
  // A node whose view is out of range names its position.
  hrx::v1::CreateGraphExecRequest wide;
  *wide.mutable_stream() = stream;
  hrx::v1::GraphNode* far = wide.add_nodes();
  *far->mutable_fill()->mutable_dst()->mutable_buffer() = buffer;
  far->mutable_fill()->mutable_dst()->set_offset(60);
  far->mutable_fill()->mutable_dst()->set_length(8);
  EXPECT_THAT(create(wide),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range: graph node 1 of 1")));
}

TEST_F(GraphTest, AnExecReplaysOnlyOnItsOwnStream) {
  Buffer a = Allocate(*stream_, 64);
  Graph graph = stream_->BeginGraph();
  ASSERT_THAT(graph.Fill({}, a.Binding(), 9).status(), IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  Stream other = NewStream();
  EXPECT_THAT(other.Launch(*exec),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("graph_wrong_stream")));
}

// A graph refers to its stream's state, not to the Stream object: it keeps
// recording, finishing and launching through whichever Stream now owns it.
TEST_F(GraphTest, AGraphFollowsItsStreamThroughMoves) {
  Stream first = NewStream();
  Buffer a = Allocate(first, 1 << 16);
  Buffer b = Allocate(first, 1 << 16);
  Graph graph = first.BeginGraph();
  auto fill = graph.Fill({}, a.Binding(), 0x3c);
  ASSERT_THAT(fill.status(), IsOk());
  Stream second = std::move(first);  // move construction
  const Node after_fill[] = {*fill};
  ASSERT_THAT(graph.Copy(after_fill, b.Binding(), a.Binding()).status(),
              IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  Stream third = NewStream();
  third = std::move(second);  // move assignment; third's own stream ends
  ASSERT_THAT(third.Fill(b.Binding(), 0), IsOk());
  ASSERT_THAT(third.Launch(*exec), IsOk());
  EXPECT_THAT(ReadAll(third, b.Binding()), Each(0x3c));
  EXPECT_THAT(stream_->Launch(*exec),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("graph_wrong_stream")));
}

TEST_F(GraphTest, AGraphWhoseStreamWasDestroyedIsRefused) {
  Buffer a = Allocate(*stream_, 64);
  Buffer b = Allocate(*stream_, 64);
  std::optional<Stream> doomed(NewStream());
  Graph graph = doomed->BeginGraph();
  auto fill = graph.Fill({}, a.Binding(), 7);
  ASSERT_THAT(fill.status(), IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  doomed.reset();
  const auto destroyed =
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("stream_destroyed"), HasSubstr("Fix:")));
  const Node after_fill[] = {*fill};
  EXPECT_THAT(graph.Fill({}, a.Binding(), 8).status(), destroyed);
  EXPECT_THAT(graph.Copy(after_fill, b.Binding(), a.Binding()).status(),
              destroyed);
  EXPECT_THAT(graph.Join(after_fill).status(), destroyed);
  EXPECT_THAT(graph.Finish().status(), destroyed);
  const std::vector<std::string> labels = {"fill"};
  EXPECT_THAT(graph.FinishProfiled(labels).status(), destroyed);
  EXPECT_EQ(graph.size(), 1u);  // the recording itself is still readable
  // The exec it made replays nowhere else, and says why.
  EXPECT_THAT(
      stream_->Launch(*exec),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("graph_wrong_stream"), HasSubstr("destroyed"))));
  EXPECT_THAT(stream_->LaunchProfiled(*exec).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("graph_wrong_stream")));
}

TEST_F(GraphTest, AMovedFromGraphOrExecIsRefused) {
  Buffer a = Allocate(*stream_, 64);
  Graph graph = stream_->BeginGraph();
  ASSERT_THAT(graph.Fill({}, a.Binding(), 1).status(), IsOk());
  Graph kept = std::move(graph);
  const auto moved =
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("moved_graph"));
  EXPECT_THAT(graph.Fill({}, a.Binding(), 2).status(), moved);  // NOLINT
  EXPECT_THAT(graph.Finish().status(), moved);                  // NOLINT
  EXPECT_EQ(graph.size(), 0u);                                  // NOLINT
  auto exec = kept.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  GraphExec kept_exec = *std::move(exec);
  EXPECT_THAT(stream_->Launch(*exec), moved);  // NOLINT
  EXPECT_THAT(stream_->Launch(kept_exec), IsOk());
  EXPECT_THAT(ReadAll(*stream_, a.Binding()), Each(1));
}

TEST_F(GraphTest, AFailedLaunchMarksTheExecUntilCleared) {
  auto add = stream_->LoadKernelFile(KernelPath("add_f32"), "add_f32");
  ASSERT_THAT(add.status(), IsOk());
  Buffer small = Allocate(*stream_, 16);
  Constants
      too_many;  // n = 1000 floats into a 4-float binding: the kernel fails
  ASSERT_THAT(too_many.Push(uint32_t{1000}), IsOk());
  ASSERT_THAT(too_many.Push(1.0f), IsOk());
  const View binding = small.Binding();
  Graph graph = stream_->BeginGraph();
  ASSERT_THAT(
      graph.Dispatch({}, *add, {1, 1, 1}, {64, 1, 1}, too_many, {&binding, 1})
          .status(),
      IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  ASSERT_THAT(stream_->Launch(*exec), IsOk());
  EXPECT_THAT(stream_->Synchronize(), StatusIs(absl::StatusCode::kInternal,
                                               HasSubstr("kernel_failed")));
  ASSERT_THAT(stream_->Launch(*exec), IsOk());  // refused in the daemon...
  EXPECT_THAT(stream_->Synchronize(),           // ...and reported here
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("graph_failed")));
  ASSERT_THAT(exec->ClearFailure(), IsOk());
  ASSERT_THAT(stream_->Launch(*exec), IsOk());
  // On a GPU the fault lost the device context: the queues stay failed and
  // say so, rather than run anything more on a broken device.
  EXPECT_THAT(stream_->Synchronize(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr(TestBackend() == "hip" ? "GPU context is lost"
                                                        : "kernel_failed")));
}

TEST_F(GraphTest, ProfiledLaunchesReturnEachNodesTimeWithItsLabel) {
  Buffer a = Allocate(*stream_, 1 << 20);
  Buffer b = Allocate(*stream_, 1 << 20);
  Graph graph = stream_->BeginGraph();
  auto fill = graph.Fill({}, a.Binding(), 1);
  const Node after[] = {*fill};
  auto join = graph.Join(after);
  const Node after_join[] = {*join};
  ASSERT_THAT(graph.Copy(after_join, b.Binding(), a.Binding()).status(),
              IsOk());
  const std::vector<std::string> one_label = {"fill"};
  EXPECT_THAT(graph.FinishProfiled(one_label),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label_mismatch: finish profiled graph: 1 "
                                 "labels for 2 non-join nodes")));
  const std::vector<std::string> labels = {"fill a", "copy a to b"};
  auto exec = graph.FinishProfiled(labels);
  ASSERT_THAT(exec.status(), IsOk());
  auto profile = stream_->LaunchProfiled(*exec);
  ASSERT_THAT(profile.status(), IsOk());
  EXPECT_THAT(*profile, ElementsAre(Field(&NodeProfile::label, "fill a"),
                                    Field(&NodeProfile::label, "copy a to b")));
  EXPECT_GT((*profile)[0].nanoseconds, 0u);
  EXPECT_THAT(ReadAll(*stream_, *b.Slice(0, 16)), Each(1));
  // An exec finished without labels cannot be profiled.
  Graph plain = stream_->BeginGraph();
  ASSERT_THAT(plain.Fill({}, a.Binding(), 2).status(), IsOk());
  auto unprofiled = plain.Finish();
  ASSERT_THAT(unprofiled.status(), IsOk());
  EXPECT_THAT(stream_->LaunchProfiled(*unprofiled),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("graph_not_profiled")));
}

TEST_F(GraphTest, AnExecKeepsItsBuffersAliveAfterTheyAreFreed) {
  Buffer a = Allocate(*stream_, 4096);
  Buffer b = Allocate(*stream_, 4096);
  Graph graph = stream_->BeginGraph();
  auto fill = graph.Fill({}, a.Binding(), 0x55);
  const Node after[] = {*fill};
  ASSERT_THAT(graph.Copy(after, b.Binding(), a.Binding()).status(), IsOk());
  auto exec = graph.Finish();
  ASSERT_THAT(exec.status(), IsOk());
  ASSERT_THAT(a.Free(), IsOk());  // the exec still binds it
  ASSERT_THAT(stream_->Launch(*exec), IsOk());
  EXPECT_THAT(ReadAll(*stream_, b.Binding()), Each(0x55));
  const uint64_t with_exec = QueryStatus(daemon_->socket_path()).bytes_in_use();
  *exec = GraphExec(std::move(*exec));  // still one exec
  exec =
      absl::StatusOr<GraphExec>(absl::CancelledError("drop"));  // destroys it
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  // The freed buffer's memory went with the exec (or into the pool).
  EXPECT_LE(QueryStatus(daemon_->socket_path()).bytes_in_use(), with_exec);
}

class GraphBudgetTest : public ClientFixture {
 protected:
  std::vector<std::string> DaemonFlags() const override {
    const std::string config =
        "/tmp/hrx-graph-budget-" + std::to_string(getpid()) + ".conf";
    std::ofstream(config) << "tenants { name: \"ops\" uids: 0 role: "
                             "ROLE_ADMIN budget { graphs: 2 } }\n";
    return {"--config=" + config};
  }
};

TEST_F(GraphBudgetTest, ExecsCountAgainstTheTenantsGraphBudget) {
  Buffer a = Allocate(*stream_, 64);
  auto finish = [&] {
    Graph graph = stream_->BeginGraph();
    EXPECT_THAT(graph.Fill({}, a.Binding(), 1).status(), IsOk());
    return graph.Finish();
  };
  auto first = finish();
  auto second = finish();
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_THAT(finish(), StatusIs(absl::StatusCode::kResourceExhausted,
                                 AllOf(HasSubstr("budget_exhausted"),
                                       HasSubstr("graphs budget of 2"))));
  first = absl::StatusOr<GraphExec>(absl::CancelledError("drop"));
  EXPECT_THAT(finish().status(), IsOk());
}

}  // namespace
}  // namespace hrx::testing
