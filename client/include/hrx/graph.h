// libhrx graphs, mirroring the in-process runtime's Graph and GraphExec: a
// stream records fills, copies, dispatches and joins, each after a list of
// earlier nodes; Finish turns the recording into an exec the daemon owns,
// and Stream::Launch replays the whole DAG with one command.
//
// Graphs and execs refer to their stream's shared state, not to the Stream
// object: moving the Stream keeps them working through the moved-to Stream.
// Once the stream is destroyed, a Graph refuses every call
// ("stream_destroyed") and an exec launches nowhere ("graph_wrong_stream").
//
// Threading: a Graph is recorded by one thread; a GraphExec is used from the
// thread that owns its stream.
#ifndef HRX_CLIENT_INCLUDE_HRX_GRAPH_H_
#define HRX_CLIENT_INCLUDE_HRX_GRAPH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hrx/buffer.h"
#include "hrx/kernel.h"

namespace hrx {

namespace client::internal {
class Connection;
class StreamState;
}  // namespace client::internal
}  // namespace hrx

namespace hrx::v1 {
class CreateGraphExecRequest;
class GraphNode;
}  // namespace hrx::v1

namespace hrx {

class Stream;

// At most this many nodes per graph.
inline constexpr size_t kMaxGraphNodes = 4096;

// A recorded node, branded with its graph's identity: a node of another
// graph is refused.
struct Node {
  uint64_t graph = 0;
  uint32_t index = 0;
};

struct NodeProfile {
  std::string label;
  uint64_t nanoseconds = 0;
};

// A finished graph. Move-only; destroying it releases the daemon's exec
// (queued launches keep what they use until they have run).
class GraphExec {
 public:
  GraphExec(GraphExec&&) noexcept;
  GraphExec& operator=(GraphExec&&) noexcept;
  ~GraphExec();

  // Bytes of the distinct allocations the graph binds, each counted once.
  uint64_t binding_bytes() const { return binding_bytes_; }
  size_t node_count() const { return nodes_; }
  bool profiled() const { return profiled_; }
  // After a failed launch, launches are refused until this is called.
  absl::Status ClearFailure();

 private:
  friend class Graph;
  friend class Stream;
  GraphExec(std::shared_ptr<client::internal::Connection> connection,
            Handle handle, std::weak_ptr<client::internal::StreamState> stream,
            uint64_t binding_bytes, size_t nodes, bool profiled)
      : connection_(std::move(connection)),
        handle_(handle),
        stream_(std::move(stream)),
        binding_bytes_(binding_bytes),
        nodes_(nodes),
        profiled_(profiled) {}
  void Release();
  // OK when `state` is the live stream that recorded this exec; `what`
  // names the launch in the refusal.
  absl::Status CheckStream(const client::internal::StreamState* state,
                           const char* what) const;

  std::shared_ptr<client::internal::Connection> connection_;
  Handle handle_;
  // The recording stream. Weak, and compared only while locked, so that a
  // later stream's state reusing a destroyed one's address never matches.
  std::weak_ptr<client::internal::StreamState> stream_;
  uint64_t binding_bytes_ = 0;
  size_t nodes_ = 0;
  bool profiled_ = false;
};

class Graph {
 public:
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();

  // Each records a node that runs after every node in `after`.
  // INVALID_ARGUMENT for an empty fill, unequal or empty copies, a node of
  // another graph ("foreign_node"), or past kMaxGraphNodes ("graph_full").
  // Every call, Finish included, is FAILED_PRECONDITION ("stream_destroyed")
  // once the stream that began the graph is destroyed, and ("moved_graph")
  // on a Graph moved from.
  absl::StatusOr<Node> Fill(std::span<const Node> after, const View& dst,
                            uint8_t value);
  absl::StatusOr<Node> Copy(std::span<const Node> after, const View& dst,
                            const View& src);
  absl::StatusOr<Node> Dispatch(std::span<const Node> after,
                                const Kernel& kernel,
                                std::array<uint32_t, 3> grid,
                                std::array<uint32_t, 3> block,
                                const Constants& constants,
                                std::span<const View> bindings);
  // Orders its successors after `after`; runs nothing.
  absl::StatusOr<Node> Join(std::span<const Node> after);

  // The daemon checks every node and prepares the exec; one message.
  absl::StatusOr<GraphExec> Finish();
  // As Finish, for Stream::LaunchProfiled: one label per non-join node.
  absl::StatusOr<GraphExec> FinishProfiled(std::span<const std::string> labels);

  uint64_t id() const { return id_; }
  size_t size() const;

 private:
  friend class Stream;
  Graph(std::weak_ptr<client::internal::StreamState> stream, uint64_t id);
  // The stream's state, held for the duration of one call; a refusal when
  // the stream was destroyed or this Graph was moved from.
  absl::StatusOr<std::shared_ptr<client::internal::StreamState>> LockStream(
      const char* what) const;
  // Adds `node` (its op set) after `after`, checking the predecessors.
  absl::StatusOr<Node> Record(std::span<const Node> after,
                              hrx::v1::GraphNode node);
  absl::StatusOr<GraphExec> FinishWith(bool profiled,
                                       std::span<const std::string> labels);

  // Weak: a Graph must not keep a destroyed Stream's call open, and the
  // state does not move when the Stream does.
  std::weak_ptr<client::internal::StreamState> stream_;
  uint64_t id_;
  std::unique_ptr<hrx::v1::CreateGraphExecRequest> request_;
  size_t runnable_ = 0;  // non-join nodes
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_GRAPH_H_
