// CommandPath::Submit: phase 1 checks and prepares the whole batch
// (planner.h); phase 2 enqueues it step by step, suspending at the staging
// bound until the stream's earlier work completes.
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/core/command_path.h"
#include "daemon/core/planner.h"
#include "shared/overloaded.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

using backend::Fence;
using backend::MemoryRef;
using planner::Prepared;

// True when an upload of `size` bytes must wait for the stream's earlier
// work to complete: past the staging bounds with staging still in flight.
bool StagingFull(Session& session, StreamEntry& stream, uint64_t size)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) {
  if (size == 0 || !stream.staging.NeedsDrain(size)) return false;
  ReclaimStaging(session, stream);
  return stream.staging.NeedsDrain(size) && stream.staging.pending_count() != 0;
}

// Whether the stream's queue already holds kMaxQueueBacklog commands up to
// the stream's last one. The queue is asked only once the stream has
// published up to where the last answer allowed.
bool BacklogFull(StreamEntry& stream) {
  if (stream.published < stream.backlog_checked_to) return false;
  const backend::Fence done = stream.queue->completed();
  stream.backlog_checked_to = done + kMaxQueueBacklog;
  return stream.published >= stream.backlog_checked_to;
}

// Enqueues one prepared step on the stream's queue: the fence it returned,
// or nullopt when the step enqueues nothing (empty ranges are valid no-ops,
// events are recorded in the core).
absl::StatusOr<std::optional<Fence>> EnqueueStep(DeviceSet& devices,
                                                 Session& session,
                                                 StreamEntry& stream,
                                                 Prepared& step)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) {
  using Result = absl::StatusOr<std::optional<Fence>>;
  backend::Queue& queue = *stream.queue;
  auto fenced = [](absl::StatusOr<Fence> fence) -> Result {
    if (!fence.ok()) return fence.status();
    return std::optional<Fence>(*fence);
  };
  return std::visit(
      Overloaded{
          [&](backend::FillOp& fill) -> Result {
            if (fill.length == 0) return std::nullopt;
            return fenced(queue.EnqueueFill(fill.dst, fill.offset, fill.length,
                                            fill.value));
          },
          [&](backend::CopyOp& copy) -> Result {
            if (copy.length == 0) return std::nullopt;
            return fenced(queue.EnqueueCopy(copy.dst, copy.dst_offset, copy.src,
                                            copy.src_offset, copy.length));
          },
          [&](planner::PreparedUpload& upload) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
              session.mu) -> Result {
            const uint64_t size = upload.data.size();
            if (size == 0) return std::nullopt;
            MemoryRef staging = stream.staging.TakeFitting(size);
            if (staging == nullptr) {
              staging = session.staging_pool.Take(size, StagingUsage::kUpload);
            }
            if (staging == nullptr) {
              auto backend = devices.For(*session.tenant);
              if (!backend.ok()) return backend.status();
              auto fresh = (*backend)->Allocate(
                  size, backend::MemoryKind::kHostCoherent, false);
              if (!fresh.ok()) return fresh.status();
              staging = *std::move(fresh);
            }
            std::memcpy(staging->host_address(), upload.data.data(), size);
            std::string().swap(upload.data);  // copied: the bytes can go
            auto fence =
                queue.EnqueueCopy(upload.dst, upload.offset, staging, 0, size);
            if (fence.ok())
              stream.staging.AddPending(std::move(staging), *fence);
            return fenced(fence);
          },
          [&](planner::PreparedRecord& record)
              ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) -> Result {
                EventEntry& recorded = session.events[record.event];  // charged
                recorded.queue = stream.queue;
                recorded.fence = stream.published;
                return std::nullopt;
              },
          [&](planner::PreparedWait& wait) -> Result {
            if (wait.queue == nullptr ||
                wait.queue->completed() >= wait.fence) {
              return std::nullopt;
            }
            return fenced(queue.EnqueueWaitFor(*wait.queue, wait.fence));
          },
          [&](backend::DispatchRef& dispatch) -> Result {
            return fenced(queue.EnqueueDispatch(dispatch));
          },
          [&](planner::PreparedLaunch& launch) -> Result {
            auto fence = queue.EnqueueGraph(launch.plan, nullptr);
            if (fence.ok()) {
              // Runs without locks (possibly inline): it only sets a flag.
              queue.OnComplete(*fence,
                               [failed = launch.failed](absl::Status s) {
                                 if (!s.ok()) failed->store(true);
                               });
            }
            return fenced(fence);
          },
      },
      step);
}

// Events the batch reserved but never published go, so nobody waits on them.
void DropUnpublishedEvents(Session& session, const planner::Plan& plan)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) {
  for (uint64_t event : plan.recorded_events) {
    auto it = session.events.find(event);
    if (it != session.events.end() && it->second.queue == nullptr) {
      session.events.erase(it);
    }
  }
}

}  // namespace

// A batch on its way through the gate: checked, then enqueued step by step;
// suspended (with `next` the step to resume at) while its upload waits for
// staging.
struct CommandPath::SubmitJob {
  std::shared_ptr<Session> owner;
  std::shared_ptr<StreamEntry> target;
  std::vector<Command> commands;
  SubmitErrors errors = SubmitErrors::kReturn;
  ChargeRef inflight;
  SubmitDone done;
  planner::Plan plan;
  size_t next = 0;
  // The queue failed while the batch waited at a bound: the rest is
  // enqueued without waiting again (it fails with the queue), since
  // completions may never move far enough to lift the bound.
  bool queue_failed = false;
};

void CommandPath::Submit(uint64_t session, uint64_t stream,
                         std::vector<Command> commands, SubmitErrors errors,
                         SubmitDone done) {
  if (commands.size() > kMaxCommandsPerSubmit) {
    return done(Refusal(
        Reason::kBatchTooLarge,
        absl::StrFormat("submit: %u commands in one batch, the limit is %u. "
                        "Fix: split the batch.",
                        commands.size(), kMaxCommandsPerSubmit)));
  }
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return done(owner.status());
  Session& s = **owner;
  if (absl::Status writer = RequireWriter(s, "submit"); !writer.ok()) {
    return done(writer);
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
      RunInOrder(
          *job->target,
          [this, job](absl::Status cancelled, Deferred& after) {
            if (!cancelled.ok()) {
              return Report(after, job->done,
                            absl::StatusOr<size_t>(cancelled));
            }
            StartSubmit(job, after);
          },
          after);
    }
  }
  RunDeferred(after);
}

void CommandPath::StartSubmit(const std::shared_ptr<SubmitJob>& job,
                              Deferred& after) {
  Session& s = *job->owner;
  // Gated operations run under their session's lock (stream_gate.h).
  s.mu.AssertHeld();
  StreamEntry& target = *job->target;
  // Phase 1: check everything; nothing is enqueued unless all of it is valid.
  planner::Planner planner(s, target, job->commands.size());
  planner.AssertSessionLocked();
  for (size_t i = 0; i < job->commands.size(); ++i) {
    absl::Status added = planner.Add(i, job->commands[i]);
    if (added.ok()) continue;
    if (job->errors == SubmitErrors::kReturn) {
      return Report(after, job->done, absl::StatusOr<size_t>(added));
    }
    hrx::daemon::DeferRefusal(target, std::move(added));
    return Report(after, job->done, absl::StatusOr<size_t>(size_t{0}));
  }
  job->plan = planner.Take();
  // Reserve the recorded ids now; the fences are filled in as enqueued.
  for (size_t i = 0; i < job->plan.recorded_events.size(); ++i) {
    s.events[job->plan.recorded_events[i]] =
        EventEntry{nullptr, 0, std::move(job->plan.event_charges[i])};
  }
  ContinueSubmit(job, after);
}

void CommandPath::ContinueSubmit(const std::shared_ptr<SubmitJob>& job,
                                 Deferred& after) {
  Session& s = *job->owner;
  s.mu.AssertHeld();  // called by StartSubmit and ResumeSubmit, locked
  StreamEntry& target = *job->target;
  // Phase 2: enqueue in order.
  for (; job->next < job->plan.steps.size(); ++job->next) {
    Prepared& step = job->plan.steps[job->next];
    // Bounded staging: past the bounds, this stream's earlier work completes
    // first. Nobody waits for it: the batch is suspended and resumes from
    // that completion.
    if (auto* upload = std::get_if<planner::PreparedUpload>(&step);
        upload != nullptr && !job->queue_failed &&
        StagingFull(s, target, upload->data.size())) {
      target.suspended = true;
      after.push_back(
          [this, job, queue = target.queue, drain_to = target.published] {
            queue->OnComplete(drain_to, [this, job](absl::Status status) {
              ResumeSubmit(job, status);
            });
          });
      return;
    }
    // Bounded backlog: a client faster than the device waits (unread) until
    // the queue has done half of what it holds.
    if (!job->queue_failed && BacklogFull(target)) {
      target.suspended = true;
      after.push_back([this, job, queue = target.queue,
                       drain_to = target.published - kMaxQueueBacklog / 2] {
        queue->OnComplete(drain_to, [this, job](absl::Status status) {
          ResumeSubmit(job, status);
        });
      });
      return;
    }
    auto fence = EnqueueStep(devices_, s, target, step);
    if (!fence.ok()) {
      // A backend refusing work is a device failure.
      DropUnpublishedEvents(s, job->plan);
      return Report(after, job->done, absl::StatusOr<size_t>(fence.status()));
    }
    if (fence->has_value()) target.published = **fence;
  }
  s.commands_submitted += job->commands.size();
  after.push_back([queue = target.queue, last = target.published,
                   inflight = std::move(job->inflight)]() mutable {
    queue->OnComplete(last, [inflight = std::move(inflight)](absl::Status) {});
  });
  Report(after, job->done, absl::StatusOr<size_t>(job->commands.size()));
}

void CommandPath::ResumeSubmit(const std::shared_ptr<SubmitJob>& job,
                               const absl::Status& drained) {
  Session& s = *job->owner;
  StreamEntry& target = *job->target;
  Deferred after;
  {
    absl::MutexLock lock(&s.mu);
    target.suspended = false;
    if (!drained.ok()) job->queue_failed = true;
    ReclaimStaging(s, target);
    if (target.closed) {
      DropUnpublishedEvents(s, job->plan);
      Report(after, job->done, absl::StatusOr<size_t>(SessionClosed()));
    } else {
      ContinueSubmit(job, after);
    }
    RunParked(target, after);
  }
  RunDeferred(after);
}

}  // namespace hrx::daemon
