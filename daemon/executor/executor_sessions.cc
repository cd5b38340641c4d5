#include "daemon/executor/executor_sessions.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/core/admin_views.h"
#include "daemon/core/stream_gate.h"
#include "daemon/executor/work_report.h"
#include "daemon/server/core_stream_engine.h"
#include "daemon/server/decode.h"
#include "daemon/server/encode_stats.h"
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

absl::Status HrxdGone() {
  return Refusal(Reason::kDaemonUnreachable,
                 "executor: hrxd's link ended without hrxd ending this "
                 "ring first (hrxd died, was killed, or broke the link's "
                 "protocol). Fix: reconnect once hrxd runs again (hrxctl "
                 "status says whether it does); a restarted hrxd refuses "
                 "this run's handles (previous_daemon_run).");
}

ExecutorSessions::ExecutorSessions(std::shared_ptr<backend::Backend> backend,
                                   Ask ask, RingEnded ring_ended,
                                   Released released)
    : ring_ended_(std::move(ring_ended)),
      released_(std::move(released)),
      backend_(std::move(backend)),
      devices_(backend_),
      // The registry is never asked: sessions come from hrxd (InsertAt).
      sessions_(std::shared_ptr<daemon::TenantRegistry>(
                    daemon::TenantRegistry::BuiltIn(0)),
                daemon::Clock::Real()),
      queues_(devices_, daemon::kDefaultQueueCount),
      commands_(devices_, sessions_, queues_),
      graphs_(sessions_),
      events_(sessions_),
      handles_(std::move(ask)) {}

ExecutorSessions::~ExecutorSessions() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [server, ring] : rings_) server->StopForShutdown(HrxdGone());
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
    const daemon::Limits limits = daemon::LimitsFromBudget(open.budget());
    if (known == nullptr) {
      known = std::make_shared<daemon::Tenant>(open.tenant(),
                                               daemon::Role::kClient, limits);
    } else {
      known->SetLimits(limits);  // an admin's change since the last session
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
  if (!removed.ok()) {
    // Never opened here (or ended already): nothing of it runs here, and
    // hrxd's close waits for the word.
    released_(end.session(), {}, /*session_ended=*/true);
    return;
  }
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
                           std::move(kept), /*session_ended=*/true, cancelled);
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
  // An installed handle is one hrxd holds now: whatever an older
  // generation left in its slot (its free's revocation may still be on
  // its way) is gone, released after the work that may use it.
  if (!handles_.Seal(handle.session, handle.object).session) {
    daemon::Deferred after;
    {
      absl::MutexLock lock(&session->mu);
      RemoveAndRelease(*session, handle.session, handle.object,
                       /*report_missing=*/false, after);
    }
    daemon::RunDeferred(after);
  }
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
  if (!session.ok()) {
    // Its end already reported everything it held.
    released_(revoke.session(), {revoke.object()}, /*session_ended=*/false);
    return;
  }
  daemon::Deferred after;
  {
    absl::MutexLock lock(&(*session)->mu);
    RemoveAndRelease(**session, revoke.session(), revoke.object(),
                     /*report_missing=*/true, after);
  }
  daemon::RunDeferred(after);
}

void ExecutorSessions::RemoveAndRelease(daemon::Session& session, uint64_t id,
                                        uint64_t object, bool report_missing,
                                        daemon::Deferred& after) {
  // By slot: the generation there may be older than `object`'s.
  const shared::Handle wanted = shared::Handle::Decode(object);
  std::shared_ptr<const void> keep;
  uint64_t found = 0;
  auto take = [&](auto& table, auto keep_of) {
    table.ForEachHandle([&](uint64_t handle, const auto&) {
      if (shared::Handle::Decode(handle).slot == wanted.slot) found = handle;
    });
    if (found == 0) return;
    auto removed = table.Remove(found, "revoke");
    if (removed.ok()) keep = keep_of(*removed);
  };
  if (wanted.kind == shared::HandleKind::kBuffer) {
    take(session.buffers, [](const daemon::BufferEntry& entry) {
      return std::shared_ptr<const void>(entry.memory);
    });
    if (keep != nullptr) {
      const uint64_t memory =
          static_cast<const backend::Memory*>(keep.get())->id();
      session.streams.ForEach(
          [memory](const std::shared_ptr<daemon::StreamEntry>& stream) {
            stream->dispatch_cache.EvictMemory(memory);
            stream->transfer_cache.EvictMemory(memory);
          });
    }
  } else if (wanted.kind == shared::HandleKind::kKernel) {
    take(session.kernels, [](const daemon::KernelEntry& entry) {
      return std::shared_ptr<const void>(entry.kernel);
    });
    if (keep != nullptr) {
      const auto* kernel = static_cast<const backend::Kernel*>(keep.get());
      session.streams.ForEach(
          [kernel](const std::shared_ptr<daemon::StreamEntry>& stream) {
            stream->dispatch_cache.EvictIf(
                [kernel](const backend::DispatchRef& dispatch) {
                  return dispatch->kernel.get() == kernel;
                });
          });
    }
  } else if (wanted.kind == shared::HandleKind::kGraphExec) {
    take(session.graph_execs, [](const daemon::GraphExecEntry& entry) {
      return std::shared_ptr<const void>(entry.plan);
    });
  }
  // Reported even where nothing was held (an install that failed, or an
  // older generation already replaced): hrxd keeps what it gave until then.
  std::vector<uint64_t> objects;
  if (report_missing || found == object) objects.push_back(object);
  if (found != 0 && found != object) objects.push_back(found);
  ReleaseAfterQueuedWork(session, id, std::move(objects), std::move(keep),
                         /*session_ended=*/false, after);
}

void ExecutorSessions::ReleaseAfterQueuedWork(daemon::Session& session,
                                              uint64_t id,
                                              std::vector<uint64_t> objects,
                                              std::shared_ptr<const void> keep,
                                              bool session_ended,
                                              daemon::Deferred& after) {
  if (objects.empty() && !session_ended) return;
  std::vector<std::shared_ptr<daemon::StreamEntry>> streams;
  session.streams.ForEach(
      [&](const std::shared_ptr<daemon::StreamEntry>& stream) {
        streams.push_back(stream);
      });
  struct Pending {
    std::atomic<size_t> left;
    std::vector<uint64_t> objects;
    std::shared_ptr<const void> keep;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = streams.size() + 1;
  pending->objects = std::move(objects);
  pending->keep = std::move(keep);
  auto one_done = [this, id, pending, session_ended](absl::Status) {
    if (pending->left.fetch_sub(1) != 1) return;
    pending->keep.reset();
    released_(id, pending->objects, session_ended);
  };
  // In each stream's order: behind a batch suspended at the staging bound
  // (its later steps may use the object), then after the stream's last
  // fence at that point. Cancelled (the session closing), the batch
  // enqueues nothing more, so its last fence is the one to wait for.
  for (const auto& stream : streams) {
    daemon::RunInOrder(
        *stream,
        [stream, one_done](absl::Status, daemon::Deferred& later) {
          later.push_back([queue = stream->queue, fence = stream->published,
                           one_done] { queue->OnComplete(fence, one_done); });
        },
        after);
  }
  after.push_back([one_done] { one_done(absl::OkStatus()); });
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
    if (stopping_) started->StopForShutdown(HrxdGone());
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

void ExecutorSessions::Call(const wire::EventCall& call, CallDone done) {
  const uint64_t session = call.session();
  auto status_only = [done](absl::Status status) { done(status, {}); };
  wire::EventAnswer answer;
  switch (call.op()) {
    case wire::EventCall::OP_QUERY: {
      auto complete = events_.Query(session, call.event());
      if (complete.ok()) answer.set_complete(*complete);
      return done(complete.status(), std::move(answer));
    }
    case wire::EventCall::OP_SYNCHRONIZE:
      return events_.Synchronize(session, call.event(), status_only);
    case wire::EventCall::OP_RELEASE:
      return status_only(events_.Release(session, call.event()));
    case wire::EventCall::OP_STREAM_STATS: {
      auto stats = commands_.GetStreamStats(session, call.stream());
      if (stats.ok()) daemon::EncodeStreamStats(*stats, answer.mutable_stats());
      return done(stats.status(), std::move(answer));
    }
    case wire::EventCall::OP_STREAM_POLL: {
      auto complete = commands_.Poll(session, call.stream());
      if (complete.ok()) answer.set_complete(*complete);
      return done(complete.status(), std::move(answer));
    }
    case wire::EventCall::OP_STREAM_SYNCHRONIZE:
      return commands_.Synchronize(session, call.stream(), status_only);
    case wire::EventCall::OP_STREAM_DESTROY:
      return commands_.DestroyStream(session, call.stream(), status_only);
    default:
      return status_only(Broken("a call of no kind"));
  }
}

absl::Duration ExecutorSessions::LongestStall(absl::Time now) const {
  return queues_.LongestStall(now);
}

std::vector<wire::HeldUsage> ExecutorSessions::Held() const {
  std::vector<wire::HeldUsage> held;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, tenant] : tenants_) {
    const daemon::UsageCounts usage = tenant->usage();
    auto count = [&](daemon::Resource resource) {
      return usage[static_cast<size_t>(resource)];
    };
    wire::HeldUsage& entry = held.emplace_back();
    entry.set_tenant(name);
    entry.set_inflight_commands(count(daemon::Resource::kInflightCommands));
    entry.set_reply_bytes(count(daemon::Resource::kReplyBytes));
    entry.set_events(count(daemon::Resource::kEvents));
  }
  return held;
}

wire::WorkTotals ExecutorSessions::Work() const {
  wire::WorkTotals work;
  EncodeWork(daemon::SumWork(sessions_), &work);
  return work;
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
    // Told under the lock (a send never waits), so the destructor cannot
    // finish while it is told; destroyed here, so the destructor's Await
    // sees the ring gone only once it is.
    ring_ended_(session, stream);
    rings_.erase(it);
  }
}

}  // namespace hrx::executor
