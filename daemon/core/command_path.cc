#include "daemon/core/command_path.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/core/planner.h"
#include "shared/bytes.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

absl::StatusOr<StreamInfo> CommandPath::CreateStream(uint64_t session) {
  return CreateStreamAt(session, /*handle=*/0, /*stream_id=*/0);
}

absl::StatusOr<StreamInfo> CommandPath::CreateStreamAt(uint64_t session,
                                                       uint64_t handle,
                                                       uint64_t stream_id) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "create stream"));
  HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                       owner->tenant->Reserve(Resource::kStreams, 1,
                                              "create stream", owner->Who()));
  HRX_ASSIGN_OR_RETURN(QueueAssignment assignment,
                       queues_.Assign(*owner->tenant));
  auto entry = std::make_shared<StreamEntry>(
      stream_id != 0 ? stream_id : next_stream_id_.fetch_add(1),
      assignment.index, assignment.queue);
  entry->charge = std::move(charge);
  const uint64_t id = entry->id;
  absl::MutexLock lock(&owner->mu);
  if (handle == 0) {
    handle = owner->streams.Insert(std::move(entry));
  } else {
    HRX_RETURN_IF_ERROR(owner->streams.InsertAt(handle, std::move(entry)));
  }
  return StreamInfo{handle, assignment.index, id};
}

void CommandPath::DestroyStream(uint64_t session, uint64_t stream,
                                DoneCallback done) {
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<StreamEntry> removed;
  Deferred after;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto entry = (*owner)->streams.Remove(stream, "destroy stream");
    if (!entry.ok()) return done(entry.status());
    removed = *std::move(entry);
    // After whatever is suspended or parked on it (the handle is gone, so
    // nothing new can join).
    RunInOrder(
        *removed,
        [removed, done = std::move(done)](absl::Status, Deferred& after) {
          const backend::Fence fence = removed->published;
          after.push_back([removed, fence, done] {
            removed->queue->OnComplete(fence, done);
          });
        },
        after);
  }
  RunDeferred(after);
}

void CommandPath::DeferRefusal(uint64_t session, uint64_t stream,
                               absl::Status refusal) {
  // A closed session or destroyed stream has no sync point left: later
  // calls naming it are refused as stale on their own.
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return;
  Deferred after;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto found = (*owner)->streams.Find(stream, "defer refusal");
    if (!found.ok()) return;
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrder(
        *target,
        [target, refusal = std::move(refusal)](absl::Status cancelled,
                                               Deferred&) {
          // Too much parked to take its turn: kept now rather than lost (it
          // is reported no later than it would have been).
          if (cancelled.ok() || ReasonOf(cancelled) == Reason::kStreamBusy) {
            hrx::daemon::DeferRefusal(*target, refusal);
          }
        },
        after);
  }
  RunDeferred(after);
}

void CommandPath::Synchronize(uint64_t session, uint64_t stream,
                              DoneCallback done) {
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<Session> keep = *owner;
  Deferred after;
  {
    absl::MutexLock lock(&keep->mu);
    auto found = keep->streams.Find(stream, "synchronize stream");
    if (!found.ok()) return done(found.status());
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrder(
        *target,
        [keep, target, done = std::move(done)](absl::Status cancelled,
                                               Deferred& after) {
          if (ReportedAtSyncPoint(*target, cancelled, done, after)) return;
          CompleteAtPublished(keep, target, done, after);
        },
        after);
  }
  RunDeferred(after);
}

absl::StatusOr<ChargeRef> CommandPath::ReserveReplyBytes(uint64_t session,
                                                         uint64_t bytes) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  return owner->tenant->Reserve(
      Resource::kReplyBytes, std::min(bytes, kMaxInlineReadBytes),
      absl::StrFormat("read %s", shared::FormatBytes(bytes)), owner->Who());
}

absl::StatusOr<ChargeRef> CommandPath::ReserveSharedBytes(
    uint64_t session, uint64_t bytes, std::string_view what) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, what));
  return owner->tenant->Reserve(Resource::kSharedBytes, bytes, what,
                                owner->Who());
}

void CommandPath::Read(uint64_t session, uint64_t stream, const ViewRef& src,
                       std::string* out, DoneCallback done) {
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<Session> keep = *owner;
  Deferred after;
  {
    absl::MutexLock lock(&keep->mu);
    auto found = keep->streams.Find(stream, "read stream");
    if (!found.ok()) return done(found.status());
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrder(
        *target,
        [keep, target, src, out, done = std::move(done)](absl::Status cancelled,
                                                         Deferred& after) {
          keep->mu.AssertHeld();  // gated operations run locked
          if (ReportedAtSyncPoint(*target, cancelled, done, after)) return;
          auto view = planner::Resolve(*keep, src, "read src");
          if (!view.ok()) return Report(after, done, view.status());
          if (view->length > kMaxInlineReadBytes) {
            return Report(
                after, done,
                Refusal(
                    Reason::kReadTooLarge,
                    absl::StrFormat(
                        "read src: %s (%u bytes) in one reply, "
                        "the limit is %s. Fix: read in chunks of at most %u "
                        "bytes.",
                        shared::FormatBytes(view->length), view->length,
                        shared::FormatBytes(kMaxInlineReadBytes),
                        kMaxInlineReadBytes)));
          }
          out->resize(view->length);
          if (view->length != 0) {
            auto read = target->queue->EnqueueRead(view->memory, view->offset,
                                                   view->length, out->data());
            if (!read.ok()) return Report(after, done, read.status());
            target->published = *read;
          }
          CompleteAtPublished(keep, target, done, after);
        },
        after);
  }
  RunDeferred(after);
}

absl::StatusOr<bool> CommandPath::Poll(uint64_t session, uint64_t stream) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * target,
                       owner->streams.Find(stream, "poll stream"));
  StreamEntry& entry = **target;
  if (absl::Status deferred = TakeDeferredRefusal(entry); !deferred.ok()) {
    return deferred;
  }
  // A suspended batch, or work parked behind it, is not even enqueued yet.
  const bool complete = !entry.suspended && entry.parked.empty() &&
                        entry.queue->completed() >= entry.published;
  if (complete) ReclaimStaging(*owner, entry);
  return complete;
}

absl::StatusOr<StreamStats> CommandPath::GetStreamStats(uint64_t session,
                                                        uint64_t stream) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * target,
                       owner->streams.Find(stream, "stream stats"));
  const StreamEntry& entry = **target;
  StreamStats stats;
  stats.queue = entry.queue_index;
  stats.published_fence = entry.published;
  stats.completed_fence = entry.queue->completed();
  stats.pending_staging_ids = entry.staging.pending_ids();
  stats.pending_staging_bytes = entry.staging.pending_bytes();
  stats.completed_staging_ids = entry.staging.completed_ids();
  stats.upload_staging = entry.staging.stats();
  stats.dispatch_cache = entry.dispatch_cache.stats();
  stats.transfer_cache = entry.transfer_cache.stats();
  return stats;
}

absl::StatusOr<QueueLease> CommandPath::StreamQueue(uint64_t session,
                                                    uint64_t stream) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * target,
                       owner->streams.Find(stream, "stream queue"));
  return (*target)->queue;
}

}  // namespace hrx::daemon
