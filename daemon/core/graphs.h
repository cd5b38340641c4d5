// Graphs: a recorded DAG of fills, copies, dispatches and joins, checked and
// prepared once into an exec bound to one stream, replayed by each launch
// as one queue command (Command launch_graph, or a profiled launch here).
//
// Contract: an exec owns its prepared operations and keeps the memory they
// bind (and its charge) until it is destroyed and its last launch has
// completed. A failed launch marks the exec failed until ClearFailure.
//
// Locking: takes one Session::mu at a time; profiled launches are ordered
// through the stream's gate and complete from the queue's callback.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_GRAPHS_H_
#define HRX_DAEMON_CORE_GRAPHS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/session_table.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

class Graphs {
 public:
  explicit Graphs(SessionTable& sessions) : sessions_(sessions) {}

  // Checks and prepares a recorded graph into an exec that replays on
  // `stream` only. INVALID_ARGUMENT for an empty fill or copy, unequal
  // copies, a node waiting on itself or a later node, more than
  // kMaxGraphNodes nodes, or labels that do not match the non-join nodes;
  // otherwise as a submitted command would be refused.
  absl::StatusOr<GraphExecInfo> CreateExec(uint64_t session, uint64_t stream,
                                           GraphSpec spec);
  absl::Status DestroyExec(uint64_t session, uint64_t exec);
  // What a copy of the session's tables needs of `exec` (an executor
  // serving its rings): its plan, stream and labels.
  absl::StatusOr<GraphExecEntry> Describe(uint64_t session, uint64_t exec,
                                          std::string_view what);
  // Lets an exec whose launch failed be launched again.
  absl::Status ClearFailure(uint64_t session, uint64_t exec);
  // A profiled launch, ordered after earlier work on the stream: `done` gets
  // each non-join node's device time (or the stream's deferred refusal).
  using ProfileDone =
      std::function<void(absl::StatusOr<std::vector<NodeTime>>)>;
  void LaunchProfiled(uint64_t session, uint64_t stream, uint64_t exec,
                      ProfileDone done);

 private:
  SessionTable& sessions_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_GRAPHS_H_
