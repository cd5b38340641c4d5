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
#include "daemon/core/session.h"
#include "shared/bytes.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using backend::DispatchRef;
using backend::Fence;
using backend::MemoryRef;

struct PreparedUpload {
  MemoryRef dst;
  uint64_t offset = 0;
  std::string data;
};
struct PreparedRecord {
  uint64_t event = 0;
};
struct PreparedWait {
  backend::Queue* queue = nullptr;  // null: same queue, already ordered
  Fence fence = 0;
};
using Prepared = std::variant<PreparedTransfer, PreparedUpload, PreparedRecord,
                              PreparedWait, DispatchRef>;

struct ResolvedView {
  MemoryRef memory;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t origin_stream = 0;
};

std::string Label(size_t index, size_t count, std::string_view op,
                  std::string_view part) {
  return absl::StrFormat("submit command %u of %u (%s%s%s)", index + 1, count,
                         op, part.empty() ? "" : " ", part);
}

void AppendU64(std::string& key, uint64_t value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void AppendView(std::string& key, const ViewRef& view) {
  AppendU64(key, view.buffer);
  AppendU64(key, view.offset);
  AppendU64(key, view.length);
}

absl::StatusOr<ResolvedView> Resolve(Session& session, const ViewRef& view,
                                     std::string_view what)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) {
  HRX_ASSIGN_OR_RETURN(BufferEntry * buffer,
                       session.buffers.Find(view.buffer, what));
  HRX_RETURN_IF_ERROR(shared::CheckSpan(what, view.offset, view.length,
                                        buffer->memory->size()));
  return ResolvedView{buffer->memory, view.offset, view.length,
                      buffer->origin_stream};
}

// Everything phase 1 produces. Cache misses are inserted as they are
// prepared (a later refusal in the batch leaves valid entries behind).
struct Plan {
  std::vector<Prepared> steps;
  std::vector<uint64_t> recorded_events;
};

class Planner {
 public:
  Planner(Session& session, StreamEntry& stream, size_t count)
      : session_(session), stream_(stream), count_(count) {}

  absl::Status Add(size_t i, Command& command)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session_.mu) {
    return std::visit([&](auto& c) { return AddOne(i, c); }, command);
  }

  Plan Take() { return std::move(plan_); }

 private:
  absl::Status AddOne(size_t i, FillCommand& fill) {
    std::string key = "F";
    AppendView(key, fill.dst);
    key.push_back(static_cast<char>(fill.value));
    if (const PreparedTransfer* hit = stream_.transfer_cache.Find(key)) {
      plan_.steps.push_back(*hit);
      return absl::OkStatus();
    }
    HRX_ASSIGN_OR_RETURN(ResolvedView dst,
                         Resolve(session_, fill.dst, Label(i, count_, "fill", "dst")));
    PreparedTransfer transfer{dst.memory, dst.offset, nullptr, 0, dst.length,
                              fill.value};
    if (dst.origin_stream == stream_.id && dst.length != 0) {
      stream_.transfer_cache.Insert(std::move(key), transfer,
                                    sizeof(PreparedTransfer), {dst.memory->id()});
    }
    plan_.steps.push_back(std::move(transfer));
    return absl::OkStatus();
  }

  absl::Status AddOne(size_t i, CopyCommand& copy) {
    std::string key = "C";
    AppendView(key, copy.dst);
    AppendView(key, copy.src);
    if (const PreparedTransfer* hit = stream_.transfer_cache.Find(key)) {
      plan_.steps.push_back(*hit);
      return absl::OkStatus();
    }
    HRX_ASSIGN_OR_RETURN(ResolvedView dst,
                         Resolve(session_, copy.dst, Label(i, count_, "copy", "dst")));
    HRX_ASSIGN_OR_RETURN(ResolvedView src,
                         Resolve(session_, copy.src, Label(i, count_, "copy", "src")));
    if (dst.length != src.length) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "copy_length_mismatch: %s: dst is %u bytes but src is %u bytes. "
          "Fix: copy between views of equal length.",
          Label(i, count_, "copy", ""), dst.length, src.length));
    }
    if (dst.memory == src.memory &&
        shared::SpansOverlap(dst.offset, src.offset, dst.length)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "copy_overlap: %s: dst [%u, +%u) overlaps src [%u, +%u) in the "
          "same buffer. Fix: copy through a temporary buffer.",
          Label(i, count_, "copy", ""), dst.offset, dst.length, src.offset,
          src.length));
    }
    PreparedTransfer transfer{dst.memory, dst.offset, src.memory, src.offset,
                              dst.length, 0};
    if (dst.origin_stream == stream_.id && src.origin_stream == stream_.id &&
        dst.length != 0) {
      stream_.transfer_cache.Insert(std::move(key), transfer,
                                    sizeof(PreparedTransfer),
                                    {dst.memory->id(), src.memory->id()});
    }
    plan_.steps.push_back(std::move(transfer));
    return absl::OkStatus();
  }

  absl::Status AddOne(size_t i, UploadCommand& upload) {
    const std::string label = Label(i, count_, "upload", "dst");
    HRX_ASSIGN_OR_RETURN(ResolvedView dst, Resolve(session_, upload.dst, label));
    if (upload.data.size() > dst.length) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "upload_too_large: %s: %u bytes of data do not fit the %u-byte "
          "view. Fix: upload at most the view's length.",
          label, upload.data.size(), dst.length));
    }
    plan_.steps.push_back(
        PreparedUpload{dst.memory, dst.offset, std::move(upload.data)});
    return absl::OkStatus();
  }

  absl::Status AddOne(size_t i, RecordEventCommand& record) {
    if (record.event == 0 || session_.events.contains(record.event) ||
        !batch_events_.insert(record.event).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "event_id_in_use: %s: event id %u is zero or already names a live "
          "event of this session. Fix: use a fresh nonzero id per event and "
          "release events when done.",
          Label(i, count_, "record_event", ""), record.event));
    }
    if (session_.events.size() + batch_events_.size() > kMaxEventsPerSession) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "too_many_events: %s: the session holds %u live events, the limit "
          "is %u. Fix: release events that are no longer needed.",
          Label(i, count_, "record_event", ""), session_.events.size(),
          kMaxEventsPerSession));
    }
    plan_.recorded_events.push_back(record.event);
    plan_.steps.push_back(PreparedRecord{record.event});
    return absl::OkStatus();
  }

  absl::Status AddOne(size_t i, WaitEventCommand& wait) {
    if (batch_events_.contains(wait.event)) {
      plan_.steps.push_back(PreparedWait{});  // recorded on this stream
      return absl::OkStatus();
    }
    auto it = session_.events.find(wait.event);
    if (it == session_.events.end()) {
      return absl::NotFoundError(absl::StrFormat(
          "unknown_event: %s: event %u is not a live event of this session. "
          "Fix: wait on events this session recorded and has not released.",
          Label(i, count_, "wait_event", ""), wait.event));
    }
    if (it->second.queue == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "event_unpublished: %s: event %u belongs to a batch that is still "
          "being enqueued. Fix: synchronize the recording stream first.",
          Label(i, count_, "wait_event", ""), wait.event));
    }
    const bool same_queue = it->second.queue == stream_.queue;
    plan_.steps.push_back(same_queue ? PreparedWait{}
                                     : PreparedWait{it->second.queue,
                                                    it->second.fence});
    return absl::OkStatus();
  }

  absl::Status AddOne(size_t i, DispatchCommand& dispatch) {
    std::string key = "D";
    AppendU64(key, dispatch.kernel);
    for (int d = 0; d < 3; ++d) {
      AppendU64(key, (uint64_t{dispatch.grid[d]} << 32) | dispatch.block[d]);
    }
    AppendU64(key, dispatch.constants.size());
    key += dispatch.constants;
    for (const ViewRef& view : dispatch.bindings) AppendView(key, view);
    if (const DispatchRef* hit = stream_.dispatch_cache.Find(key)) {
      plan_.steps.push_back(*hit);
      return absl::OkStatus();
    }
    const std::string label = Label(i, count_, "dispatch", "");
    HRX_ASSIGN_OR_RETURN(KernelEntry * entry,
                         session_.kernels.Find(dispatch.kernel, label));
    const backend::KernelRef& kernel = entry->kernel;
    const backend::KernelSignature& signature = kernel->signature();
    HRX_RETURN_IF_ERROR(shared::CheckLaunchShape(label, dispatch.grid, dispatch.block,
                                         signature.workgroup_size));
    HRX_RETURN_IF_ERROR(shared::CheckArguments(label, signature,
                                       dispatch.constants.size(),
                                       dispatch.bindings.size()));
    auto args = std::make_shared<backend::DispatchArgs>();
    args->kernel = kernel;
    args->grid = dispatch.grid;
    args->block = dispatch.block;
    args->constants = dispatch.constants;
    bool cacheable = true;
    std::vector<uint64_t> ids;
    for (size_t b = 0; b < dispatch.bindings.size(); ++b) {
      HRX_ASSIGN_OR_RETURN(
          ResolvedView view,
          Resolve(session_, dispatch.bindings[b],
                  Label(i, count_, "dispatch", absl::StrCat("binding ", b))));
      cacheable = cacheable && view.origin_stream == stream_.id;
      ids.push_back(view.memory->id());
      args->bindings.push_back({view.memory, view.offset, view.length});
    }
    DispatchRef prepared = std::move(args);
    if (cacheable) {
      const uint64_t bytes = prepared->constants.size() +
                             prepared->bindings.size() * sizeof(backend::BoundBuffer);
      stream_.dispatch_cache.Insert(std::move(key), prepared, bytes,
                                    std::move(ids));
    }
    plan_.steps.push_back(std::move(prepared));
    return absl::OkStatus();
  }

  Session& session_;
  StreamEntry& stream_;
  const size_t count_;
  std::set<uint64_t> batch_events_;
  Plan plan_;
};

}  // namespace

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
    auto view = Resolve(**owner, src, "read src");
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
