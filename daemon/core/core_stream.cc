// Core's ordered command path: Submit's two phases (check everything, then
// enqueue), upload staging, the command caches, and the synchronisation
// points that report deferred refusals and reclaim staging.
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/core.h"
#include "shared/launch_check.h"
#include "daemon/core/planner.h"
#include "daemon/core/session.h"
#include "shared/bytes.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
using planner::Plan;
using planner::Planner;
using planner::Prepared;
using planner::PreparedRecord;
using planner::PreparedUpload;
using planner::PreparedWait;
using backend::DispatchRef;
using backend::Fence;
using backend::MemoryRef;

void Core::ReclaimStaging(Session& session, StreamEntry& stream) {
  for (MemoryRef& evicted : stream.staging.Reclaim(stream.queue->completed())) {
    session.staging_pool.Give(std::move(evicted), StagingUsage::kUpload);
  }
}

absl::StatusOr<size_t> Core::Submit(uint64_t session, uint64_t stream,
                                    std::vector<Command> commands,
                                    SubmitErrors errors) {
  if (commands.size() > kMaxCommandsPerSubmit) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch_too_large: submit: %u commands in one batch, the limit is %u. "
        "Fix: split the batch.",
        commands.size(), kMaxCommandsPerSubmit));
  }
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  Session& s = *owner;
  if (s.tenant->role() == hrx::v1::ROLE_OBSERVER) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "observer_read_only: submit: tenant \"%s\" (%s) has the observer "
        "role, which may only inspect. Fix: run the client as a uid of a "
        "client tenant.",
        s.tenant->name(), s.Who()));
  }
  // Commands in flight are charged until the batch's last fence completes.
  HRX_ASSIGN_OR_RETURN(
      ChargeRef inflight,
      s.tenant->Reserve(Resource::kInflightCommands, commands.size(),
                        absl::StrFormat("submit %u commands", commands.size()),
                        s.Who()));
  s.mu.Lock();
  auto found = s.streams.Find(stream, "submit stream");
  if (!found.ok()) {
    s.mu.Unlock();
    return found.status();
  }
  std::shared_ptr<StreamEntry> target = **found;

  // Phase 1: check everything; nothing is enqueued unless all of it is valid.
  Planner planner(s, *target, commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::Status added = planner.Add(i, commands[i]);
    if (!added.ok()) {
      if (errors == SubmitErrors::kReturn) {
        s.mu.Unlock();
        return added;
      }
      if (target->deferred_error.ok()) target->deferred_error = added;
      s.mu.Unlock();
      return size_t{0};
    }
  }
  Plan plan = planner.Take();
  // Reserve the recorded ids now; the fences are filled in as enqueued.
  for (uint64_t event : plan.recorded_events) s.events[event] = EventEntry{};

  // Phase 2: enqueue in order. Empty ranges are valid no-ops.
  backend::Queue& queue = *target->queue;
  absl::Status enqueued;
  for (Prepared& step : plan.steps) {
    absl::StatusOr<Fence> fence = target->published;
    if (auto* transfer = std::get_if<PreparedTransfer>(&step)) {
      if (transfer->length == 0) continue;
      fence = transfer->src == nullptr
                  ? queue.EnqueueFill(transfer->dst, transfer->dst_offset,
                                      transfer->length, transfer->value)
                  : queue.EnqueueCopy(transfer->dst, transfer->dst_offset,
                                      transfer->src, transfer->src_offset,
                                      transfer->length);
    } else if (auto* upload = std::get_if<PreparedUpload>(&step)) {
      const uint64_t size = upload->data.size();
      if (size == 0) continue;
      // Bounded staging: past the bounds, this stream's earlier work
      // completes first (without holding the session's lock).
      while (target->staging.NeedsDrain(size)) {
        const Fence drain_to = target->published;
        s.mu.Unlock();
        (void)queue.Wait(drain_to);
        s.mu.Lock();
        ReclaimStaging(s, *target);
        if (target->staging.pending_count() == 0) break;
      }
      MemoryRef staging = target->staging.TakeFitting(size);
      if (staging == nullptr) staging = s.staging_pool.Take(size, StagingUsage::kUpload);
      if (staging == nullptr) {
        auto fresh = backend_->Allocate(size, backend::MemoryKind::kHostCoherent,
                                        false);
        if (!fresh.ok()) {
          enqueued = fresh.status();
          break;
        }
        staging = *std::move(fresh);
      }
      std::memcpy(staging->host_address(), upload->data.data(), size);
      fence = queue.EnqueueCopy(upload->dst, upload->offset, staging, 0, size);
      if (fence.ok()) target->staging.AddPending(std::move(staging), *fence);
    } else if (auto* record = std::get_if<PreparedRecord>(&step)) {
      s.events[record->event] = EventEntry{&queue, target->published};
      continue;
    } else if (auto* wait = std::get_if<PreparedWait>(&step)) {
      if (wait->queue == nullptr || wait->queue->completed() >= wait->fence) {
        continue;
      }
      fence = queue.EnqueueWaitFor(*wait->queue, wait->fence);
    } else if (auto* launch = std::get_if<planner::PreparedLaunch>(&step)) {
      fence = queue.EnqueueGraph(launch->plan, nullptr);
      if (fence.ok()) {
        // Runs without locks (possibly inline): it only sets a flag.
        queue.OnComplete(*fence, [failed = launch->failed](absl::Status s) {
          if (!s.ok()) failed->store(true);
        });
      }
    } else {
      fence = queue.EnqueueDispatch(std::get<DispatchRef>(step));
    }
    if (!fence.ok()) {
      enqueued = fence.status();
      break;
    }
    target->published = *fence;
  }
  if (!enqueued.ok()) {
    // A backend refusing work is a device failure; events not yet published
    // are dropped so nobody waits on them.
    for (uint64_t event : plan.recorded_events) {
      auto it = s.events.find(event);
      if (it != s.events.end() && it->second.queue == nullptr) s.events.erase(it);
    }
    s.mu.Unlock();
    return enqueued;
  }
  s.commands_submitted += commands.size();
  const Fence last = target->published;
  s.mu.Unlock();
  queue.OnComplete(last, [inflight = std::move(inflight)](absl::Status) {});
  return commands.size();
}

void Core::Synchronize(uint64_t session, uint64_t stream, DoneCallback done) {
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<StreamEntry> target;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto found = (*owner)->streams.Find(stream, "synchronize stream");
    if (!found.ok()) return done(found.status());
    target = **found;
    if (!target->deferred_error.ok()) {
      return done(std::exchange(target->deferred_error, absl::OkStatus()));
    }
  }
  std::shared_ptr<Session> keep = *owner;
  target->queue->OnComplete(
      target->published,
      [keep, target, done = std::move(done)](absl::Status status) {
        {
          absl::MutexLock lock(&keep->mu);
          ReclaimStaging(*keep, *target);
        }
        done(status);
      });
}

void Core::Read(uint64_t session, uint64_t stream, const ViewRef& src,
                std::string* out, DoneCallback done) {
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<StreamEntry> target;
  Fence fence = 0;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto found = (*owner)->streams.Find(stream, "read stream");
    if (!found.ok()) return done(found.status());
    target = **found;
    if (!target->deferred_error.ok()) {
      return done(std::exchange(target->deferred_error, absl::OkStatus()));
    }
    auto view = planner::Resolve(**owner, src, "read src");
    if (!view.ok()) return done(view.status());
    if (view->length > kMaxInlineReadBytes) {
      return done(absl::InvalidArgumentError(absl::StrFormat(
          "read_too_large: read src: %s (%u bytes) in one reply, the limit "
          "is %s. Fix: read in chunks of at most %u bytes.",
          shared::FormatBytes(view->length), view->length,
          shared::FormatBytes(kMaxInlineReadBytes), kMaxInlineReadBytes)));
    }
    out->resize(view->length);
    if (view->length != 0) {
      auto read = target->queue->EnqueueRead(view->memory, view->offset,
                                             view->length, out->data());
      if (!read.ok()) return done(read.status());
      target->published = *read;
    }
    fence = target->published;
  }
  std::shared_ptr<Session> keep = *owner;
  target->queue->OnComplete(
      fence, [keep, target, done = std::move(done)](absl::Status status) {
        {
          absl::MutexLock lock(&keep->mu);
          ReclaimStaging(*keep, *target);
        }
        done(status);
      });
}

absl::StatusOr<bool> Core::Poll(uint64_t session, uint64_t stream) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * target,
                       owner->streams.Find(stream, "poll stream"));
  StreamEntry& entry = **target;
  if (!entry.deferred_error.ok()) {
    return std::exchange(entry.deferred_error, absl::OkStatus());
  }
  const bool complete = entry.queue->completed() >= entry.published;
  if (complete) ReclaimStaging(*owner, entry);
  return complete;
}

absl::StatusOr<StreamStats> Core::GetStreamStats(uint64_t session,
                                                 uint64_t stream) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
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

}  // namespace hrx::daemon
