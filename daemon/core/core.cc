#include "daemon/core/core.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include <sys/random.h>
#include <unistd.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "shared/bytes.h"
#include "shared/quote.h"
#include "daemon/core/descriptor_holds.h"
#include "daemon/core/session.h"
#include "shared/status_macros.h"
#include "shared/refusal.h"

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

// Observers may look, never touch.
absl::Status RequireWriter(const Session& session, std::string_view what) {
  if (session.tenant->role() != hrx::v1::ROLE_OBSERVER) return absl::OkStatus();
  return Refusal(Reason::kObserverReadOnly,absl::StrFormat(
      "%s: tenant \"%s\" (%s) has the observer role, "
      "which may only inspect. Fix: run the client as a uid of a client "
      "tenant, or change the tenant's role in the config.",
      what, session.tenant->name(), session.Who()));
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
      tenants_(options.tenants != nullptr
                   ? options.tenants
                   : std::shared_ptr<TenantRegistry>(
                         TenantRegistry::BuiltIn(geteuid()))),
      ticket_lifetime_(options.ticket_lifetime),
      started_(absl::Now()),
      queues_(*backend_, options.queue_count),
      remote_session_lease_(options.remote_session_lease),
      track_descriptions_(ExportDescriptionsCanBeTracked()),
      watcher_(std::make_unique<ProcessWatcher>(
          [this](pid_t pid) { ProcessExited(pid); })) {
  if (options.housekeeping_interval > absl::ZeroDuration()) {
    housekeeper_ = std::make_unique<Ticker>(
        options.housekeeping_interval, [this] { Housekeep(absl::Now()); });
  }
}

Core::~Core() {
  housekeeper_.reset();
  watcher_.reset();
  Drain();
}

void Core::ProcessExited(pid_t pid) {
  // The process died without closing its sessions: close them now.
  std::vector<uint64_t> orphans;
  {
    absl::MutexLock lock(&mu_);
    sessions_.ForEachHandle(
        [&](uint64_t handle, const std::shared_ptr<Session>& s) {
          if (s->identity.pid == pid) orphans.push_back(handle);
        });
  }
  for (uint64_t handle : orphans) {
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
  // Its mappings are gone with it: the memory they kept can go.
  std::vector<Detached> released;
  {
    absl::MutexLock lock(&mu_);
    auto it = detached_.find(pid);
    if (it != detached_.end()) {
      released = std::move(it->second);
      detached_.erase(it);
    }
  }
}

absl::StatusOr<ChargeRef> Core::AdmitConnection(const PeerIdentity& caller) {
  std::shared_ptr<Tenant> tenant = tenants_->Resolve(caller);
  if (tenant == nullptr) {
    return Refusal(Reason::kUnknownCaller, "no tenant takes this caller. Fix: list it in the "
        "config.");
  }
  return tenant->Reserve(
      Resource::kConnections, 1, "connect",
      absl::StrFormat("uid %u, pid %u", caller.uid, caller.pid));
}

void Core::ConnectionClosed(uint64_t connection) {
  std::vector<uint64_t> bound;
  {
    absl::MutexLock lock(&mu_);
    sessions_.ForEachHandle(
        [&](uint64_t handle, const std::shared_ptr<Session>& s) {
          if (s->identity.connection == connection) bound.push_back(handle);
        });
  }
  for (uint64_t handle : bound) {
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
}

void Core::SweepTicketsLocked(absl::Time now) {
  size_t spent = 0;
  for (auto& [ticket, entry] : tickets_) {
    if (!entry.used && now > entry.deadline) {
      entry.used = true;  // expired: its descriptor and hold go now
      entry.expired = true;
      entry.fd.Reset();
      entry.memory.reset();
      entry.charge.reset();
    }
    if (entry.used) ++spent;
  }
  absl::erase_if(tickets_, [&](const auto& entry) {
    return entry.second.used && (spent > kMaxTicketTombstones ||
                                 entry.second.deadline + absl::Minutes(1) < now);
  });
}

void Core::Housekeep(absl::Time now) {
  ProbeLingering();
  std::vector<uint64_t> lapsed;
  {
    absl::MutexLock lock(&mu_);
    SweepTicketsLocked(now);
    const int64_t oldest = absl::ToUnixNanos(now - remote_session_lease_);
    sessions_.ForEachHandle(
        [&](uint64_t handle, const std::shared_ptr<Session>& s) {
          if (s->identity.remote && s->last_call_ns.load() < oldest) {
            lapsed.push_back(handle);
          }
        });
  }
  for (uint64_t handle : lapsed) {
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
}

Core::DetachedExports Core::detached_exports(const std::string& tenant) const {
  DetachedExports total;
  auto add = [&](const Detached& detached) {
    if (detached.tenant != tenant) return;
    ++total.count;
    total.bytes += detached.entry.memory->size();
  };
  absl::MutexLock lock(&mu_);
  for (const Detached& detached : lingering_) add(detached);
  for (const auto& [pid, list] : detached_) {
    for (const Detached& detached : list) add(detached);
  }
  return total;
}

void Core::Retire(ExportEntry entry, const std::string& tenant, pid_t pid) {
  if (entry.tracked) {
    if (ExportDescriptionsGone(*entry.memory)) return;  // released here
    absl::MutexLock lock(&mu_);
    lingering_.push_back(Detached{tenant, std::move(entry)});
    return;
  }
  if (pid <= 0) return;  // nothing to watch: released here
  {
    absl::MutexLock lock(&mu_);
    detached_[pid].push_back(Detached{tenant, std::move(entry)});
  }
  watcher_->Watch(pid);  // at once if it has already exited
}

void Core::ProbeLingering() {
  std::vector<Detached> probing;
  {
    absl::MutexLock lock(&mu_);
    probing.swap(lingering_);
  }
  std::vector<Detached> held;
  for (Detached& detached : probing) {
    if (!ExportDescriptionsGone(*detached.entry.memory)) {
      held.push_back(std::move(detached));
    }
  }
  probing.clear();  // the released ones go, outside the lock
  absl::MutexLock lock(&mu_);
  for (Detached& detached : held) lingering_.push_back(std::move(detached));
}

absl::StatusOr<std::shared_ptr<Session>> Core::FindSession(
    uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto found = sessions_.Find(session, "session");
  if (!found.ok()) return found.status();
  return **found;
}

absl::StatusOr<uint64_t> Core::OpenSession(const std::string& client_name,
                                           const PeerIdentity& caller) {
  std::shared_ptr<Tenant> tenant = tenants_->Resolve(caller);
  if (tenant == nullptr) {
    return Refusal(Reason::kUnknownCertificate,absl::StrFormat(
        "open session: no tenant lists certificate "
        "subject \"%s\". Fix: add it to a tenant's certificate_subjects.",
        caller.certificate_subject));
  }
  if (client_name.size() > kMaxClientNameBytes) {
    return Refusal(Reason::kClientNameTooLong,absl::StrFormat(
        "open session: client name is %u bytes, the "
        "limit is %u. Fix: send a shorter client_name.",
        client_name.size(), kMaxClientNameBytes));
  }
  // Names reach operators' terminals (hrxctl sessions): no control bytes.
  for (size_t i = 0; i < client_name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(client_name[i]);
    if (c < 0x20 || c == 0x7f) {
      return Refusal(Reason::kBadClientName,absl::StrFormat(
          "open session: byte %u of the client name is "
          "control character 0x%02x. Fix: send a client_name of printable "
          "characters.",
          i, c));
    }
  }
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      tenant->Reserve(Resource::kSessions, 1, "open session",
                      caller.remote
                          ? absl::StrFormat("certificate \"%s\"",
                                            caller.certificate_subject)
                          : absl::StrFormat("uid %u, pid %u", caller.uid,
                                            caller.pid)));
  absl::ReleasableMutexLock lock(&mu_);
  if (sessions_.size() >= kMaxSessions) {
    return Refusal(Reason::kTooManySessions,absl::StrFormat(
        "open session: %u sessions are open, the limit is "
        "%u. Fix: close idle sessions (hrxctl status shows the count).",
        sessions_.size(), kMaxSessions));
  }
  auto session = std::make_shared<Session>(client_name, caller, tenant,
                                          std::move(charge));
  session->last_call_ns.store(absl::ToUnixNanos(absl::Now()));
  const uint64_t handle = sessions_.Insert(std::move(session));
  lock.Release();
  watcher_->Watch(caller.pid);  // pid 0 (not visible) is never watched
  return handle;
}

absl::Status Core::VerifyCaller(uint64_t session, const PeerIdentity& caller) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  const PeerIdentity& opener = owner->identity;
  // A local session belongs to its connection (which carries the uid and
  // pid read when it was accepted); a remote one to its certificate.
  const bool mine =
      opener.remote
          ? caller.remote &&
                opener.certificate_subject == caller.certificate_subject
          : !caller.remote && opener.connection == caller.connection &&
                opener.uid == caller.uid && opener.pid == caller.pid;
  if (mine) {
    owner->last_call_ns.store(absl::ToUnixNanos(absl::Now()));
    return absl::OkStatus();
  }
  return Refusal(Reason::kSessionNotYours,absl::StrFormat(
      "the session was opened by %s on another "
      "connection; this call comes from %s. Fix: open a session on the "
      "calling connection; session handles are not transferable.",
      owner->Who(),
      caller.remote ? absl::StrFormat("certificate \"%s\"",
                                      caller.certificate_subject)
                    : absl::StrFormat("uid %u, pid %u", caller.uid,
                                      caller.pid)));
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
    absl::erase_if(grants_, [&](const auto& entry) {
      return entry.second.owner_session == session;
    });
    // Unredeemed tickets die with the session, descriptors and all.
    absl::erase_if(tickets_, [&](const auto& entry) {
      return entry.second.session == session;
    });
  }
  CloseSummary summary;
  std::vector<std::pair<backend::Queue*, backend::Fence>> waits;
  absl::flat_hash_map<uint64_t, ExportEntry> detached;
  Deferred cancelled;
  {
    absl::MutexLock lock(&closing->mu);
    summary.freed_buffers = closing->buffers.size();
    summary.freed_streams = closing->streams.size();
    closing->streams.Clear([&](std::shared_ptr<StreamEntry> stream) {
      // Work parked behind a suspended batch never runs; the batch itself
      // stops where it is when it resumes.
      stream->closed = true;
      while (!stream->parked.empty()) {
        GatedOp op = std::move(stream->parked.front());
        stream->parked.pop_front();
        op(Refusal(Reason::kSessionClosed, "the session closed before this operation "
               "ran. Fix: open a new session."),
           cancelled);
      }
      waits.emplace_back(stream->queue, stream->published);
    });
    // Buffers, kernels, events and pools go with the session; queued
    // commands hold what they use until they run.
    closing->buffers.Clear([](BufferEntry) {});
    closing->kernels.Clear([](KernelEntry) {});
    closing->graph_execs.Clear([](GraphExecEntry) {});
    closing->events.clear();
    detached = std::move(closing->exports);
    closing->exports.clear();
  }
  RunDeferred(cancelled);
  // Descriptors the process received may still be open or mapped, there or
  // in a process it handed them to: their memory stays charged until they
  // are gone.
  for (auto& [id, entry] : detached) {
    Retire(std::move(entry), closing->tenant->name(), closing->identity.pid);
  }
  // A process with nothing left here needs no pidfd (one descriptor each):
  // its other sessions, if it opens more, are bound to their connections.
  const pid_t pid = closing->identity.pid;
  if (pid > 0) {
    bool still_needed = false;
    {
      absl::MutexLock lock(&mu_);
      still_needed = detached_.contains(pid);
      sessions_.ForEach([&](const std::shared_ptr<Session>& s) {
        still_needed = still_needed || s->identity.pid == pid;
      });
    }
    if (!still_needed) watcher_->Unwatch(pid);
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

absl::Status Core::SetQueueCount(uint64_t session, uint32_t count) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  if (owner->tenant->role() != hrx::v1::ROLE_ADMIN) {
    return Refusal(Reason::kRoleRequired,absl::StrFormat(
        "set queue count: the pool is shared by every tenant, "
        "and tenant \"%s\" is not an admin. Fix: ask an admin, or start hrxd "
        "with --queue_count.",
        owner->tenant->name()));
  }
  return queues_.SetCapacity(count);
}

absl::Status Core::RequireRole(const PeerIdentity& caller, hrx::v1::Role role) {
  std::shared_ptr<Tenant> tenant = tenants_->Resolve(caller);
  const hrx::v1::Role has =
      tenant != nullptr ? tenant->role() : hrx::v1::ROLE_CLIENT;
  const bool allowed = has == hrx::v1::ROLE_ADMIN ||
                       (role == hrx::v1::ROLE_OBSERVER &&
                        has == hrx::v1::ROLE_OBSERVER);
  if (allowed) return absl::OkStatus();
  return Refusal(Reason::kRoleRequired,absl::StrFormat(
      "uid %u (tenant \"%s\") has role %s; this needs %s. "
      "Fix: run it as a uid of a tenant with that role in the config.",
      caller.uid, tenant != nullptr ? tenant->name() : "none",
      hrx::v1::Role_Name(has), hrx::v1::Role_Name(role)));
}

absl::Status Core::RequireKnownCaller(const PeerIdentity& caller) const {
  if (tenants_->Resolve(caller) != nullptr) return absl::OkStatus();
  return Refusal(Reason::kUnknownCertificate,absl::StrFormat(
      "no tenant lists certificate subject \"%s\". Fix: "
      "add it to a tenant's certificate_subjects.",
      caller.certificate_subject));
}

std::vector<TenantUsage> Core::ListTenants() const {
  std::vector<TenantUsage> list;
  absl::flat_hash_map<const Tenant*, uint64_t> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions_.ForEach([&](const std::shared_ptr<Session>& s) {
      ++sessions[s->tenant.get()];
    });
  }
  for (const std::shared_ptr<Tenant>& tenant : tenants_->All()) {
    TenantUsage usage;
    usage.name = tenant->name();
    usage.role = tenant->role();
    usage.limits = tenant->limits();
    usage.usage = tenant->usage();
    usage.sessions = sessions[tenant.get()];
    usage.load_kernels = tenant->load_kernels();
    const DetachedExports detached = detached_exports(tenant->name());
    usage.detached_exports = detached.count;
    usage.detached_export_bytes = detached.bytes;
    list.push_back(std::move(usage));
  }
  return list;
}

std::vector<SessionSummary> Core::ListSessions(const std::string& tenant) const {
  std::vector<std::pair<uint64_t, std::shared_ptr<Session>>> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions_.ForEachHandle(
        [&](uint64_t handle, const std::shared_ptr<Session>& s) {
          if (tenant.empty() || s->tenant->name() == tenant) {
            sessions.emplace_back(handle, s);
          }
        });
  }
  std::vector<SessionSummary> list;
  for (auto& [handle, session] : sessions) {
    SessionSummary summary;
    summary.id = handle;
    summary.tenant = session->tenant->name();
    summary.client_name = session->client_name;
    summary.uid = session->identity.uid;
    summary.pid = static_cast<uint32_t>(session->identity.pid);
    absl::MutexLock lock(&session->mu);
    summary.buffers = session->buffers.size();
    summary.streams = session->streams.size();
    summary.kernels = session->kernels.size();
    session->buffers.ForEach([&](const BufferEntry& buffer) {
      summary.buffer_bytes += buffer.memory->size();
    });
    list.push_back(std::move(summary));
  }
  return list;
}

std::vector<BufferSummary> Core::ListBuffers(const std::string& tenant,
                                             uint64_t session) const {
  std::vector<std::pair<uint64_t, std::shared_ptr<Session>>> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions_.ForEachHandle(
        [&](uint64_t handle, const std::shared_ptr<Session>& s) {
          if ((tenant.empty() || s->tenant->name() == tenant) &&
              (session == 0 || session == handle)) {
            sessions.emplace_back(handle, s);
          }
        });
  }
  std::vector<BufferSummary> list;
  for (auto& [handle, owner] : sessions) {
    absl::MutexLock lock(&owner->mu);
    owner->buffers.ForEachHandle(
        [&](uint64_t buffer, const BufferEntry& entry) {
          list.push_back(BufferSummary{
              handle, owner->tenant->name(), buffer, entry.memory->size(),
              entry.memory->id(),
              entry.memory->kind() == backend::MemoryKind::kHostCoherent});
        });
  }
  return list;
}

absl::Status Core::SetBudget(const std::string& tenant, const Limits& limits) {
  std::shared_ptr<Tenant> found = tenants_->Find(tenant);
  if (found == nullptr) {
    return Refusal(Reason::kUnknownTenant,absl::StrFormat(
        "set budget: there is no tenant %s. Fix: use a "
        "name from hrxctl tenants.",
        shared::QuoteForMessage(tenant)));
  }
  found->SetLimits(limits);
  return absl::OkStatus();
}

void Core::EvictSession(
    uint64_t session, std::function<void(absl::StatusOr<CloseSummary>)> done) {
  CloseSession(session, std::move(done));
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
      status.suspended_streams += stream->suspended ? 1 : 0;
      status.parked_operations += stream->parked.size();
    });
  }
  return status;
}

absl::StatusOr<BufferInfo> Core::Allocate(uint64_t session, uint64_t bytes,
                                          AllocationKind kind,
                                          uint64_t stream) {
  bytes = std::max<uint64_t>(bytes, 1);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "allocate"));
  const Resource resource = kind == AllocationKind::kShared
                                ? Resource::kSharedBytes
                                : Resource::kDeviceBytes;
  // Each live handle counts (on the CPU backend each also holds a
  // descriptor), whatever its size.
  HRX_ASSIGN_OR_RETURN(
      ChargeRef handle_charge,
      owner->tenant->Reserve(Resource::kBuffers, 1, "allocate", owner->Who()));
  // The reservation rides on the memory itself (below), so it is released
  // only when the last holder — the buffer table, a pool, or a queued
  // command — lets go.
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(resource, bytes,
                             absl::StrFormat("allocate %s",
                                             shared::FormatBytes(bytes)),
                             owner->Who()));
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
    MemoryRef raw = *std::move(fresh);
    backend::Memory* address = raw.get();
    memory = MemoryRef(address, [raw = std::move(raw), charge](
                                    backend::Memory*) mutable {
      raw.reset();  // the memory first, then its reservation
      charge.reset();
    });
  }
  const uint64_t allocation_id = memory->id();
  absl::MutexLock lock(&owner->mu);
  const uint64_t handle = owner->buffers.Insert(
      BufferEntry{std::move(memory), origin, std::move(handle_charge)});
  return BufferInfo{handle, bytes, allocation_id};
}

absl::Status Core::Free(uint64_t session, uint64_t buffer) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(BufferEntry entry,
                       owner->buffers.Remove(buffer, "free buffer"));
  RevokeGrantsOf(session, entry.memory.get());
  const uint64_t id = entry.memory->id();
  owner->streams.ForEach([id](const std::shared_ptr<StreamEntry>& stream) {
    stream->dispatch_cache.EvictMemory(id);
    stream->transfer_cache.EvictMemory(id);
  });
  // Budget-charged memory is never pooled: a tenant with a device budget
  // gets its bytes back once the last queued use completes.
  if (entry.memory->kind() == backend::MemoryKind::kDevice &&
      owner->tenant->Unlimited(Resource::kDeviceBytes)) {
    owner->allocation_pool.Give(std::move(entry.memory));
  }
  return absl::OkStatus();
}

void Core::RevokeGrantsOf(uint64_t owner_session,
                          const backend::Memory* memory) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(grants_, [&](const auto& entry) {
    return entry.second.owner_session == owner_session &&
           (memory == nullptr || entry.second.memory.get() == memory);
  });
}

absl::StatusOr<uint64_t> Core::Grant(uint64_t session, uint64_t buffer,
                                     const std::string& tenant,
                                     uint64_t grantee_session) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "grant buffer"));
  if (tenant.empty() == (grantee_session == 0)) {
    return Refusal(Reason::kBadGrantee, "grant buffer: name exactly one grantee, a tenant or a "
        "session. Fix: set tenant or session in the request.");
  }
  if (!tenant.empty() && tenants_->Find(tenant) == nullptr) {
    return Refusal(Reason::kUnknownTenant,absl::StrFormat(
        "grant buffer: there is no tenant %s. Fix: use a "
        "name from hrxctl tenants.",
        shared::QuoteForMessage(tenant)));
  }
  if (grantee_session != 0 && !FindSession(grantee_session).ok()) {
    return Refusal(Reason::kUnknownSession,absl::StrFormat(
        "grant buffer: there is no open session %016x. Fix: "
        "grant to a session that is open (or to its tenant).",
        grantee_session));
  }
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(Resource::kGrants, 1, "grant buffer", owner->Who()));
  MemoryRef memory;
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(BufferEntry * entry,
                         owner->buffers.Find(buffer, "grant buffer"));
    memory = entry->memory;
  }
  uint64_t id = 0;
  while (id == 0) {
    HRX_CHECK(getrandom(&id, sizeof(id), 0) == sizeof(id));
  }
  absl::MutexLock lock(&mu_);
  grants_[id] = GrantEntry{session, std::move(memory), tenant, grantee_session,
                           std::move(charge)};
  return id;
}

absl::StatusOr<BufferInfo> Core::Import(uint64_t session, uint64_t grant) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> importer, FindSession(session));
  // An import is a handle that can be written through and exported.
  HRX_RETURN_IF_ERROR(RequireWriter(*importer, "import buffer"));
  HRX_ASSIGN_OR_RETURN(ChargeRef handle_charge,
                       importer->tenant->Reserve(Resource::kBuffers, 1,
                                                 "import", importer->Who()));
  MemoryRef memory;
  {
    absl::MutexLock lock(&mu_);
    auto it = grants_.find(grant);
    if (it == grants_.end()) {
      return Refusal(Reason::kUnknownGrant,absl::StrFormat(
          "import: grant %016x does not exist or was revoked. "
          "Fix: ask the owner for a current grant.",
          grant));
    }
    const GrantEntry& entry = it->second;
    const bool allowed = entry.grantee_session != 0
                             ? entry.grantee_session == session
                             : entry.tenant == importer->tenant->name();
    if (!allowed) {
      return Refusal(Reason::kGrantNotYours,absl::StrFormat(
          "import: grant %016x is for %s; this session "
          "belongs to tenant \"%s\". Fix: import it from the grantee.",
          grant,
          entry.grantee_session != 0
              ? absl::StrFormat("session %016x", entry.grantee_session)
              : absl::StrFormat("tenant \"%s\"", entry.tenant),
          importer->tenant->name()));
    }
    memory = entry.memory;
  }
  const uint64_t bytes = memory->size();
  const uint64_t allocation_id = memory->id();
  absl::MutexLock lock(&importer->mu);
  // The importer holds the memory but is not charged for it: the owner's
  // reservation rides on the memory until every holder has let go.
  const uint64_t handle = importer->buffers.Insert(
      BufferEntry{std::move(memory), 0, std::move(handle_charge)});
  return BufferInfo{handle, bytes, allocation_id};
}

absl::Status Core::Revoke(uint64_t session, uint64_t grant) {
  absl::MutexLock lock(&mu_);
  auto it = grants_.find(grant);
  if (it == grants_.end() || it->second.owner_session != session) {
    return Refusal(Reason::kUnknownGrant,absl::StrFormat(
        "revoke: this session has no grant %016x. Fix: revoke "
        "grants this session made.",
        grant));
  }
  grants_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<ExportTicket> Core::Export(uint64_t session, uint64_t buffer,
                                          backend::ExportKind kind) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  // A mapping writes the memory: observers may not have one.
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "export buffer"));
  // Every descriptor handed out counts until it is released.
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(Resource::kExports, 1, "export", owner->Who()));
  MemoryRef memory;
  uint64_t export_id = 0;
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(BufferEntry * entry,
                         owner->buffers.Find(buffer, "export buffer"));
    memory = entry->memory;
    export_id = owner->next_export_id++;
  }
  // Shared memory goes out as a description of its own, so that its last
  // close can be known (descriptor_holds.h).
  const bool tracked = kind == backend::ExportKind::kShm && track_descriptions_;
  shared::UniqueFd fd;
  if (tracked) {
    HRX_ASSIGN_OR_RETURN(fd, OpenExportDescription(*memory));
  } else {
    HRX_ASSIGN_OR_RETURN(int raw_fd, memory->ExportFd(kind));
    fd.Reset(raw_fd);
  }
  std::string ticket(16, '\0');
  HRX_CHECK(getrandom(ticket.data(), ticket.size(), 0) ==
            static_cast<ssize_t>(ticket.size()));
  const absl::Time now = absl::Now();
  ExportTicket result{ticket, export_id, memory->size(), 0};
  absl::MutexLock lock(&mu_);
  SweepTicketsLocked(now);
  tickets_[ticket] =
      TicketEntry{session,          export_id,     std::move(memory),
                  std::move(fd),    std::move(charge),
                  now + ticket_lifetime_, false, false, tracked};
  return result;
}

absl::StatusOr<shared::UniqueFd> Core::Redeem(std::string_view ticket,
                                              const PeerIdentity& peer) {
  if (peer.pid <= 0) {
    // The kernel cannot show this peer's process (another PID namespace):
    // nothing would tell the exporter from another process of its uid.
    return Refusal(Reason::kPeerNotVisible,absl::StrFormat(
        "redeem: the side channel peer (uid %u) is in a PID "
        "namespace hrxd cannot see, so the ticket's process cannot be "
        "checked. Fix: run hrxd in its clients' PID namespace (or a parent "
        "of it), or move data through Upload and Read instead of mappings.",
        peer.uid));
  }
  uint64_t session = 0;
  uint64_t export_id = 0;
  MemoryRef memory;
  ChargeRef charge;
  bool tracked = false;
  shared::UniqueFd fd;
  {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(std::string(ticket));
    if (it == tickets_.end()) {
      return Refusal(Reason::kUnknownTicket, "redeem: no such export ticket. Fix: redeem the "
          "ticket Buffers.Export returned, on the side channel it named.");
    }
    TicketEntry& entry = it->second;
    if (entry.used && !entry.expired) {
      return Refusal(Reason::kTicketUsed, "redeem: the ticket was already redeemed; tickets are "
          "single-use. Fix: call Buffers.Export again for another descriptor.");
    }
    if (entry.expired || absl::Now() > entry.deadline) {
      entry.used = true;
      entry.expired = true;
      entry.fd.Reset();
      entry.memory.reset();  // a spent ticket holds nothing
      entry.charge.reset();
      return Refusal(Reason::kTicketExpired,absl::StrFormat(
          "redeem: the ticket expired %s ago (tickets live "
          "%s). Fix: redeem promptly after Buffers.Export, or export again.",
          absl::FormatDuration(absl::Now() - entry.deadline),
          absl::FormatDuration(ticket_lifetime_)));
    }
    session = entry.session;
    export_id = entry.export_id;
    memory = std::move(entry.memory);  // a spent ticket holds nothing
    charge = std::move(entry.charge);
    tracked = entry.tracked;
    // Checked below, outside this lock; the ticket is spent either way, so a
    // wrong peer cannot probe it twice.
    entry.used = true;
    fd = std::move(entry.fd);
  }
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  const PeerIdentity& opener = owner->identity;
  if (opener.pid != peer.pid || opener.uid != peer.uid) {
    return Refusal(Reason::kTicketNotYours,absl::StrFormat(
        "redeem: the ticket belongs to a session of %s; "
        "the side channel peer is uid %u, pid %u. Fix: redeem tickets in the "
        "process that exported them; share buffers with a grant.",
        owner->Who(), peer.uid, peer.pid));
  }
  absl::MutexLock lock(&owner->mu);
  owner->exports[export_id] =
      ExportEntry{std::move(memory), std::move(charge), tracked};
  return fd;
}

absl::Status Core::ReleaseExport(uint64_t session, uint64_t export_id) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  ExportEntry released;
  {
    absl::MutexLock lock(&owner->mu);
    auto it = owner->exports.find(export_id);
    if (it == owner->exports.end()) {
      return Refusal(Reason::kUnknownExport,absl::StrFormat(
          "release export %u: this session holds no such "
          "mapping. Fix: release each mapping once.",
          export_id));
    }
    released = std::move(it->second);
    owner->exports.erase(it);
  }
  // The client says it is done; the memory goes when its descriptor has.
  Retire(std::move(released), owner->tenant->name(), owner->identity.pid);
  return absl::OkStatus();
}

absl::StatusOr<KernelInfo> Core::LoadKernel(
    uint64_t session, std::string_view code, const std::string& entry,
    const backend::KernelSignature* declared) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "load kernel"));
  // Checked before a byte of the object is mapped: on the CPU backend
  // loading runs the object's code (its constructors) inside hrxd.
  if (!owner->tenant->load_kernels()) {
    return Refusal(Reason::kKernelLoadingNotAllowed,absl::StrFormat(
        "load kernel %s: tenant \"%s\" (%s) may "
        "not load kernels; a kernel runs with the daemon's privileges. Fix: "
        "set load_kernels: true on the tenant in the config, for tenants "
        "trusted as the daemon's own user.",
        entry, owner->tenant->name(), owner->Who()));
  }
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(Resource::kKernels, 1,
                             absl::StrFormat("load kernel %s", entry),
                             owner->Who()));
  {
    absl::MutexLock lock(&owner->mu);
    if (owner->kernels.size() >= kMaxKernelsPerSession) {
      return Refusal(Reason::kTooManyKernels,absl::StrFormat(
          "load kernel %s: the session holds %u kernels, "
          "the limit is %u. Fix: unload kernels it no longer uses.",
          entry, owner->kernels.size(), kMaxKernelsPerSession));
    }
  }
  HRX_ASSIGN_OR_RETURN(backend::KernelRef kernel,
                       backend_->LoadKernel(code, entry));
  if (declared != nullptr &&
      (declared->args != kernel->signature().args ||
       declared->workgroup_size != kernel->signature().workgroup_size)) {
    return Refusal(Reason::kSignatureMismatch,absl::StrFormat(
        "load kernel %s: declared %s but the module "
        "declares %s. Fix: declare the kernel's real signature, or none to "
        "use the module's.",
        entry, SignatureText(*declared), SignatureText(kernel->signature())));
  }
  absl::MutexLock lock(&owner->mu);
  KernelInfo info{0, entry, kernel->signature()};
  info.handle =
      owner->kernels.Insert(KernelEntry{std::move(kernel), std::move(charge)});
  return info;
}

absl::Status Core::UnloadKernel(uint64_t session, uint64_t kernel) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(KernelEntry entry,
                       owner->kernels.Remove(kernel, "unload kernel"));
  const backend::KernelRef removed = entry.kernel;
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
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "create stream"));
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(Resource::kStreams, 1, "create stream",
                             owner->Who()));
  HRX_ASSIGN_OR_RETURN(QueueAssignment assignment, queues_.Assign(owner->tenant->name()));
  auto entry = std::make_shared<StreamEntry>(
      next_stream_id.fetch_add(1), assignment.index, assignment.queue);
  entry->charge = std::move(charge);
  absl::MutexLock lock(&owner->mu);
  const uint64_t handle = owner->streams.Insert(std::move(entry));
  return StreamInfo{handle, assignment.index};
}

void Core::DestroyStream(uint64_t session, uint64_t stream,
                         DoneCallback done) {
  auto owner = FindSession(session);
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
    RunInOrderLocked(
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

absl::StatusOr<bool> Core::QueryEvent(uint64_t session, uint64_t event) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  auto it = owner->events.find(event);
  if (it == owner->events.end()) {
    return Refusal(Reason::kUnknownEvent,absl::StrFormat(
        "query event %u: this session has no such event. "
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
      return done(Refusal(Reason::kUnknownEvent,absl::StrFormat(
          "synchronize event %u: this session has no such "
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
    return Refusal(Reason::kUnknownEvent,absl::StrFormat(
        "release event %u: this session has no such event. "
        "Fix: release each recorded event once.",
        event));
  }
  return absl::OkStatus();
}

void Core::CountRefusal(const absl::Status& status) {
  if (status.ok()) return;
  absl::MutexLock lock(&mu_);
  ++refusals_[std::string(ReasonToken(status))];
}

std::map<std::string, uint64_t> Core::refusals() const {
  absl::MutexLock lock(&mu_);
  return refusals_;
}

void Core::Drain() { queues_.DrainAll(); }

}  // namespace hrx::daemon
