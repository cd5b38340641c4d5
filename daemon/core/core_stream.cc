// Core's ordered command path: Submit's two phases (check everything, then
// enqueue), upload staging, the command caches, and the synchronisation
// points that report deferred refusals and reclaim staging.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
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
#include "shared/refusal.h"

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

// A batch on its way through the gate: checked, then enqueued step by step;
// suspended (with `next` the step to resume at) while its upload waits for
// staging.
struct Core::SubmitJob {
  std::shared_ptr<Session> owner;
  std::shared_ptr<StreamEntry> target;
  std::vector<Command> commands;
  SubmitErrors errors = SubmitErrors::kReturn;
  ChargeRef inflight;
  SubmitDone done;
  Plan plan;
  size_t next = 0;
};

namespace {

absl::Status SessionClosed() {
  return Refusal(Reason::kSessionClosed, "the stream's session closed (its client ended, or an "
      "admin evicted it) before this operation ran. Fix: open a new "
      "session.");
}

// Adds `done(result)` to `after`.
template <typename Done, typename Result>
void Report(Deferred& after, Done done, Result result) {
  after.push_back([done = std::move(done), result = std::move(result)]() {
    done(result);
  });
}

// A sync point opens by reporting a cancellation, or else the stream's
// deferred refusal (and clearing it). True when it reported one.
bool ReportedAtSyncPoint(StreamEntry& target, const absl::Status& cancelled,
                         const DoneCallback& done, Deferred& after) {
  if (!cancelled.ok()) {
    Report(after, done, cancelled);
    return true;
  }
  if (target.deferred_error.ok()) return false;
  Report(after, done, std::exchange(target.deferred_error, absl::OkStatus()));
  return true;
}

}  // namespace

void Core::CompleteAtPublished(std::shared_ptr<Session> keep,
                               std::shared_ptr<StreamEntry> target,
                               DoneCallback done, Deferred& after) {
  const Fence fence = target->published;
  after.push_back([keep = std::move(keep), target = std::move(target), fence,
                   done = std::move(done)] {
    target->queue->OnComplete(fence, [keep, target, done](absl::Status status) {
      {
        absl::MutexLock lock(&keep->mu);
        ReclaimStaging(*keep, *target);
      }
      done(status);
    });
  });
}

void Core::RunDeferred(Deferred& after) {
  for (auto& step : after) step();
  after.clear();
}

void Core::RunInOrderLocked(StreamEntry& stream, GatedOp op, Deferred& after) {
  if (stream.closed) return op(SessionClosed(), after);
  if (!stream.suspended && stream.parked.empty()) return op(absl::OkStatus(), after);
  if (stream.parked.size() >= kMaxParkedOps) {
    return op(Refusal(Reason::kStreamBusy,absl::StrFormat(
                  "%u operations already wait behind a batch "
                  "suspended at the staging bound (the limit is %u). Fix: "
                  "wait for earlier calls on the stream before sending more.",
                  stream.parked.size(), kMaxParkedOps)),
              after);
  }
  stream.parked.push_back(std::move(op));
}

void Core::RunParkedLocked(StreamEntry& stream, Deferred& after) {
  while (!stream.suspended && !stream.parked.empty()) {
    GatedOp op = std::move(stream.parked.front());
    stream.parked.pop_front();
    op(stream.closed ? SessionClosed() : absl::OkStatus(), after);
  }
}

void Core::Submit(uint64_t session, uint64_t stream,
                  std::vector<Command> commands, SubmitErrors errors,
                  SubmitDone done) {
  if (commands.size() > kMaxCommandsPerSubmit) {
    return done(Refusal(Reason::kBatchTooLarge,absl::StrFormat(
        "submit: %u commands in one batch, the limit is %u. "
        "Fix: split the batch.",
        commands.size(), kMaxCommandsPerSubmit)));
  }
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  Session& s = **owner;
  if (s.tenant->role() == hrx::v1::ROLE_OBSERVER) {
    return done(Refusal(Reason::kObserverReadOnly,absl::StrFormat(
        "submit: tenant \"%s\" (%s) has the observer "
        "role, which may only inspect. Fix: run the client as a uid of a "
        "client tenant.",
        s.tenant->name(), s.Who())));
  }
  // Commands in flight are charged until the batch's last fence completes.
  auto inflight = s.tenant->Reserve(
      Resource::kInflightCommands, commands.size(),
      absl::StrFormat("submit %u commands", commands.size()), s.Who());
  if (!inflight.ok()) return done(inflight.status());
  auto job = std::make_shared<SubmitJob>();
  job->owner = *owner;
  job->commands = std::move(commands);
  job->errors = errors;
  job->inflight = *std::move(inflight);
  job->done = std::move(done);
  Deferred after;
  {
    absl::MutexLock lock(&s.mu);
    auto found = s.streams.Find(stream, "submit stream");
    if (!found.ok()) {
      Report(after, std::move(job->done),
             absl::StatusOr<size_t>(found.status()));
    } else {
      job->target = **found;
      RunInOrderLocked(*job->target,
                       [this, job](absl::Status cancelled, Deferred& after) {
                         if (!cancelled.ok()) {
                           return Report(after, job->done,
                                         absl::StatusOr<size_t>(cancelled));
                         }
                         StartSubmitLocked(job, after);
                       },
                       after);
    }
  }
  RunDeferred(after);
}

void Core::StartSubmitLocked(const std::shared_ptr<SubmitJob>& job,
                             Deferred& after) {
  Session& s = *job->owner;
  StreamEntry& target = *job->target;
  // Phase 1: check everything; nothing is enqueued unless all of it is valid.
  Planner planner(s, target, job->commands.size());
  for (size_t i = 0; i < job->commands.size(); ++i) {
    absl::Status added = planner.Add(i, job->commands[i]);
    if (!added.ok()) {
      if (job->errors == SubmitErrors::kReturn) {
        return Report(after, job->done, absl::StatusOr<size_t>(added));
      }
      if (target.deferred_error.ok()) target.deferred_error = added;
      return Report(after, job->done, absl::StatusOr<size_t>(size_t{0}));
    }
  }
  job->plan = planner.Take();
  // Reserve the recorded ids now; the fences are filled in as enqueued.
  for (size_t i = 0; i < job->plan.recorded_events.size(); ++i) {
    s.events[job->plan.recorded_events[i]] =
        EventEntry{nullptr, 0, std::move(job->plan.event_charges[i])};
  }
  ContinueSubmitLocked(job, after);
}

void Core::ContinueSubmitLocked(const std::shared_ptr<SubmitJob>& job,
                                Deferred& after) {
  Session& s = *job->owner;
  StreamEntry& target = *job->target;
  // Phase 2: enqueue in order. Empty ranges are valid no-ops.
  backend::Queue& queue = *target.queue;
  absl::Status enqueued;
  for (; job->next < job->plan.steps.size(); ++job->next) {
    Prepared& step = job->plan.steps[job->next];
    absl::StatusOr<Fence> fence = target.published;
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
      // completes first. Nobody waits for it: the batch is suspended and
      // resumes from that completion.
      if (target.staging.NeedsDrain(size)) {
        ReclaimStaging(s, target);
        if (target.staging.NeedsDrain(size) &&
            target.staging.pending_count() != 0) {
          target.suspended = true;
          const Fence drain_to = target.published;
          after.push_back([this, job, &queue, drain_to] {
            queue.OnComplete(drain_to,
                             [this, job](absl::Status) { ResumeSubmit(job); });
          });
          return;
        }
      }
      MemoryRef staging = target.staging.TakeFitting(size);
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
      std::string().swap(upload->data);  // copied: the request's bytes can go
      fence = queue.EnqueueCopy(upload->dst, upload->offset, staging, 0, size);
      if (fence.ok()) target.staging.AddPending(std::move(staging), *fence);
    } else if (auto* record = std::get_if<PreparedRecord>(&step)) {
      EventEntry& recorded = s.events[record->event];  // keeps its charge
      recorded.queue = &queue;
      recorded.fence = target.published;
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
    target.published = *fence;
  }
  if (!enqueued.ok()) {
    // A backend refusing work is a device failure; events not yet published
    // are dropped so nobody waits on them.
    for (uint64_t event : job->plan.recorded_events) {
      auto it = s.events.find(event);
      if (it != s.events.end() && it->second.queue == nullptr) s.events.erase(it);
    }
    return Report(after, job->done, absl::StatusOr<size_t>(enqueued));
  }
  s.commands_submitted += job->commands.size();
  const Fence last = target.published;
  after.push_back([&queue, last, inflight = std::move(job->inflight)]() mutable {
    queue.OnComplete(last, [inflight = std::move(inflight)](absl::Status) {});
  });
  Report(after, job->done, absl::StatusOr<size_t>(job->commands.size()));
}

void Core::ResumeSubmit(const std::shared_ptr<SubmitJob>& job) {
  Session& s = *job->owner;
  StreamEntry& target = *job->target;
  Deferred after;
  {
    absl::MutexLock lock(&s.mu);
    target.suspended = false;
    ReclaimStaging(s, target);
    if (target.closed) {
      for (uint64_t event : job->plan.recorded_events) {
        auto it = s.events.find(event);
        if (it != s.events.end() && it->second.queue == nullptr) {
          s.events.erase(it);
        }
      }
      Report(after, job->done, absl::StatusOr<size_t>(SessionClosed()));
    } else {
      ContinueSubmitLocked(job, after);
    }
    RunParkedLocked(target, after);
  }
  RunDeferred(after);
}

void Core::Synchronize(uint64_t session, uint64_t stream, DoneCallback done) {
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<Session> keep = *owner;
  Deferred after;
  {
    absl::MutexLock lock(&keep->mu);
    auto found = keep->streams.Find(stream, "synchronize stream");
    if (!found.ok()) return done(found.status());
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrderLocked(
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

absl::StatusOr<ChargeRef> Core::ReserveReplyBytes(uint64_t session,
                                                  uint64_t bytes) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  return owner->tenant->Reserve(
      Resource::kReplyBytes, std::min(bytes, kMaxInlineReadBytes),
      absl::StrFormat("read %s", shared::FormatBytes(bytes)), owner->Who());
}

void Core::Read(uint64_t session, uint64_t stream, const ViewRef& src,
                std::string* out, DoneCallback done) {
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<Session> keep = *owner;
  Deferred after;
  {
    absl::MutexLock lock(&keep->mu);
    auto found = keep->streams.Find(stream, "read stream");
    if (!found.ok()) return done(found.status());
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrderLocked(
        *target,
        [keep, target, src, out, done = std::move(done)](
            absl::Status cancelled, Deferred& after) {
          if (ReportedAtSyncPoint(*target, cancelled, done, after)) return;
          auto view = planner::Resolve(*keep, src, "read src");
          if (!view.ok()) return Report(after, done, view.status());
          if (view->length > kMaxInlineReadBytes) {
            return Report(
                after, done,
                Refusal(Reason::kReadTooLarge,absl::StrFormat(
                    "read src: %s (%u bytes) in one reply, "
                    "the limit is %s. Fix: read in chunks of at most %u "
                    "bytes.",
                    shared::FormatBytes(view->length), view->length,
                    shared::FormatBytes(kMaxInlineReadBytes),
                    kMaxInlineReadBytes)));
          }
          out->resize(view->length);
          if (view->length != 0) {
            auto read = target->queue->EnqueueRead(
                view->memory, view->offset, view->length, out->data());
            if (!read.ok()) return Report(after, done, read.status());
            target->published = *read;
          }
          CompleteAtPublished(keep, target, done, after);
        },
        after);
  }
  RunDeferred(after);
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
  // A suspended batch, or work parked behind it, is not even enqueued yet.
  const bool complete = !entry.suspended && entry.parked.empty() &&
                        entry.queue->completed() >= entry.published;
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
