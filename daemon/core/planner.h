// Phase 1 of the command path, shared by Submit and graph preparation:
// checks commands against a session's live objects and prepares them into
// the backend's own operations (a fill stays a fill from decode to queue).
//
// Contract: Add either prepares the command as the next step of the plan or
// refuses it, naming its position ("submit command 3 of 8 (copy src)",
// "graph node 2 of 5 (fill dst)"); a refusal leaves no step. Cache misses
// are inserted as they are prepared (a later refusal in the batch leaves
// valid entries behind).
//
// Locking: every call needs the session's lock (Session::mu).
#ifndef HRX_DAEMON_CORE_PLANNER_H_
#define HRX_DAEMON_CORE_PLANNER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/core/session.h"
#include "daemon/core/types.h"

namespace hrx::daemon::planner {

struct PreparedUpload {
  backend::MemoryRef dst;
  uint64_t offset = 0;
  std::string data;
};
struct PreparedRecord {
  uint64_t event = 0;
};
struct PreparedWait {
  // Null: the same queue, already ordered.
  std::shared_ptr<backend::Queue> queue;
  backend::Fence fence = 0;
};
struct PreparedLaunch {
  backend::GraphRef plan;
  std::shared_ptr<std::atomic<bool>> failed;
};
using Prepared = std::variant<backend::FillOp, backend::CopyOp, PreparedUpload,
                              PreparedRecord, PreparedWait,
                              backend::DispatchRef, PreparedLaunch>;

// Everything phase 1 produces.
struct Plan {
  std::vector<Prepared> steps;
  std::vector<uint64_t> recorded_events;
  std::vector<ChargeRef> event_charges;  // one per recorded event
};

struct ResolvedView {
  backend::MemoryRef memory;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t origin_stream = 0;
};

// The buffer and span `view` names in `session`, checked against the
// buffer's size. `what` names the use in refusals.
absl::StatusOr<ResolvedView> Resolve(Session& session, const ViewRef& view,
                                     std::string_view what)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);

// FAILED_PRECONDITION "graph_wrong_stream" unless `exec` was prepared for
// `stream`, "graph_failed" while an earlier launch's failure is not cleared.
absl::Status CheckLaunchable(const GraphExecEntry& exec,
                             const StreamEntry& stream, std::string_view what);

class Planner {
 public:
  // `noun` names commands in refusals ("submit command", "graph node");
  // without `use_caches` the stream's command caches are neither read nor
  // filled (graph nodes are prepared once and owned by their exec).
  Planner(Session& session, StreamEntry& stream, size_t count,
          std::string noun = "submit command", bool use_caches = true)
      : session_(session),
        stream_(stream),
        count_(count),
        noun_(std::move(noun)),
        use_caches_(use_caches) {}

  // Tells the analysis (and checks at run time) that the caller holds the
  // session's lock, which it took under another name before planning.
  void AssertSessionLocked() const ABSL_ASSERT_EXCLUSIVE_LOCK(session_.mu) {
    session_.mu.AssertHeld();
  }

  // Prepares command `i` (of `count`) as the plan's next step.
  absl::Status Add(size_t i, Command& command)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, FillCommand& fill)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, CopyCommand& copy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, UploadCommand& upload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, RecordEventCommand& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, WaitEventCommand& wait)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, DispatchCommand& dispatch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);
  absl::Status Add(size_t i, LaunchGraphCommand& launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu);

  Plan Take() { return std::move(plan_); }

 private:
  // "submit command 2 of 5 (copy src)".
  std::string Label(size_t i, std::string_view op,
                    std::string_view part = "") const;

  Session& session_;
  StreamEntry& stream_;
  const size_t count_;
  const std::string noun_;
  const bool use_caches_;
  std::set<uint64_t> batch_events_;
  Plan plan_;
};

}  // namespace hrx::daemon::planner

#endif  // HRX_DAEMON_CORE_PLANNER_H_
