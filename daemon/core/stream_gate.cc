#include "daemon/core/stream_gate.h"

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::daemon {

absl::Status SessionClosed() {
  return Refusal(Reason::kSessionClosed,
                 "the stream's session closed (its client ended, or an admin "
                 "evicted it) before this operation ran. Fix: open a new "
                 "session.");
}

void RunInOrder(StreamEntry& stream, GatedOp op, Deferred& after) {
  if (stream.closed) return op(SessionClosed(), after);
  if (!stream.suspended && stream.parked.empty()) {
    return op(absl::OkStatus(), after);
  }
  if (stream.parked.size() >= kMaxParkedOps) {
    return op(
        Refusal(Reason::kStreamBusy,
                absl::StrFormat(
                    "%u operations already wait behind a batch "
                    "suspended at the staging or backlog bound (the limit is "
                    "%u). Fix: wait for earlier calls on the stream "
                    "before sending more.",
                    stream.parked.size(), kMaxParkedOps)),
        after);
  }
  stream.parked.push_back(std::move(op));
}

void RunParked(StreamEntry& stream, Deferred& after) {
  while (!stream.suspended && !stream.parked.empty()) {
    GatedOp op = std::move(stream.parked.front());
    stream.parked.pop_front();
    op(stream.closed ? SessionClosed() : absl::OkStatus(), after);
  }
}

void CloseStream(StreamEntry& stream, Deferred& after) {
  stream.closed = true;
  while (!stream.parked.empty()) {
    GatedOp op = std::move(stream.parked.front());
    stream.parked.pop_front();
    op(SessionClosed(), after);
  }
}

void DeferRefusal(StreamEntry& stream, absl::Status refusal) {
  if (stream.deferred_refusal.ok())
    stream.deferred_refusal = std::move(refusal);
}

bool ReportedAtSyncPoint(StreamEntry& stream, const absl::Status& cancelled,
                         const DoneCallback& done, Deferred& after) {
  if (!cancelled.ok()) {
    Report(after, done, cancelled);
    return true;
  }
  if (stream.deferred_refusal.ok()) return false;
  Report(after, done, TakeDeferredRefusal(stream));
  return true;
}

absl::Status TakeDeferredRefusal(StreamEntry& stream) {
  return std::exchange(stream.deferred_refusal, absl::OkStatus());
}

void ReclaimStaging(Session& session, StreamEntry& stream) {
  for (backend::MemoryRef& evicted :
       stream.staging.Reclaim(stream.queue->completed())) {
    session.staging_pool.Give(std::move(evicted), StagingUsage::kUpload);
  }
}

void CompleteAtPublished(std::shared_ptr<Session> session,
                         std::shared_ptr<StreamEntry> stream, DoneCallback done,
                         Deferred& after) {
  const backend::Fence fence = stream->published;
  after.push_back([session = std::move(session), stream = std::move(stream),
                   fence, done = std::move(done)] {
    stream->queue->OnComplete(fence,
                              [session, stream, done](absl::Status status) {
                                {
                                  absl::MutexLock lock(&session->mu);
                                  ReclaimStaging(*session, *stream);
                                }
                                done(status);
                              });
  });
}

void RunDeferred(Deferred& after) {
  for (auto& step : after) step();
  after.clear();
}

}  // namespace hrx::daemon
