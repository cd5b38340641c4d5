#include "daemon/core/core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "shared/bytes.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using backend::MemoryRef;

// Commands after their views were resolved against live buffers: everything
// needed to enqueue, with no way left to fail validation.
struct PreparedFill {
  MemoryRef dst;
  uint64_t offset, length;
  uint8_t value;
};
struct PreparedCopy {
  MemoryRef dst;
  uint64_t dst_offset;
  MemoryRef src;
  uint64_t src_offset, length;
};
struct PreparedUpload {
  MemoryRef dst;
  uint64_t offset;
  std::shared_ptr<const std::string> data;
};
using Prepared = std::variant<PreparedFill, PreparedCopy, PreparedUpload>;

std::string CommandLabel(size_t index, size_t count, std::string_view op,
                         std::string_view part) {
  return absl::StrFormat("submit command %u of %u (%s %s)", index + 1, count,
                         op, part);
}

// Calls `done` once after `count` arrivals, with the first error seen.
class Countdown {
 public:
  Countdown(size_t count, DoneCallback done)
      : remaining_(count), done_(std::move(done)) {}
  void Arrive(absl::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (!status.ok() && first_error_.ok()) first_error_ = status;
      if (--remaining_ != 0) return;
    }
    done_(first_error_);
  }

 private:
  absl::Mutex mu_;
  size_t remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  DoneCallback done_;
};

}  // namespace

Core::Core(std::unique_ptr<backend::Backend> backend,
           const CoreOptions& options)
    : backend_(std::move(backend)),
      started_(absl::Now()),
      queues_(*backend_, options.queue_count) {}

Core::~Core() { Drain(); }

absl::StatusOr<uint64_t> Core::OpenSession(const std::string& client_name) {
  if (client_name.size() > kMaxClientNameBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "client_name_too_long: open session: client name is %u bytes, the "
        "limit is %u. Fix: send a shorter client_name.",
        client_name.size(), kMaxClientNameBytes));
  }
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= kMaxSessions) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "too_many_sessions: open session: %u sessions are open, the limit is "
        "%u. Fix: close idle sessions (hrxctl status shows the count).",
        sessions_.size(), kMaxSessions));
  }
  auto session = std::make_unique<Session>();
  session->client_name = client_name;
  return sessions_.Insert(std::move(session));
}

void Core::CloseSession(
    uint64_t session,
    std::function<void(absl::StatusOr<CloseSummary>)> done) {
  std::vector<backend::Queue*> queues;
  CloseSummary summary;
  {
    absl::MutexLock lock(&mu_);
    auto removed = sessions_.Remove(session, "close session");
    if (!removed.ok()) {
      done(removed.status());
      return;
    }
    std::unique_ptr<Session> closing = *std::move(removed);
    summary.freed_buffers = closing->buffers.size();
    summary.freed_streams = closing->streams.size();
    closing->streams.ForEach([&](const StreamEntry& stream) {
      if (std::find(queues.begin(), queues.end(), stream.queue) ==
          queues.end()) {
        queues.push_back(stream.queue);
      }
    });
    // Buffers go now; queued commands hold their memory until they run.
  }
  if (queues.empty()) {
    done(summary);
    return;
  }
  auto countdown = std::make_shared<Countdown>(
      queues.size(), [summary, done = std::move(done)](absl::Status status) {
        if (status.ok()) {
          done(summary);
        } else {
          done(status);
        }
      });
  for (backend::Queue* queue : queues) {
    auto fence = queue->EnqueueHostCallback(
        [countdown](absl::Status status) { countdown->Arrive(status); });
    if (!fence.ok()) countdown->Arrive(fence.status());
  }
}

DeviceInfo Core::device_info() const {
  const backend::DeviceProperties& properties = backend_->properties();
  return DeviceInfo{properties.backend, properties.name, properties.target,
                    properties.memory_bytes, queues_.capacity()};
}

CoreStatus Core::status() const {
  CoreStatus status;
  status.device = device_info();
  status.uptime_seconds = static_cast<uint64_t>(
      absl::ToInt64Seconds(absl::Now() - started_));
  status.bytes_in_use = backend_->bytes_in_use();
  absl::MutexLock lock(&mu_);
  status.sessions = sessions_.size();
  sessions_.ForEach([&](const std::unique_ptr<Session>& session) {
    status.streams += session->streams.size();
    status.buffers += session->buffers.size();
  });
  status.commands_submitted = commands_submitted_;
  return status;
}

absl::StatusOr<Core::Session*> Core::FindSessionLocked(uint64_t session) {
  auto found = sessions_.Find(session, "session");
  if (!found.ok()) return found.status();
  return (*found)->get();
}

absl::StatusOr<BufferInfo> Core::Allocate(uint64_t session, uint64_t bytes,
                                          bool zeroed) {
  bytes = std::max<uint64_t>(bytes, 1);
  {
    // Refuse an unknown session before touching device memory.
    absl::MutexLock lock(&mu_);
    HRX_RETURN_IF_ERROR(FindSessionLocked(session).status());
  }
  HRX_ASSIGN_OR_RETURN(MemoryRef memory,
                       backend_->Allocate(bytes, backend::MemoryKind::kDevice,
                                          zeroed));
  absl::MutexLock lock(&mu_);
  // The session may have closed meanwhile; then `memory` is simply dropped.
  HRX_ASSIGN_OR_RETURN(Session * owner, FindSessionLocked(session));
  return BufferInfo{owner->buffers.Insert(BufferEntry{std::move(memory)}),
                    bytes};
}

absl::Status Core::Free(uint64_t session, uint64_t buffer) {
  absl::MutexLock lock(&mu_);
  HRX_ASSIGN_OR_RETURN(Session * owner, FindSessionLocked(session));
  return owner->buffers.Remove(buffer, "free buffer").status();
}

absl::StatusOr<StreamInfo> Core::CreateStream(uint64_t session) {
  absl::MutexLock lock(&mu_);
  HRX_ASSIGN_OR_RETURN(Session * owner, FindSessionLocked(session));
  HRX_ASSIGN_OR_RETURN(QueueAssignment assignment, queues_.Assign());
  const uint64_t handle =
      owner->streams.Insert(StreamEntry{assignment.index, assignment.queue});
  return StreamInfo{handle, assignment.index};
}

void Core::DestroyStream(uint64_t session, uint64_t stream,
                         DoneCallback done) {
  backend::Queue* queue = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto owner = FindSessionLocked(session);
    if (!owner.ok()) return done(owner.status());
    auto removed = (*owner)->streams.Remove(stream, "destroy stream");
    if (!removed.ok()) return done(removed.status());
    queue = removed->queue;
  }
  auto fence = queue->EnqueueHostCallback(done);
  if (!fence.ok()) done(fence.status());
}

absl::StatusOr<Core::StreamEntry*> Core::FindStreamLocked(
    uint64_t session, uint64_t stream, std::string_view what) {
  HRX_ASSIGN_OR_RETURN(Session * owner, FindSessionLocked(session));
  return owner->streams.Find(stream, what);
}

absl::StatusOr<Core::ResolvedView> Core::ResolveView(Session& session,
                                                     const ViewRef& view,
                                                     std::string_view what) {
  HRX_ASSIGN_OR_RETURN(BufferEntry * buffer,
                       session.buffers.Find(view.buffer, what));
  HRX_RETURN_IF_ERROR(shared::CheckSpan(what, view.offset, view.length,
                                        buffer->memory->size()));
  return ResolvedView{buffer->memory, view.offset, view.length};
}

absl::StatusOr<size_t> Core::Submit(uint64_t session, uint64_t stream,
                                    std::vector<Command> commands) {
  if (commands.size() > kMaxCommandsPerSubmit) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch_too_large: submit: %u commands in one batch, the limit is %u. "
        "Fix: split the batch.",
        commands.size(), kMaxCommandsPerSubmit));
  }
  absl::MutexLock lock(&mu_);
  HRX_ASSIGN_OR_RETURN(Session * owner, FindSessionLocked(session));
  HRX_ASSIGN_OR_RETURN(StreamEntry * target,
                       owner->streams.Find(stream, "submit stream"));
  HRX_RETURN_IF_ERROR(EnqueueChecked(*owner, *target->queue, commands));
  commands_submitted_ += commands.size();
  return commands.size();
}

absl::Status Core::EnqueueChecked(Session& session, backend::Queue& queue,
                                  std::vector<Command>& commands) {
  const size_t count = commands.size();
  std::vector<Prepared> prepared;
  prepared.reserve(count);
  // Pass 1: check everything; nothing is enqueued unless all of it is valid.
  for (size_t i = 0; i < count; ++i) {
    Command& command = commands[i];
    if (auto* fill = std::get_if<FillCommand>(&command)) {
      HRX_ASSIGN_OR_RETURN(
          ResolvedView dst,
          ResolveView(session, fill->dst, CommandLabel(i, count, "fill", "dst")));
      prepared.push_back(
          PreparedFill{dst.memory, dst.offset, dst.length, fill->value});
    } else if (auto* copy = std::get_if<CopyCommand>(&command)) {
      HRX_ASSIGN_OR_RETURN(
          ResolvedView dst,
          ResolveView(session, copy->dst, CommandLabel(i, count, "copy", "dst")));
      HRX_ASSIGN_OR_RETURN(
          ResolvedView src,
          ResolveView(session, copy->src, CommandLabel(i, count, "copy", "src")));
      if (dst.length != src.length) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "copy_length_mismatch: %s: dst is %u bytes but src is %u bytes. "
            "Fix: copy between views of equal length.",
            CommandLabel(i, count, "copy", "views"), dst.length, src.length));
      }
      if (dst.memory == src.memory &&
          shared::SpansOverlap(dst.offset, src.offset, dst.length)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "copy_overlap: %s: dst [%u, +%u) overlaps src [%u, +%u) in the "
            "same buffer. Fix: copy through a temporary buffer.",
            CommandLabel(i, count, "copy", "views"), dst.offset, dst.length,
            src.offset, src.length));
      }
      prepared.push_back(PreparedCopy{dst.memory, dst.offset, src.memory,
                                      src.offset, dst.length});
    } else {
      auto& upload = std::get<UploadCommand>(command);
      const std::string label = CommandLabel(i, count, "upload", "dst");
      HRX_ASSIGN_OR_RETURN(ResolvedView dst,
                           ResolveView(session, upload.dst, label));
      if (upload.data.size() > dst.length) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "upload_too_large: %s: %u bytes of data do not fit the %u-byte "
            "view. Fix: upload at most the view's length.",
            label, upload.data.size(), dst.length));
      }
      prepared.push_back(PreparedUpload{
          dst.memory, dst.offset,
          std::make_shared<const std::string>(std::move(upload.data))});
    }
  }
  // Pass 2: enqueue in order. Empty ranges are valid no-ops.
  for (Prepared& op : prepared) {
    absl::Status enqueued;
    if (auto* fill = std::get_if<PreparedFill>(&op)) {
      if (fill->length == 0) continue;
      enqueued = queue.EnqueueFill(fill->dst, fill->offset, fill->length,
                                   fill->value).status();
    } else if (auto* copy = std::get_if<PreparedCopy>(&op)) {
      if (copy->length == 0) continue;
      enqueued = queue.EnqueueCopy(copy->dst, copy->dst_offset, copy->src,
                                   copy->src_offset, copy->length).status();
    } else {
      auto& upload = std::get<PreparedUpload>(op);
      if (upload.data->empty()) continue;
      enqueued = queue.EnqueueWrite(upload.dst, upload.offset,
                                    std::move(upload.data)).status();
    }
    // The backend refusing an enqueue is a device failure, not bad input.
    HRX_RETURN_IF_ERROR(enqueued);
  }
  return absl::OkStatus();
}

void Core::Synchronize(uint64_t session, uint64_t stream, DoneCallback done) {
  absl::MutexLock lock(&mu_);
  auto target = FindStreamLocked(session, stream, "synchronize stream");
  if (!target.ok()) return done(target.status());
  auto fence = (*target)->queue->EnqueueHostCallback(done);
  if (!fence.ok()) done(fence.status());
}

void Core::Read(uint64_t session, uint64_t stream, const ViewRef& src,
                std::string* out, DoneCallback done) {
  absl::MutexLock lock(&mu_);
  auto target = FindStreamLocked(session, stream, "read stream");
  if (!target.ok()) return done(target.status());
  auto owner = FindSessionLocked(session);
  auto view = ResolveView(**owner, src, "read src");
  if (!view.ok()) return done(view.status());
  if (view->length > kMaxInlineReadBytes) {
    return done(absl::InvalidArgumentError(absl::StrFormat(
        "read_too_large: read src: %s (%u bytes) in one reply, the limit is "
        "%s. Fix: read in chunks of at most %u bytes.",
        shared::FormatBytes(view->length), view->length,
        shared::FormatBytes(kMaxInlineReadBytes), kMaxInlineReadBytes)));
  }
  backend::Queue& queue = *(*target)->queue;
  out->resize(view->length);
  if (view->length != 0) {
    auto fence =
        queue.EnqueueRead(view->memory, view->offset, view->length, out->data());
    if (!fence.ok()) return done(fence.status());
  }
  auto fence = queue.EnqueueHostCallback(done);
  if (!fence.ok()) done(fence.status());
}

void Core::Drain() { queues_.DrainAll(); }

}  // namespace hrx::daemon
