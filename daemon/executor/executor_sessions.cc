#include "daemon/executor/executor_sessions.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/core/stream_gate.h"
#include "daemon/server/core_stream_engine.h"
#include "daemon/server/decode.h"
#include "shared/handle.h"
#include "shared/refusal.h"
#include "shared/shm_ring.h"
#include "shared/status_macros.h"

namespace hrx::executor {
namespace {

namespace wire = hrx::executor::v1;

shared::WireHandle FromWire(const wire::SealedHandle& handle) {
  return shared::WireHandle{handle.instance(), handle.session(),
                            handle.object(), handle.tag()};
}

absl::Status Broken(std::string_view what) {
  return Refusal(Reason::kStreamProtocol,
                 absl::StrFormat("executor: %s. Fix: report a bug (hrxd and "
                                 "its executors are built together).",
                                 what));
}

}  // namespace

ExecutorSessions::ExecutorSessions(std::shared_ptr<backend::Backend> backend,
                                   Ask ask, RingEnded ring_ended,
                                   Released released)
    : backend_(std::move(backend)),
      devices_(backend_),
      // The registry is never asked: sessions come from hrxd (InsertAt).
      sessions_(std::shared_ptr<daemon::TenantRegistry>(
                    daemon::TenantRegistry::BuiltIn(0)),
                daemon::Clock::Real()),
      queues_(devices_, daemon::kDefaultQueueCount),
      commands_(devices_, sessions_, queues_),
      graphs_(sessions_),
      events_(sessions_),
      handles_(std::move(ask)),
      ring_ended_(std::move(ring_ended)),
      released_(std::move(released)) {}

ExecutorSessions::~ExecutorSessions() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [server, ring] : rings_) server->StopForShutdown();
  mu_.Await(absl::Condition(
      +[](absl::flat_hash_map<daemon::RingServer*, Ring>* rings) {
        return rings->empty();
      },
      &rings_));
}

absl::Status ExecutorSessions::Open(const wire::OpenSession& open) {
  std::shared_ptr<daemon::Tenant> tenant;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<daemon::Tenant>& known = tenants_[open.tenant()];
    if (known == nullptr) {
      known = std::make_shared<daemon::Tenant>(
          open.tenant(), daemon::Role::kClient,
          daemon::LimitsFromBudget(open.budget()));
    }
    tenant = known;
  }
  return sessions_.InsertAt(open.session(), std::make_shared<daemon::Session>(
                                                "", daemon::PeerIdentity{},
                                                std::move(tenant), nullptr));
}

void ExecutorSessions::End(const wire::EndSession& end) {
  handles_.RevokeSession(end.session());
  auto removed = sessions_.Remove(end.session(), "end session");
  if (!removed.ok()) return;
  if (end.code() != 0) {
    sessions_.Bury(
        end.session(),
        absl::Status(static_cast<absl::StatusCode>(end.code()), end.message()));
  }
  // As hrxd's close: streams close (parked work is cancelled), objects go;
  // queued work holds what it uses. Its rings see the session gone at
  // their next check and end.
  daemon::Session& closing = **removed;
  daemon::Deferred cancelled;
  {
    absl::MutexLock lock(&closing.mu);
    // What hrxd installed goes once the streams' queued work has run.
    std::vector<uint64_t> objects;
    auto kept = std::make_shared<std::vector<std::shared_ptr<const void>>>();
    closing.buffers.ForEachHandle(
        [&](uint64_t handle, const daemon::BufferEntry& entry) {
          objects.push_back(handle);
          kept->push_back(entry.memory);
        });
    closing.kernels.ForEachHandle(
        [&](uint64_t handle, const daemon::KernelEntry& entry) {
          objects.push_back(handle);
          kept->push_back(entry.kernel);
        });
    closing.graph_execs.ForEachHandle(
        [&](uint64_t handle, const daemon::GraphExecEntry& entry) {
          objects.push_back(handle);
          kept->push_back(entry.plan);
        });
    ReleaseAfterQueuedWork(closing, end.session(), std::move(objects),
                           std::move(kept));
    closing.streams.Clear([&](std::shared_ptr<daemon::StreamEntry> stream) {
      daemon::CloseStream(*stream, cancelled);
    });
    closing.buffers.Clear([](daemon::BufferEntry) {});
    closing.kernels.Clear([](daemon::KernelEntry) {});
    closing.graph_execs.Clear([](daemon::GraphExecEntry) {});
    closing.events.clear();
  }
  daemon::RunDeferred(cancelled);
}

absl::Status ExecutorSessions::Install(
    const wire::InstalledObject& object,
    const backend::remote::LocalObjects& objects) {
  const shared::WireHandle handle = FromWire(object.handle());
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<daemon::Session> session,
                       sessions_.Find(handle.session));
  absl::Status stored;
  if (object.has_buffer()) {
    HRX_ASSIGN_OR_RETURN(backend::MemoryRef memory,
                         objects.Memory(object.buffer().memory()));
    absl::MutexLock lock(&session->mu);
    stored = session->buffers.InsertAt(
        handle.object,
        daemon::BufferEntry{std::move(memory), object.buffer().origin_stream(),
                            nullptr});
  } else if (object.has_kernel()) {
    HRX_ASSIGN_OR_RETURN(backend::KernelRef kernel,
                         objects.Kernel(object.kernel().kernel()));
    absl::MutexLock lock(&session->mu);
    stored = session->kernels.InsertAt(
        handle.object, daemon::KernelEntry{std::move(kernel), nullptr});
  } else if (object.has_exec()) {
    const wire::InstalledExec& exec = object.exec();
    HRX_ASSIGN_OR_RETURN(backend::GraphRef plan, objects.Graph(exec.graph()));
    daemon::GraphExecEntry entry;
    entry.plan = std::move(plan);
    entry.stream_id = exec.stream_id();
    entry.profiled = exec.profiled();
    entry.labels.assign(exec.labels().begin(), exec.labels().end());
    entry.failed = std::make_shared<std::atomic<bool>>(false);
    absl::MutexLock lock(&session->mu);
    stored = session->graph_execs.InsertAt(handle.object, std::move(entry));
  } else {
    return Broken("hrxd installed an object of no kind");
  }
  // Two rings may ask for the same handle at once: the second answer finds
  // the first installed, which is the same object.
  if (!stored.ok() && !handles_.Seal(handle.session, handle.object).session) {
    return stored;
  }
  handles_.Install(handle);
  return absl::OkStatus();
}

void ExecutorSessions::Revoke(const wire::Revoke& revoke) {
  handles_.Revoke(revoke.session(), revoke.object());
  auto session = sessions_.Find(revoke.session());
  if (!session.ok()) return;
  const shared::Handle handle = shared::Handle::Decode(revoke.object());
  absl::MutexLock lock(&(*session)->mu);
  if (handle.kind == shared::HandleKind::kBuffer) {
    auto removed = (*session)->buffers.Remove(revoke.object(), "revoke");
    if (!removed.ok()) return;
    const uint64_t id = removed->memory->id();
    (*session)->streams.ForEach(
        [id](const std::shared_ptr<daemon::StreamEntry>& stream) {
          stream->dispatch_cache.EvictMemory(id);
          stream->transfer_cache.EvictMemory(id);
        });
    ReleaseAfterQueuedWork(**session, revoke.session(), {revoke.object()},
                           removed->memory);
  } else if (handle.kind == shared::HandleKind::kKernel) {
    auto removed = (*session)->kernels.Remove(revoke.object(), "revoke");
    if (!removed.ok()) return;
    const backend::KernelRef kernel = removed->kernel;
    (*session)->streams.ForEach(
        [&](const std::shared_ptr<daemon::StreamEntry>& stream) {
          stream->dispatch_cache.EvictIf(
              [&](const backend::DispatchRef& dispatch) {
                return dispatch->kernel == kernel;
              });
        });
    ReleaseAfterQueuedWork(**session, revoke.session(), {revoke.object()},
                           kernel);
  } else if (handle.kind == shared::HandleKind::kGraphExec) {
    auto removed = (*session)->graph_execs.Remove(revoke.object(), "revoke");
    if (!removed.ok()) return;
    ReleaseAfterQueuedWork(**session, revoke.session(), {revoke.object()},
                           removed->plan);
  }
}

void ExecutorSessions::ReleaseAfterQueuedWork(
    daemon::Session& session, uint64_t id, std::vector<uint64_t> objects,
    std::shared_ptr<const void> keep) {
  if (objects.empty()) return;
  std::vector<std::pair<std::shared_ptr<backend::Queue>, backend::Fence>> waits;
  session.streams.ForEach(
      [&](const std::shared_ptr<daemon::StreamEntry>& stream) {
        waits.emplace_back(stream->queue, stream->published);
      });
  struct Pending {
    std::atomic<size_t> left;
    std::vector<uint64_t> objects;
    std::shared_ptr<const void> keep;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = waits.size() + 1;
  pending->objects = std::move(objects);
  pending->keep = std::move(keep);
  auto one_done = [this, id, pending](absl::Status) {
    if (pending->left.fetch_sub(1) != 1) return;
    pending->keep.reset();
    released_(id, pending->objects);
  };
  // Registered under the session's lock: a completion that runs inline
  // takes no lock of the session's (it only reports).
  for (auto& [queue, fence] : waits) queue->OnComplete(fence, one_done);
  one_done(absl::OkStatus());
}

absl::Status ExecutorSessions::ServeRing(const wire::ServeRing& serve,
                                         shared::UniqueFd region) {
  const uint64_t expected = shared::RingRegionBytes(shared::kRingSubmitBytes,
                                                    shared::kRingCompleteBytes);
  struct stat info;
  if (!region.valid() || serve.region_bytes() != expected ||
      fstat(region.get(), &info) != 0 ||
      static_cast<uint64_t>(info.st_size) != expected) {
    return Broken(absl::StrFormat(
        "a ring region of %u bytes (expected %u) came without a descriptor "
        "of that size",
        serve.region_bytes(), expected));
  }
  void* base = mmap(nullptr, expected, PROT_READ | PROT_WRITE, MAP_SHARED,
                    region.get(), 0);
  if (base == MAP_FAILED) {
    return Refusal(Reason::kMmapFailed,
                   absl::StrFormat("executor: could not map a ring region of "
                                   "%u bytes. Fix: raise the executor's "
                                   "memory limit.",
                                   expected));
  }
  const shared::WireHandle stream = FromWire(serve.stream());
  // From here the ring owns the mapping.
  auto server = std::make_unique<daemon::RingServer>(
      base, expected, [this](daemon::RingServer* ended) { Ended(ended); });
  HRX_RETURN_IF_ERROR(server->PrepareThread());
  auto created = commands_.CreateStreamAt(serve.session(), stream.object,
                                          serve.stream_id());
  if (!created.ok()) {
    server->Abandon();
    return created.status();
  }
  handles_.Install(stream);
  daemon::RingServer* started = server.get();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) started->StopForShutdown();
    rings_.emplace(started,
                   Ring{serve.session(), stream.object, std::move(server)});
  }
  started->Run(
      std::make_shared<daemon::CoreStreamEngine>(
          daemon::StreamUnits{sessions_, commands_, graphs_, refusals_},
          daemon::Caller(handles_, serve.session())),
      stream.object);
  return absl::OkStatus();
}

void ExecutorSessions::CallEvent(
    const wire::EventCall& call,
    std::function<void(absl::StatusOr<bool>)> done) {
  switch (call.op()) {
    case wire::EventCall::OP_QUERY:
      return done(events_.Query(call.session(), call.event()));
    case wire::EventCall::OP_SYNCHRONIZE:
      return events_.Synchronize(call.session(), call.event(),
                                 [done](absl::Status status) {
                                   if (!status.ok()) return done(status);
                                   done(true);
                                 });
    case wire::EventCall::OP_RELEASE: {
      absl::Status released = events_.Release(call.session(), call.event());
      if (!released.ok()) return done(released);
      return done(true);
    }
    default:
      return done(Broken("an event call of no kind"));
  }
}

size_t ExecutorSessions::rings() const {
  absl::MutexLock lock(&mu_);
  return rings_.size();
}

void ExecutorSessions::Ended(daemon::RingServer* ring) {
  uint64_t session = 0;
  uint64_t stream = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = rings_.find(ring);
    if (it == rings_.end()) return;
    session = it->second.session;
    stream = it->second.stream;
    // Destroyed here, under the lock, so the destructor's Await sees the
    // ring gone only once it is.
    rings_.erase(it);
  }
  ring_ended_(session, stream);
}

}  // namespace hrx::executor
