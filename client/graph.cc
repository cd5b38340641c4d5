#include "hrx/graph.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "client/internal/stream_state.h"
#include "hrx/stream.h"
#include "hrx/v1/graph.grpc.pb.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx {
namespace {

uint64_t NextGraphId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

Graph::Graph(std::weak_ptr<client::internal::StreamState> stream, uint64_t id)
    : stream_(std::move(stream)),
      id_(id),
      request_(std::make_unique<hrx::v1::CreateGraphExecRequest>()) {}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
Graph::~Graph() = default;

size_t Graph::size() const {
  return request_ == nullptr ? 0 : request_->nodes_size();
}

absl::StatusOr<std::shared_ptr<client::internal::StreamState>>
Graph::LockStream(const char* what) const {
  if (request_ == nullptr) {
    return Refusal(
        Reason::kMovedGraph,
        absl::StrFormat(
            "%s: this Graph was moved from. Fix: use the one it was moved to.",
            what));
  }
  std::shared_ptr<client::internal::StreamState> state = stream_.lock();
  if (state == nullptr) {
    return Refusal(
        Reason::kStreamDestroyed,
        absl::StrFormat(
            "%s: graph %u was begun on a stream that has since been destroyed. "
            "Fix: keep that Stream, or the Stream it was moved to, alive until "
            "the graph is finished, or record the graph on a live stream.",
            what, id_));
  }
  return state;
}

absl::StatusOr<Node> Graph::Record(std::span<const Node> after,
                                   hrx::v1::GraphNode node) {
  const size_t index = request_->nodes_size();
  if (index >= kMaxGraphNodes) {
    return Refusal(
        Reason::kGraphFull,
        absl::StrFormat("record: the graph holds %u nodes, its capacity. Fix: "
                        "split the work into several graphs.",
                        kMaxGraphNodes));
  }
  for (const Node& before : after) {
    if (before.graph != id_ || before.index >= index) {
      return Refusal(
          Reason::kForeignNode,
          absl::StrFormat(
              "record: node %u of graph %u is not a node of this "
              "graph (%u, %u nodes so far). Fix: wait only on nodes this graph "
              "returned.",
              before.index, before.graph, id_, index));
    }
    node.add_after(before.index);
  }
  if (node.op_case() != hrx::v1::GraphNode::kJoin) ++runnable_;
  *request_->add_nodes() = std::move(node);
  return Node{id_, static_cast<uint32_t>(index)};
}

absl::StatusOr<Node> Graph::Fill(std::span<const Node> after, const View& dst,
                                 uint8_t value) {
  HRX_ASSIGN_OR_RETURN(auto state, LockStream("record fill"));
  HRX_RETURN_IF_ERROR(
      Stream::CheckOwned(state->connection().brand(), dst, "graph fill dst"));
  if (dst.empty()) {
    return Refusal(Reason::kBadGraphNode,
                   "record fill: the view is empty. Fix: record fills of "
                   "at least one byte.");
  }
  hrx::v1::GraphNode node;
  client::internal::ToProto(dst, node.mutable_fill()->mutable_dst());
  node.mutable_fill()->set_value(value);
  return Record(after, std::move(node));
}

absl::StatusOr<Node> Graph::Copy(std::span<const Node> after, const View& dst,
                                 const View& src) {
  HRX_ASSIGN_OR_RETURN(auto state, LockStream("record copy"));
  const uint64_t brand = state->connection().brand();
  HRX_RETURN_IF_ERROR(Stream::CheckOwned(brand, dst, "graph copy dst"));
  HRX_RETURN_IF_ERROR(Stream::CheckOwned(brand, src, "graph copy src"));
  if (dst.empty() || dst.length() != src.length()) {
    return Refusal(
        Reason::kBadGraphNode,
        absl::StrFormat("record copy: the views are %u and %u bytes. Fix: "
                        "record copies between equal, nonempty views.",
                        dst.length(), src.length()));
  }
  if (dst.buffer_handle() == src.buffer_handle() &&
      shared::SpansOverlap(dst.offset(), src.offset(), dst.length())) {
    return Refusal(Reason::kCopyOverlap,
                   "record copy: the views overlap in one buffer. Fix: "
                   "copy through a temporary buffer.");
  }
  hrx::v1::GraphNode node;
  client::internal::ToProto(dst, node.mutable_copy()->mutable_dst());
  client::internal::ToProto(src, node.mutable_copy()->mutable_src());
  return Record(after, std::move(node));
}

absl::StatusOr<Node> Graph::Dispatch(std::span<const Node> after,
                                     const Kernel& kernel,
                                     std::array<uint32_t, 3> grid,
                                     std::array<uint32_t, 3> block,
                                     const Constants& constants,
                                     std::span<const View> bindings) {
  HRX_ASSIGN_OR_RETURN(auto state, LockStream("record dispatch"));
  hrx::v1::GraphNode node;
  HRX_RETURN_IF_ERROR(
      Stream::EncodeDispatch(state->connection().brand(), kernel, grid, block,
                             constants, bindings, node.mutable_dispatch()));
  return Record(after, std::move(node));
}

absl::StatusOr<Node> Graph::Join(std::span<const Node> after) {
  // Joins touch no stream, but a graph that can never be finished should
  // say so at once rather than at Finish.
  HRX_RETURN_IF_ERROR(LockStream("record join").status());
  hrx::v1::GraphNode node;
  node.mutable_join();
  return Record(after, std::move(node));
}

absl::StatusOr<GraphExec> Graph::Finish() { return FinishWith(false, {}); }

absl::StatusOr<GraphExec> Graph::FinishProfiled(
    std::span<const std::string> labels) {
  HRX_RETURN_IF_ERROR(LockStream("finish profiled graph").status());
  if (labels.size() != runnable_) {
    return Refusal(
        Reason::kLabelMismatch,
        absl::StrFormat(
            "finish profiled graph: %u labels for %u non-join "
            "nodes. Fix: give one label per fill, copy and dispatch, in order.",
            labels.size(), runnable_));
  }
  return FinishWith(true, labels);
}

absl::StatusOr<GraphExec> Graph::FinishWith(
    bool profiled, std::span<const std::string> labels) {
  // Held through CreateExec, so the stream outlives the call that names it.
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<client::internal::StreamState> state,
                       LockStream("finish graph"));
  client::internal::Connection& connection = state->connection();
  client::internal::ToProto(state->handle(), request_->mutable_stream());
  request_->set_profiled(profiled);
  for (const std::string& label : labels) request_->add_labels(label);
  // Commands already issued on any stream go first, so the buffers and
  // kernels the graph names exist in the daemon.
  HRX_RETURN_IF_ERROR(connection.FlushAll());
  auto context = connection.Context();
  hrx::v1::CreateGraphExecResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.graphs().CreateExec(context.get(), *request_, &response)));
  return GraphExec(state->shared_connection(),
                   client::internal::FromProto(response.exec()), state,
                   response.binding_bytes(), request_->nodes_size(), profiled);
}

GraphExec::GraphExec(GraphExec&& other) noexcept
    : connection_(std::move(other.connection_)),
      handle_(std::exchange(other.handle_, Handle{})),
      stream_(std::move(other.stream_)),
      binding_bytes_(other.binding_bytes_),
      nodes_(other.nodes_),
      profiled_(other.profiled_) {}

GraphExec& GraphExec::operator=(GraphExec&& other) noexcept {
  if (this != &other) {
    Release();
    connection_ = std::move(other.connection_);
    handle_ = std::exchange(other.handle_, Handle{});
    stream_ = std::move(other.stream_);
    binding_bytes_ = other.binding_bytes_;
    nodes_ = other.nodes_;
    profiled_ = other.profiled_;
  }
  return *this;
}

GraphExec::~GraphExec() { Release(); }

void GraphExec::Release() {
  std::shared_ptr<client::internal::Connection> connection =
      std::move(connection_);
  if (connection == nullptr) return;
  (void)connection->FlushAll();  // launches already issued go first
  auto context = connection->Context();
  hrx::v1::GraphExecRequest request;
  client::internal::ToProto(handle_, request.mutable_exec());
  hrx::v1::GraphExecResponse response;
  (void)connection->graphs().DestroyExec(context.get(), request, &response);
}

absl::Status GraphExec::ClearFailure() {
  if (connection_ == nullptr) {
    return Refusal(Reason::kMovedGraph,
                   "this GraphExec was moved from. Fix: use the one it was "
                   "moved to.");
  }
  auto context = connection_->Context();
  hrx::v1::GraphExecRequest request;
  client::internal::ToProto(handle_, request.mutable_exec());
  hrx::v1::GraphExecResponse response;
  return connection_->Check(
      connection_->graphs().ClearFailure(context.get(), request, &response));
}

absl::Status GraphExec::CheckStream(const client::internal::StreamState* state,
                                    const char* what) const {
  if (connection_ == nullptr) {
    return Refusal(Reason::kMovedGraph,
                   absl::StrFormat("%s: this GraphExec was moved from. Fix: "
                                   "use the one it was moved to.",
                                   what));
  }
  const std::shared_ptr<client::internal::StreamState> recorder =
      stream_.lock();
  if (recorder == nullptr) {
    return Refusal(
        Reason::kGraphWrongStream,
        absl::StrFormat(
            "%s: the stream that recorded the graph has been destroyed, and an "
            "exec replays only on its own stream. Fix: record and finish the "
            "graph again on this stream.",
            what));
  }
  if (recorder.get() != state) {
    return Refusal(
        Reason::kGraphWrongStream,
        absl::StrFormat(
            "%s: the graph was recorded on another stream and replays only "
            "there. Fix: launch it on the stream that recorded it.",
            what));
  }
  return absl::OkStatus();
}

Graph Stream::BeginGraph() { return Graph(state_, NextGraphId()); }

absl::Status Stream::Launch(const GraphExec& exec) {
  HRX_RETURN_IF_ERROR(exec.CheckStream(state_.get(), "launch"));
  hrx::v1::Command command;
  client::internal::ToProto(exec.handle_,
                            command.mutable_launch_graph()->mutable_exec());
  return state_->Append(std::move(command), 0);
}

absl::StatusOr<std::vector<NodeProfile>> Stream::LaunchProfiled(
    const GraphExec& exec, absl::Time deadline) {
  HRX_RETURN_IF_ERROR(exec.CheckStream(state_.get(), "launch profiled"));
  HRX_ASSIGN_OR_RETURN(
      hrx::v1::Profile profile,
      state_->LaunchProfiled(exec.handle_,
                             state_->connection().Resolve(deadline)));
  std::vector<NodeProfile> nodes;
  for (const hrx::v1::ProfiledNode& node : profile.nodes()) {
    nodes.push_back({node.label(), node.nanoseconds()});
  }
  return nodes;
}

}  // namespace hrx
