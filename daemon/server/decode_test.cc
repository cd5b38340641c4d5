// Caller::Commands and Caller::Graph, table-driven: each case builds a request
// and names either the refusal (code, reason token, position in the message)
// or what it decodes to, described one line per command or node.
#include "daemon/server/decode.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/core/handle_authority.h"
#include "daemon/core/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hrx/v1/graph.pb.h"
#include "hrx/v1/stream.pb.h"
#include "shared/handle.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::HandleKind;
using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Batch = ::hrx::v1::Batch;
using Graph = ::hrx::v1::CreateGraphExecRequest;

constexpr uint64_t Object(HandleKind kind, uint32_t slot) {
  return shared::Handle{kind, slot, 1}.Encode();
}
constexpr uint64_t kSession = Object(HandleKind::kSession, 3);
constexpr uint64_t kOtherSession = Object(HandleKind::kSession, 4);
constexpr uint64_t kBufA = Object(HandleKind::kBuffer, 7);
constexpr uint64_t kBufB = Object(HandleKind::kBuffer, 8);
constexpr uint64_t kKernel = Object(HandleKind::kKernel, 2);
constexpr uint64_t kExec = Object(HandleKind::kGraphExec, 9);
constexpr uint64_t kStream = Object(HandleKind::kStream, 1);

HandleAuthority Authority(uint64_t instance) {
  shared::SipKey key{};
  key[0] = static_cast<uint8_t>(instance);
  return HandleAuthority(instance, key);
}
const HandleAuthority& Daemon() {
  static const auto* authority = new HandleAuthority(Authority(0x1234));
  return *authority;
}

// Handles as a client of kSession might send them.
hrx::v1::Handle Sealed(uint64_t object, uint64_t session = kSession,
                       const HandleAuthority& daemon = Daemon()) {
  hrx::v1::Handle handle;
  Caller(daemon, session).Seal(object, &handle);
  return handle;
}
hrx::v1::Handle Forged(uint64_t object) {
  hrx::v1::Handle handle = Sealed(object);
  handle.set_tag(handle.tag() ^ 1);
  return handle;
}

void SetView(hrx::v1::View* view, uint64_t buffer, uint64_t offset,
             uint64_t length) {
  *view->mutable_buffer() = Sealed(buffer);
  view->set_offset(offset);
  view->set_length(length);
}
std::string Constants(size_t bytes) { return std::string(bytes, 'c'); }

// Valid operations appended to a batch or a graph, for a case to spoil.
hrx::v1::Command* Add(Batch* batch) { return batch->add_commands(); }
hrx::v1::GraphNode* Add(Graph* graph) { return graph->add_nodes(); }
template <typename Request>
hrx::v1::Fill* AddFill(Request* request) {
  hrx::v1::Fill* fill = Add(request)->mutable_fill();
  SetView(fill->mutable_dst(), kBufA, 16, 64);
  fill->set_value(0xab);
  return fill;
}
template <typename Request>
hrx::v1::Copy* AddCopy(Request* request) {
  hrx::v1::Copy* copy = Add(request)->mutable_copy();
  SetView(copy->mutable_dst(), kBufA, 0, 32);
  SetView(copy->mutable_src(), kBufB, 8, 32);
  return copy;
}
template <typename Request>
hrx::v1::Dispatch* AddDispatch(Request* request) {
  hrx::v1::Dispatch* dispatch = Add(request)->mutable_dispatch();
  *dispatch->mutable_kernel() = Sealed(kKernel);
  for (uint32_t g : {4, 2, 1}) dispatch->add_grid(g);
  for (uint32_t b : {64, 1, 1}) dispatch->add_block(b);
  dispatch->set_constants(std::string("\x01\x00\x00\x00", 4));
  SetView(dispatch->add_bindings(), kBufA, 0, 16);
  SetView(dispatch->add_bindings(), kBufB, 16, 16);
  return dispatch;
}
constexpr char kFill[] = "fill A@16+64 value 171";
constexpr char kCopy[] = "copy A@0+32 <- B@8+32";
constexpr char kDispatch[] =
    "dispatch K grid 4,2,1 block 64,1,1 constants \"\\x01\\x00\\x00\\x00\" "
    "bindings A@0+16,B@16+16";

// One line per decoded command or node, naming objects A, B, K and X.
std::string Name(uint64_t object) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {kBufA, "A"}, {kBufB, "B"}, {kKernel, "K"}, {kExec, "X"}};
  for (const auto& [named, name] : kNames) {
    if (named == object) return name;
  }
  return absl::StrFormat("%016x", object);
}
std::string Describe(const ViewRef& v) {
  return absl::StrFormat("%s@%d+%d", Name(v.buffer), v.offset, v.length);
}
std::string Describe(const FillCommand& c) {
  return absl::StrFormat("fill %s value %d", Describe(c.dst), c.value);
}
std::string Describe(const CopyCommand& c) {
  return absl::StrCat("copy ", Describe(c.dst), " <- ", Describe(c.src));
}
std::string Describe(const UploadCommand& c) {
  return absl::StrFormat("upload %s data \"%s\"", Describe(c.dst),
                         absl::CHexEscape(c.data));
}
std::string Describe(const RecordEventCommand& c) {
  return absl::StrCat("record_event ", c.event);
}
std::string Describe(const WaitEventCommand& c) {
  return absl::StrCat("wait_event ", c.event);
}
std::string Describe(const DispatchCommand& c) {
  std::vector<std::string> bindings;
  for (const ViewRef& view : c.bindings) bindings.push_back(Describe(view));
  return absl::StrFormat(
      "dispatch %s grid %s block %s constants \"%s\" bindings %s",
      Name(c.kernel), absl::StrJoin(c.grid, ","), absl::StrJoin(c.block, ","),
      absl::CHexEscape(c.constants), absl::StrJoin(bindings, ","));
}
std::string Describe(const LaunchGraphCommand& c) {
  return "launch_graph " + Name(c.exec);
}
std::string Describe(const JoinCommand&) { return "join"; }

constexpr auto kDescribe = [](const auto& c) { return Describe(c); };
std::vector<std::string> Describe(const std::vector<Command>& commands) {
  std::vector<std::string> lines;
  for (const Command& c : commands) lines.push_back(std::visit(kDescribe, c));
  return lines;
}
std::vector<std::string> Describe(const GraphSpec& spec) {
  std::vector<std::string> lines;
  for (const GraphNodeSpec& node : spec.nodes) {
    lines.push_back(std::visit(kDescribe, node.op));
    if (node.after.empty()) continue;
    absl::StrAppend(&lines.back(), " after ", absl::StrJoin(node.after, ","));
  }
  if (spec.profiled) {
    lines.push_back("profiled " + absl::StrJoin(spec.labels, ","));
  }
  return lines;
}

template <typename Request>
struct Case {
  std::string name;
  void (*build)(Request*);
  absl::StatusCode code;
  std::string reason = "";             // the refusal's token
  std::string where = "";              // in the refusal's message
  std::vector<std::string> want = {};  // for kOk: the result, described
};
template <typename Request>
void PrintTo(const Case<Request>& c, std::ostream* os) {
  *os << c.name;
}

constexpr absl::StatusCode kOk = absl::StatusCode::kOk;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kForged = absl::StatusCode::kUnauthenticated;
constexpr absl::StatusCode kForeign = absl::StatusCode::kPermissionDenied;

// A refusal starts with its token, names the case's position (never
// `other_noun`) and says how to fix it.
template <typename T, typename Request>
void Expect(const absl::StatusOr<T>& got, const Case<Request>& c,
            const std::string& other_noun) {
  if (c.code == kOk) {
    ASSERT_THAT(got, IsOk());
    EXPECT_THAT(Describe(*got), testing::ElementsAreArray(c.want));
    return;
  }
  EXPECT_THAT(
      got,
      StatusIs(c.code, AllOf(StartsWith(c.reason + ": "), HasSubstr(c.where),
                             Not(HasSubstr(other_noun)), HasSubstr("Fix: "))));
  EXPECT_EQ(ReasonToken(got.status()), c.reason);
}

// clang-format off
std::vector<Case<Batch>> CommandCases() {
  return {
      {"OverTheBatchLimit", [](Batch* b) {
         for (size_t i = 0; i <= kMaxCommandsPerSubmit; ++i) {
           b->add_commands()->mutable_record_event()->set_event(i + 1);
         }
       }, kInvalid, "batch_too_large", "4097 commands in one batch"},
      {"EveryOpInOrder", [](Batch* b) {
         AddFill(b);
         AddCopy(b);
         hrx::v1::Upload* upload = Add(b)->mutable_upload();
         SetView(upload->mutable_dst(), kBufB, 4, 3);
         upload->set_data(std::string("\0\x01z", 3));
         Add(b)->mutable_record_event()->set_event(7);
         Add(b)->mutable_wait_event()->set_event(9);
         AddDispatch(b);
         *Add(b)->mutable_launch_graph()->mutable_exec() = Sealed(kExec);
       }, kOk, "", "",
       {kFill, kCopy, "upload B@4+3 data \"\\x00\\x01z\"", "record_event 7",
        "wait_event 9", kDispatch, "launch_graph X"}},
      {"EmptyBatch", [](Batch*) {}, kOk, "", ""},
      {"FillValue255", [](Batch* b) { AddFill(b)->set_value(255); }, kOk, "",
       "", {"fill A@16+64 value 255"}},
      {"FillValue256", [](Batch* b) {
         AddCopy(b);
         AddFill(b)->set_value(256);
         AddCopy(b);
       }, kInvalid, "fill_value_out_of_range",
       "submit command 2 of 3 (fill): value 256"},
      {"FillDstWrongKind", [](Batch* b) {
         AddCopy(b);
         *AddFill(b)->mutable_dst()->mutable_buffer() = Sealed(kKernel);
         Add(b);
       }, kInvalid, "wrong_handle_kind", "submit command 2 of 3 (fill dst)"},
      {"CopySrcForged", [](Batch* b) {
         *AddCopy(b)->mutable_src()->mutable_buffer() = Forged(kBufB);
       }, kForged, "forged_handle", "submit command 1 of 1 (copy src)"},
      {"CopyDstMissing", [](Batch* b) { AddCopy(b)->clear_dst(); }, kInvalid,
       "missing_handle", "submit command 1 of 1 (copy dst)"},
      {"UploadDstOtherSession", [](Batch* b) {
         *Add(b)->mutable_upload()->mutable_dst()->mutable_buffer() =
             Sealed(kBufA, kOtherSession);
       }, kForeign, "foreign_handle", "submit command 1 of 1 (upload dst)"},
      {"DispatchKernelIsBuffer", [](Batch* b) {
         *AddDispatch(b)->mutable_kernel() = Sealed(kBufA);
       }, kInvalid, "wrong_handle_kind",
       "submit command 1 of 1 (dispatch kernel)"},
      {"DispatchGridOfTwo", [](Batch* b) {
         AddDispatch(b)->mutable_grid()->RemoveLast();
       }, kInvalid, "bad_launch_shape",
       "submit command 1 of 1 (dispatch): grid has 2 entries"},
      {"DispatchBlockOfFour", [](Batch* b) { AddDispatch(b)->add_block(1); },
       kInvalid, "bad_launch_shape",
       "submit command 1 of 1 (dispatch): block has 4 entries"},
      {"ConstantsAtCapacity", [](Batch* b) {
         AddDispatch(b)->set_constants(Constants(shared::kConstantsCapacity));
         b->mutable_commands(0)->mutable_dispatch()->clear_bindings();
       }, kOk, "", "",
       {"dispatch K grid 4,2,1 block 64,1,1 constants \"" +
        Constants(shared::kConstantsCapacity) + "\" bindings "}},
      {"ConstantsOverCapacity", [](Batch* b) {
         AddDispatch(b)->set_constants(
             Constants(shared::kConstantsCapacity + 1));
       }, kInvalid, "constants_too_large",
       "submit command 1 of 1 (dispatch): 257 bytes of constants"},
      {"DispatchBindingOtherSession", [](Batch* b) {
         *AddDispatch(b)->mutable_bindings(1)->mutable_buffer() =
             Sealed(kBufB, kOtherSession);
       }, kForeign, "foreign_handle",
       "submit command 1 of 1 (dispatch binding 1)"},
      {"LaunchGraphEarlierRun", [](Batch* b) {
         *Add(b)->mutable_launch_graph()->mutable_exec() =
             Sealed(kExec, kSession, Authority(0x9999));
       }, absl::StatusCode::kFailedPrecondition, "previous_daemon_run",
       "submit command 1 of 1 (launch_graph exec)"},
      {"LaunchGraphOfStream", [](Batch* b) {
         *Add(b)->mutable_launch_graph()->mutable_exec() = Sealed(kStream);
       }, kInvalid, "wrong_handle_kind",
       "submit command 1 of 1 (launch_graph exec)"},
      {"NoOp", [](Batch* b) {
         Add(b)->mutable_record_event()->set_event(1);
         Add(b);
       }, kInvalid, "empty_command",
       "submit command 2 of 2 has no operation set"},
  };
}

std::vector<Case<Graph>> GraphCases() {
  return {
      {"OverTheNodeLimit", [](Graph* g) {
         for (size_t i = 0; i <= kMaxGraphNodes; ++i) Add(g)->mutable_join();
       }, kInvalid, "graph_too_large", "4097 nodes, the capacity is 4096"},
      {"EveryNodeWithEdges", [](Graph* g) {
         AddFill(g);
         AddCopy(g);
         AddDispatch(g);
         Add(g)->mutable_join();
         g->mutable_nodes(1)->add_after(0);
         g->mutable_nodes(2)->add_after(0);
         for (uint32_t after : {1, 2}) g->mutable_nodes(3)->add_after(after);
         g->set_profiled(true);
         for (const char* label : {"f", "c", "d"}) g->add_labels(label);
       }, kOk, "", "",
       {kFill, std::string(kCopy) + " after 0",
        std::string(kDispatch) + " after 0", "join after 1,2",
        "profiled f,c,d"}},
      {"NoOp", [](Graph* g) {
         Add(g)->mutable_join();
         Add(g)->add_after(0);
         Add(g)->mutable_join();
       }, kInvalid, "empty_node", "graph node 2 of 3 has no operation set"},
      {"FillValue256", [](Graph* g) {
         Add(g)->mutable_join();
         AddFill(g)->set_value(256);
       }, kInvalid, "fill_value_out_of_range",
       "graph node 2 of 2 (fill): value 256"},
      {"FillDstWrongKind", [](Graph* g) {
         *AddFill(g)->mutable_dst()->mutable_buffer() = Sealed(kExec);
       }, kInvalid, "wrong_handle_kind", "graph node 1 of 1 (fill dst)"},
      {"CopySrcOtherSession", [](Graph* g) {
         *AddCopy(g)->mutable_src()->mutable_buffer() =
             Sealed(kBufB, kOtherSession);
       }, kForeign, "foreign_handle", "graph node 1 of 1 (copy src)"},
      {"DispatchGridOfTwo", [](Graph* g) {
         AddDispatch(g)->mutable_grid()->RemoveLast();
         Add(g)->mutable_join();
       }, kInvalid, "bad_launch_shape",
       "graph node 1 of 2 (dispatch): grid has 2 entries"},
      {"ConstantsOverCapacity", [](Graph* g) {
         AddDispatch(g)->set_constants(
             Constants(shared::kConstantsCapacity + 1));
       }, kInvalid, "constants_too_large",
       "graph node 1 of 1 (dispatch): 257 bytes of constants"},
      {"DispatchKernelForged", [](Graph* g) {
         *AddDispatch(g)->mutable_kernel() = Forged(kKernel);
       }, kForged, "forged_handle", "graph node 1 of 1 (dispatch kernel)"},
  };
}

// clang-format on

class CommandsTest : public testing::TestWithParam<Case<Batch>> {};
class GraphTest : public testing::TestWithParam<Case<Graph>> {};

TEST_P(CommandsTest, Decodes) {
  Batch batch;
  GetParam().build(&batch);
  Expect(Caller(Daemon(), kSession).Commands(batch.commands()), GetParam(),
         "graph node");
}

TEST_P(GraphTest, Decodes) {
  Graph request;
  GetParam().build(&request);
  Expect(Caller(Daemon(), kSession).Graph(request), GetParam(),
         "submit command");
}

constexpr auto kCaseName = [](const auto& info) { return info.param.name; };
INSTANTIATE_TEST_SUITE_P(Decode, CommandsTest,
                         testing::ValuesIn(CommandCases()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Decode, GraphTest, testing::ValuesIn(GraphCases()),
                         kCaseName);

}  // namespace
}  // namespace hrx::daemon
