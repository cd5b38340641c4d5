#include "daemon/core/core.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "daemon/core/stream_gate.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

// Calls `done` once after `count` arrivals, with the first error seen.
class Countdown {
 public:
  Countdown(size_t count, DoneCallback done)
      : remaining_(count), done_(std::move(done)) {}
  // Expects `count` more arrivals; only before the last one.
  void Add(size_t count) {
    absl::MutexLock lock(&mu_);
    remaining_ += count;
  }
  void Arrive(absl::Status status) {
    absl::Status first_error;
    {
      absl::MutexLock lock(&mu_);
      if (!status.ok() && first_error_.ok()) first_error_ = status;
      if (--remaining_ != 0) return;
      first_error = first_error_;
    }
    done_(first_error);
  }

 private:
  absl::Mutex mu_;
  size_t remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  DoneCallback done_;
};

// What a closing session leaves to finish outside its lock.
struct Remains {
  CloseSummary summary;
  std::vector<std::pair<std::shared_ptr<backend::Queue>, backend::Fence>> waits;
  absl::flat_hash_map<uint64_t, ExportEntry> exports;
};

// Empties a removed session: streams close (parked work is cancelled),
// buffers, kernels, graphs and events go; queued commands hold what they use
// until they run.
Remains TearDown(Session& closing, Deferred& cancelled) {
  Remains remains;
  absl::MutexLock lock(&closing.mu);
  remains.summary.freed_buffers = closing.buffers.size();
  remains.summary.freed_streams = closing.streams.size();
  closing.streams.Clear([&](std::shared_ptr<StreamEntry> stream) {
    CloseStream(*stream, cancelled);
    remains.waits.emplace_back(stream->queue, stream->published);
  });
  closing.buffers.Clear([](BufferEntry) {});
  closing.kernels.Clear([](KernelEntry) {});
  closing.graph_execs.Clear([](GraphExecEntry) {});
  closing.events.clear();
  remains.exports = std::move(closing.exports);
  closing.exports.clear();
  return remains;
}

std::shared_ptr<TenantRegistry> TenantsOf(const CoreOptions& options) {
  if (options.tenants != nullptr) return options.tenants;
  return std::shared_ptr<TenantRegistry>(TenantRegistry::BuiltIn(geteuid()));
}

}  // namespace

Core::Core(std::unique_ptr<backend::Backend> backend,
           const CoreOptions& options)
    : Core(std::make_unique<SingleDevice>(std::move(backend)), options) {}

Core::Core(std::unique_ptr<DeviceSet> devices, const CoreOptions& options)
    : devices_(std::move(devices)),
      authority_(options.authority ? *options.authority
                                   : HandleAuthority::FromKernelRandom()),
      queues_(*devices_, options.queue_count),
      watcher_(std::make_unique<ProcessWatcher>(
          [this](pid_t pid) { ProcessExited(pid); })),
      sessions_(TenantsOf(options),
                options.clock != nullptr ? *options.clock : Clock::Real()),
      sharing_(sessions_, *watcher_, options.ticket_lifetime),
      buffers_(*devices_, sessions_, sharing_),
      kernels_(*devices_, sessions_),
      commands_(*devices_, sessions_, queues_),
      events_(sessions_),
      graphs_(sessions_),
      admin_(*devices_, sessions_, sharing_, queues_),
      remote_session_lease_(options.remote_session_lease) {
  devices_->SetLostCallback(
      [this](const std::vector<std::string>& tenants, const absl::Status& why,
             absl::Time lost_at) { TenantsLost(tenants, why, lost_at); });
  // Tenants of their own executor get it now, not at first use: start-up
  // costs (a GPU context) are paid before clients wait on them, and a
  // tenant whose executor cannot start is known at once. A failure is not
  // fatal here: the tenant's first call reports it.
  for (const std::shared_ptr<Tenant>& tenant : sessions_.tenants().All()) {
    if (tenant->own_executor()) (void)devices_->For(*tenant);
  }
  if (options.housekeeping_interval > absl::ZeroDuration()) {
    housekeeper_ = std::make_unique<Ticker>(
        options.housekeeping_interval,
        [this] { Housekeep(sessions_.clock().Now()); });
  }
}

Core::~Core() {
  // The threads that call back into Core stop first; nothing reaches the
  // watcher after this (sessions are not closed one by one at shutdown).
  housekeeper_.reset();
  watcher_.reset();
  // Every stream stops taking work: a suspended batch ends when it resumes
  // and parked operations are cancelled, so draining enqueues nothing new.
  for (const auto& [handle, session] : sessions_.Select()) {
    Deferred cancelled;
    {
      absl::MutexLock lock(&session->mu);
      session->streams.ForEach([&](const std::shared_ptr<StreamEntry>& stream) {
        CloseStream(*stream, cancelled);
      });
    }
    RunDeferred(cancelled);
  }
  // The queues go while the units their completions reach still exist.
  queues_.Close();
}

absl::StatusOr<ChargeRef> Core::AdmitConnection(const PeerIdentity& caller) {
  std::shared_ptr<Tenant> tenant = sessions_.tenants().Resolve(caller);
  if (tenant == nullptr && !caller.bound_tenant.empty()) {
    return BoundTenantRemoved(caller.bound_tenant, "connect");
  }
  if (tenant == nullptr) {
    return Refusal(Reason::kUnknownCaller,
                   "no tenant takes this caller. Fix: list it in the config.");
  }
  return tenant->Reserve(Resource::kConnections, 1, "connect",
                         DescribeCaller(caller));
}

void Core::ConnectionClosed(uint64_t connection) {
  for (const auto& [handle, session] :
       sessions_.Select([&](uint64_t, const Session& s) {
         return s.identity.connection == connection;
       })) {
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
}

void Core::RemoveBoundTenant(
    const std::string& name,
    std::function<void(absl::StatusOr<uint64_t>)> done) {
  absl::StatusOr<std::shared_ptr<Tenant>> removed =
      sessions_.tenants().RemoveBound(name);
  if (!removed.ok()) return done(removed.status());
  std::shared_ptr<Tenant> tenant = *std::move(removed);
  sharing_.ForgetGrantee(tenant->name());
  const std::vector<SessionTable::Entry> sessions =
      sessions_.Select([&](uint64_t, const Session& s) {
        return s.tenant.get() == tenant.get();
      });
  // Once every session has closed, its queues are set aside (the sweep
  // destroys them, and a tenant made later under the name gets its own),
  // and an executor of its own goes too.
  auto finish = [this, tenant, done = std::move(done)](uint64_t closed) {
    queues_.Retire(tenant->name());
    devices_->Retire(*tenant);
    done(closed);
  };
  if (sessions.empty()) return finish(0);
  // The last session's close reports for all of them.
  struct Pending {
    std::atomic<size_t> left;
    uint64_t closed;
    std::function<void(uint64_t)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = sessions.size();
  pending->closed = sessions.size();
  pending->done = std::move(finish);
  for (const auto& [handle, session] : sessions) {
    // A session its client closed meanwhile still counts: it is gone.
    CloseSession(
        handle,
        [pending](absl::StatusOr<CloseSummary>) {
          if (pending->left.fetch_sub(1) == 1) pending->done(pending->closed);
        },
        CloseCause::kEviction);
  }
}

absl::StatusOr<uint64_t> Core::OpenSession(const std::string& client_name,
                                           const PeerIdentity& caller) {
  HRX_ASSIGN_OR_RETURN(uint64_t handle, sessions_.Open(client_name, caller));
  watcher_->Watch(caller.pid);  // pid 0 (not visible) is never watched
  return handle;
}

void Core::CloseSession(uint64_t session, CloseDone done, CloseCause cause) {
  if (cause == CloseCause::kEviction) {
    auto ended = std::make_shared<std::atomic<bool>>(false);
    WatchEviction(session, ended);
    done = [ended,
            done = std::move(done)](absl::StatusOr<CloseSummary> summary) {
      ended->store(true);
      done(std::move(summary));
    };
  }
  auto removed = sessions_.Remove(session, "close session");
  if (!removed.ok()) return done(removed.status());
  absl::Status why;  // OK: closed by its client
  if (cause == CloseCause::kEviction) {
    // Its client hears why from whatever it sends next (its ring included),
    // not of a stale handle.
    why = Refusal(Reason::kSessionClosed,
                  absl::StrFormat("an administrator evicted this session "
                                  "(tenant \"%s\"). Fix: open a new session; "
                                  "ask the administrator why.",
                                  (*removed)->tenant->name()));
    sessions_.Bury(session, why);
  }
  // Done once the work queued for it has run wherever it runs: in hrxd's
  // queues (the waits below), and in an executor serving its rings, whose
  // copy ends after its own queues' work (so what the session held is
  // released, and its usage back, when the close is answered). One arrival
  // is held until the waits are counted.
  auto closed = std::make_shared<CloseSummary>();
  auto countdown = std::make_shared<Countdown>(
      2, [closed, done = std::move(done)](absl::Status) { done(*closed); });
  sessions_.mirrors().EndSession(
      session, why, [countdown] { countdown->Arrive(absl::OkStatus()); });
  std::shared_ptr<Session> closing = *std::move(removed);
  // Its grants and unredeemed tickets go with its handle.
  sharing_.ForgetSession(session);
  Deferred cancelled;
  Remains remains = TearDown(*closing, cancelled);
  RunDeferred(cancelled);
  sharing_.RetireExports(*closing, std::move(remains.exports));
  // A process with nothing left here needs no pidfd (one descriptor each):
  // its other sessions, if it opens more, are bound to their connections.
  const pid_t pid = closing->identity.pid;
  if (pid > 0 && !sharing_.WaitsFor(pid) &&
      sessions_
          .Select(
              [&](uint64_t, const Session& s) { return s.identity.pid == pid; })
          .empty()) {
    watcher_->Unwatch(pid);
  }
  *closed = remains.summary;
  // A failed queue (a kernel fault, a lost executor) has ended the work
  // too: the close is done, whatever the work's own outcome.
  countdown->Add(remains.waits.size());
  for (auto& [queue, fence] : remains.waits) {
    queue->OnComplete(
        fence, [countdown](absl::Status status) { countdown->Arrive(status); });
  }
  countdown->Arrive(absl::OkStatus());
}

void Core::WatchEviction(uint64_t session,
                         std::shared_ptr<std::atomic<bool>> ended) {
  for (const auto& [handle, entry] : sessions_.Select(
           [&](uint64_t id, const Session&) { return id == session; })) {
    absl::MutexLock lock(&evictions_mu_);
    evictions_.push_back({entry->tenant,
                          sessions_.clock().Now() + kEvictionDrainLimit,
                          std::move(ended)});
  }
}

void Core::ProcessExited(pid_t pid) {
  for (const auto& [handle, session] : sessions_.Select(
           [&](uint64_t, const Session& s) { return s.identity.pid == pid; })) {
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
  // Its mappings are gone with it: the memory they kept can go.
  sharing_.ProcessExited(pid);
}

void Core::TenantsLost(const std::vector<std::string>& tenants,
                       const absl::Status& why, absl::Time lost_at) {
  for (const std::string& tenant : tenants) queues_.Retire(tenant);
  // Sessions opened since the loss are spared: the loss is noticed (and
  // reported to the queues' clients) before this runs, and a client that
  // reconnected at once must not lose its new session to the old executor.
  for (const auto& [handle, session] :
       sessions_.Select([&](uint64_t, const Session& s) {
         return s.opened_at <= lost_at &&
                std::find(tenants.begin(), tenants.end(), s.tenant->name()) !=
                    tenants.end();
       })) {
    // Its client may not have heard yet (a sync sent as the executor died):
    // whatever it sends next hears of the loss, not of a stale handle.
    sessions_.Bury(handle, why);
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
}

void Core::Housekeep(absl::Time now) {
  sharing_.Housekeep(now);
  // Evictions whose work outlived the limit: its executor goes, and with
  // it the work (the loss fails what the eviction waits for).
  std::vector<std::shared_ptr<Tenant>> overdue;
  {
    absl::MutexLock lock(&evictions_mu_);
    auto keep = [&](const Eviction& eviction) {
      if (eviction.ended->load()) return false;
      if (now < eviction.deadline) return true;
      overdue.push_back(eviction.tenant);
      return false;
    };
    evictions_.erase(
        std::stable_partition(evictions_.begin(), evictions_.end(), keep),
        evictions_.end());
  }
  for (const std::shared_ptr<Tenant>& tenant : overdue) {
    devices_->Abort(
        *tenant,
        absl::StrFormat("was killed: an admin evicted a session of \"%s\" "
                        "whose work had not ended within %s (a kernel that "
                        "does not finish)",
                        tenant->name(),
                        absl::FormatDuration(kEvictionDrainLimit)));
  }
  // Queues of lost executors go once their sessions have (their executor's
  // connection, threads and socket with them).
  queues_.Sweep();
  const int64_t oldest = absl::ToUnixNanos(now - remote_session_lease_);
  for (const auto& [handle, session] :
       sessions_.Select([&](uint64_t, const Session& s) {
         return s.identity.remote && s.last_call_ns.load() < oldest;
       })) {
    CloseSession(handle, [](absl::StatusOr<CloseSummary>) {});
  }
}

}  // namespace hrx::daemon
