// The ordered-operation gate of a stream, and the stream's sync points.
//
// Operations ordered on a stream (submits, syncs, reads, profiled launches,
// its destruction, a deferred refusal) run in arrival order. Normally they
// run at once; while a batch is suspended at the staging or backlog bound
// (command_path.h) they park
// behind it (at most kMaxParkedOps) and run when it resumes. Nothing here
// waits: work that must happen after a lock is released (completions may
// run inline, and may take the session's lock) is added to a Deferred list
// that the caller runs once it has unlocked.
//
// Every function needs the owning session's lock, except RunDeferred, which
// must be called without it.
#ifndef HRX_DAEMON_CORE_STREAM_GATE_H_
#define HRX_DAEMON_CORE_STREAM_GATE_H_

#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "daemon/core/session.h"

namespace hrx::daemon {

using DoneCallback = std::function<void(absl::Status)>;

// CANCELLED "session_closed": what work on a closed session's stream gets.
absl::Status SessionClosed();

// Runs `op` now, or parks it behind the suspended batch (or refuses it with
// RESOURCE_EXHAUSTED "stream_busy" past kMaxParkedOps; with "session_closed"
// once the stream's session closed).
void RunInOrder(StreamEntry& stream, GatedOp op, Deferred& after);
// Runs parked operations while the stream is not suspended.
void RunParked(StreamEntry& stream, Deferred& after);
// The stream's session closed: parked operations are cancelled, and a
// suspended batch stops where it is when it resumes.
void CloseStream(StreamEntry& stream, Deferred& after);

// Keeps `refusal` for the stream's next sync point, unless one is kept
// already (the first refusal is the one reported).
void DeferRefusal(StreamEntry& stream, absl::Status refusal);
// A sync point opens by reporting `cancelled`, or else the stream's deferred
// refusal (and clearing it). True when it reported one through `done`.
bool ReportedAtSyncPoint(StreamEntry& stream, const absl::Status& cancelled,
                         const DoneCallback& done, Deferred& after);
// Takes the stream's deferred refusal (OK when none), for sync points that
// answer without a callback (Poll).
absl::Status TakeDeferredRefusal(StreamEntry& stream);

// Moves completed upload staging of `stream` into the session's pools.
void ReclaimStaging(Session& session, StreamEntry& stream)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
// Adds to `after`: once everything published on `stream` so far has
// completed, reclaim its staging, then `done` (a sync point's end).
void CompleteAtPublished(std::shared_ptr<Session> session,
                         std::shared_ptr<StreamEntry> stream, DoneCallback done,
                         Deferred& after);

// Runs and clears `after`. Call without the session's lock.
void RunDeferred(Deferred& after);

// Adds `done(result)` to `after`.
template <typename Done, typename Result>
void Report(Deferred& after, Done done, Result result) {
  after.push_back(
      [done = std::move(done), result = std::move(result)]() { done(result); });
}

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_STREAM_GATE_H_
