#include "daemon/core/core.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/core/session.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using backend::MemoryRef;

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

backend::MemoryKind MemoryKindOf(AllocationKind kind) {
  return kind == AllocationKind::kShared ? backend::MemoryKind::kHostCoherent
                                         : backend::MemoryKind::kDevice;
}

std::string SignatureText(const backend::KernelSignature& signature) {
  std::string text = "(";
  for (size_t i = 0; i < signature.args.size(); ++i) {
    if (i != 0) text += ", ";
    text += signature.args[i].kind == backend::ArgKind::kBuffer
                ? std::string("buffer")
                : absl::StrFormat("scalar%u", signature.args[i].size * 8);
  }
  return text + absl::StrFormat(") workgroup [%u, %u, %u]",
                                signature.workgroup_size[0],
                                signature.workgroup_size[1],
                                signature.workgroup_size[2]);
}

}  // namespace

Core::Core(std::unique_ptr<backend::Backend> backend,
           const CoreOptions& options)
    : backend_(std::move(backend)),
      authority_(options.authority ? *options.authority
                                   : HandleAuthority::FromKernelRandom()),
      started_(absl::Now()),
      queues_(*backend_, options.queue_count) {}

Core::~Core() { Drain(); }

absl::StatusOr<std::shared_ptr<Session>> Core::FindSession(
    uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto found = sessions_.Find(session, "session");
  if (!found.ok()) return found.status();
  return **found;
}

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
  return sessions_.Insert(std::make_shared<Session>(client_name));
}

void Core::CloseSession(
    uint64_t session,
    std::function<void(absl::StatusOr<CloseSummary>)> done) {
  std::shared_ptr<Session> closing;
  {
    absl::MutexLock lock(&mu_);
    auto removed = sessions_.Remove(session, "close session");
    if (!removed.ok()) return done(removed.status());
    closing = *std::move(removed);
  }
  CloseSummary summary;
  std::vector<std::pair<backend::Queue*, backend::Fence>> waits;
  {
    absl::MutexLock lock(&closing->mu);
    summary.freed_buffers = closing->buffers.size();
    summary.freed_streams = closing->streams.size();
    closing->streams.Clear([&](std::shared_ptr<StreamEntry> stream) {
      waits.emplace_back(stream->queue, stream->published);
    });
    // Buffers, kernels, events and pools go with the session; queued
    // commands hold what they use until they run.
    closing->buffers.Clear([](BufferEntry) {});
    closing->kernels.Clear([](backend::KernelRef) {});
    closing->events.clear();
  }
  if (waits.empty()) return done(summary);
  auto countdown = std::make_shared<Countdown>(
      waits.size(), [summary, done = std::move(done)](absl::Status status) {
        if (status.ok()) {
          done(summary);
        } else {
          done(status);
        }
      });
  for (auto& [queue, fence] : waits) {
    queue->OnComplete(fence, [countdown](absl::Status status) {
      countdown->Arrive(status);
    });
  }
}

DeviceInfo Core::device_info() const {
  const backend::DeviceProperties& properties = backend_->properties();
  return DeviceInfo{properties.backend, properties.name, properties.target,
                    properties.memory_bytes, queues_.capacity()};
}

absl::Status Core::SetQueueCount(uint32_t count) {
  return queues_.SetCapacity(count);
}

CoreStatus Core::status() const {
  CoreStatus status;
  status.device = device_info();
  status.uptime_seconds = static_cast<uint64_t>(
      absl::ToInt64Seconds(absl::Now() - started_));
  status.bytes_in_use = backend_->bytes_in_use();
  status.queues_created = queues_.created();
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    status.sessions = sessions_.size();
    sessions_.ForEach(
        [&](const std::shared_ptr<Session>& s) { sessions.push_back(s); });
  }
  for (const std::shared_ptr<Session>& session : sessions) {
    absl::MutexLock lock(&session->mu);
    status.buffers += session->buffers.size();
    status.streams += session->streams.size();
    status.kernels += session->kernels.size();
    status.events += session->events.size();
    status.commands_submitted += session->commands_submitted;
    status.allocation_pool += session->allocation_pool.stats();
    status.staging_pool += session->staging_pool.stats();
    session->streams.ForEach([&](const std::shared_ptr<StreamEntry>& stream) {
      status.dispatch_cache += stream->dispatch_cache.stats();
      status.transfer_cache += stream->transfer_cache.stats();
      status.upload_staging += stream->staging.stats();
    });
  }
  return status;
}

absl::StatusOr<BufferInfo> Core::Allocate(uint64_t session, uint64_t bytes,
                                          AllocationKind kind,
                                          uint64_t stream) {
  bytes = std::max<uint64_t>(bytes, 1);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  uint64_t origin = 0;
  MemoryRef memory;
  {
    absl::MutexLock lock(&owner->mu);
    if (stream != 0) {
      HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * entry,
                           owner->streams.Find(stream, "allocate stream"));
      origin = (*entry)->id;
    }
    // Only plain device memory is pooled: its contents are unspecified
    // anyway, and the pool is this session's own.
    if (kind == AllocationKind::kDevice) {
      memory = owner->allocation_pool.Take(bytes);
    }
  }
  if (memory == nullptr) {
    auto fresh = backend_->Allocate(bytes, MemoryKindOf(kind),
                                    kind == AllocationKind::kZeroed);
    if (!fresh.ok() &&
        fresh.status().code() == absl::StatusCode::kResourceExhausted) {
      // Memory parked in this session's pools is given back before refusing.
      {
        absl::MutexLock lock(&owner->mu);
        owner->allocation_pool = AllocationPool();
        owner->staging_pool = StagingPool();
      }
      fresh = backend_->Allocate(bytes, MemoryKindOf(kind),
                                 kind == AllocationKind::kZeroed);
    }
    if (!fresh.ok()) return fresh.status();
    memory = *std::move(fresh);
  }
  const uint64_t allocation_id = memory->id();
  absl::MutexLock lock(&owner->mu);
  const uint64_t handle =
      owner->buffers.Insert(BufferEntry{std::move(memory), origin});
  return BufferInfo{handle, bytes, allocation_id};
}

absl::Status Core::Free(uint64_t session, uint64_t buffer) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(BufferEntry entry,
                       owner->buffers.Remove(buffer, "free buffer"));
  const uint64_t id = entry.memory->id();
  owner->streams.ForEach([id](const std::shared_ptr<StreamEntry>& stream) {
    stream->dispatch_cache.EvictMemory(id);
    stream->transfer_cache.EvictMemory(id);
  });
  if (entry.memory->kind() == backend::MemoryKind::kDevice) {
    owner->allocation_pool.Give(std::move(entry.memory));
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelInfo> Core::LoadKernel(
    uint64_t session, std::string_view code, const std::string& entry,
    const backend::KernelSignature* declared) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  {
    absl::MutexLock lock(&owner->mu);
    if (owner->kernels.size() >= kMaxKernelsPerSession) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "too_many_kernels: load kernel %s: the session holds %u kernels, "
          "the limit is %u. Fix: unload kernels it no longer uses.",
          entry, owner->kernels.size(), kMaxKernelsPerSession));
    }
  }
  HRX_ASSIGN_OR_RETURN(backend::KernelRef kernel,
                       backend_->LoadKernel(code, entry));
  if (declared != nullptr &&
      (declared->args != kernel->signature().args ||
       declared->workgroup_size != kernel->signature().workgroup_size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "signature_mismatch: load kernel %s: declared %s but the module "
        "declares %s. Fix: declare the kernel's real signature, or none to "
        "use the module's.",
        entry, SignatureText(*declared), SignatureText(kernel->signature())));
  }
  absl::MutexLock lock(&owner->mu);
  KernelInfo info{0, entry, kernel->signature()};
  info.handle = owner->kernels.Insert(std::move(kernel));
  return info;
}

absl::Status Core::UnloadKernel(uint64_t session, uint64_t kernel) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(backend::KernelRef removed,
                       owner->kernels.Remove(kernel, "unload kernel"));
  owner->streams.ForEach([&](const std::shared_ptr<StreamEntry>& stream) {
    stream->dispatch_cache.EvictIf([&](const backend::DispatchRef& dispatch) {
      return dispatch->kernel == removed;
    });
  });
  return absl::OkStatus();
}

absl::StatusOr<StreamInfo> Core::CreateStream(uint64_t session) {
  static std::atomic<uint64_t> next_stream_id{1};
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  HRX_ASSIGN_OR_RETURN(QueueAssignment assignment, queues_.Assign());
  absl::MutexLock lock(&owner->mu);
  const uint64_t handle = owner->streams.Insert(std::make_shared<StreamEntry>(
      next_stream_id.fetch_add(1), assignment.index, assignment.queue));
  return StreamInfo{handle, assignment.index};
}

void Core::DestroyStream(uint64_t session, uint64_t stream,
                         DoneCallback done) {
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<StreamEntry> removed;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto entry = (*owner)->streams.Remove(stream, "destroy stream");
    if (!entry.ok()) return done(entry.status());
    removed = *std::move(entry);
  }
  removed->queue->OnComplete(removed->published, std::move(done));
}

absl::StatusOr<bool> Core::QueryEvent(uint64_t session, uint64_t event) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  auto it = owner->events.find(event);
  if (it == owner->events.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "unknown_event: query event %u: this session has no such event. "
        "Fix: query events recorded by this session's streams.",
        event));
  }
  if (it->second.queue == nullptr) return false;
  return it->second.queue->completed() >= it->second.fence;
}

void Core::SynchronizeEvent(uint64_t session, uint64_t event,
                            DoneCallback done) {
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  EventEntry entry;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto it = (*owner)->events.find(event);
    if (it == (*owner)->events.end() || it->second.queue == nullptr) {
      return done(absl::NotFoundError(absl::StrFormat(
          "unknown_event: synchronize event %u: this session has no such "
          "published event. Fix: synchronize events recorded by this "
          "session's streams.",
          event)));
    }
    entry = it->second;
  }
  entry.queue->OnComplete(entry.fence, std::move(done));
}

absl::Status Core::ReleaseEvent(uint64_t session, uint64_t event) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  if (owner->events.erase(event) == 0) {
    return absl::NotFoundError(absl::StrFormat(
        "unknown_event: release event %u: this session has no such event. "
        "Fix: release each recorded event once.",
        event));
  }
  return absl::OkStatus();
}

void Core::Drain() { queues_.DrainAll(); }

}  // namespace hrx::daemon
