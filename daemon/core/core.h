// The daemon's domain logic, as a facade over units with one responsibility
// each (as LevelDB's DBImpl delegates to VersionSet):
//
//   sessions()  session_table.h  who may open a session and use it
//   sharing()   sharing.h        grants, export tickets, retired descriptors
//   buffers()   buffers.h        allocations and their budget charges
//   kernels()   kernels.h        loading tenant code, where permitted
//   commands()  command_path.h   streams, batches, sync points, reads
//   events()    events.h         recorded events
//   graphs()    graphs.h         prepared DAGs and profiled launches
//   admin()     admin_views.h    status, tenants, sessions, budgets
//   refusals()  refusal_counter.h
//
// Core itself owns the backend, the queue pool and the units, and runs the
// lifecycle that crosses them: admitting connections, opening and closing
// sessions (a closed connection, an exited process, a lapsed remote lease,
// an eviction), and housekeeping. It speaks core types and absl::Status and
// knows nothing of gRPC, so it is tested directly.
//
// Every handle, id and view a caller passes is untrusted and checked by the
// unit it reaches. Methods that wait for the device take a `done` callback
// instead of blocking; it runs exactly once, possibly on a backend thread,
// and must not call back into Core.
//
// Lock order: a unit's own lock (SessionTable, Sharing, RefusalCounter, a
// Tenant's) is never held while taking a Session::mu, and no two
// Session::mu are held at once. Nothing waits for the device under any lock.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_CORE_H_
#define HRX_DAEMON_CORE_CORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/core/admin_views.h"
#include "daemon/core/buffers.h"
#include "daemon/core/clock.h"
#include "daemon/core/command_path.h"
#include "daemon/core/device_set.h"
#include "daemon/core/events.h"
#include "daemon/core/graphs.h"
#include "daemon/core/handle_authority.h"
#include "daemon/core/identity.h"
#include "daemon/core/kernels.h"
#include "daemon/core/process_watcher.h"
#include "daemon/core/queue_pool.h"
#include "daemon/core/refusal_counter.h"
#include "daemon/core/session_table.h"
#include "daemon/core/sharing.h"
#include "daemon/core/tenants.h"
#include "daemon/core/ticker.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

struct CoreOptions {
  uint32_t queue_count = kDefaultQueueCount;
  // Who may do what; the built-in registry when null.
  std::shared_ptr<TenantRegistry> tenants;
  // How long an export ticket stays redeemable.
  absl::Duration ticket_lifetime = absl::Milliseconds(kDefaultTicketLifetimeMs);
  // Tests inject a fixed authority; the daemon draws one from getrandom.
  std::optional<HandleAuthority> authority;
  // How long a remote session lives after the last call that named it.
  absl::Duration remote_session_lease =
      absl::Seconds(kRemoteSessionLeaseSeconds);
  // How often expired tickets and leases are swept (0: never; tests call
  // Housekeep themselves).
  absl::Duration housekeeping_interval =
      absl::Milliseconds(kHousekeepingIntervalMs);
  // Where time comes from; the real clock when null. Must outlive Core.
  const Clock* clock = nullptr;
};

using CloseDone = std::function<void(absl::StatusOr<CloseSummary>)>;

// How long an evicted session's work may take to end before its tenant's
// own executor is killed to end it (docs/limits.md).
inline constexpr absl::Duration kEvictionDrainLimit = absl::Seconds(2);

class Core {
 public:
  // Every tenant's work on `backend`, in this process.
  Core(std::unique_ptr<backend::Backend> backend, const CoreOptions& options);
  // Each tenant's work where `devices` puts it (executors).
  Core(std::unique_ptr<DeviceSet> devices, const CoreOptions& options);
  ~Core();  // drains every queue
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // --- The units ------------------------------------------------------------
  SessionTable& sessions() { return sessions_; }
  Sharing& sharing() { return sharing_; }
  Buffers& buffers() { return buffers_; }
  Kernels& kernels() { return kernels_; }
  CommandPath& commands() { return commands_; }
  Events& events() { return events_; }
  Graphs& graphs() { return graphs_; }
  AdminViews& admin() { return admin_; }
  RefusalCounter& refusals() { return refusals_; }
  // Seals and opens the handles this daemon run hands out.
  const HandleAuthority& handles() const { return authority_; }

  // --- Lifecycle ------------------------------------------------------------
  // Admits a new local connection of `caller` before any request is read:
  // a charge on its tenant's connections ceiling, held while the connection
  // is open. RESOURCE_EXHAUSTED "budget_exhausted" past the ceiling.
  absl::StatusOr<ChargeRef> AdmitConnection(const PeerIdentity& caller);
  // The local connection ended: its sessions close as if their client had
  // closed them.
  void ConnectionClosed(uint64_t connection);
  // As SessionTable::Open; a local session also closes when its process
  // exits.
  absl::StatusOr<uint64_t> OpenSession(const std::string& client_name,
                                       const PeerIdentity& caller);
  // Frees the session's handles at once (its client's close, or an admin's
  // eviction); `done` runs once the session's queued work has ended
  // (completed or failed: the session is gone either way). An eviction's
  // work that has not ended within kEvictionDrainLimit (a kernel that does
  // not finish) is ended by killing its tenant's own executor.
  enum class CloseCause { kClient, kEviction };
  void CloseSession(uint64_t session, CloseDone done,
                    CloseCause cause = CloseCause::kClient);
  // Removes a socket-bound tenant (TenantRegistry::RemoveBound): it stops
  // matching callers at once, and each of its sessions closes as an
  // eviction would. `done` runs with how many sessions closed, once every
  // one has (their queued work drained), or with NOT_FOUND.
  void RemoveBoundTenant(const std::string& name,
                         std::function<void(absl::StatusOr<uint64_t>)> done);
  // Drops expired tickets (and the descriptors they hold), releases retired
  // descriptors now closed, and closes remote sessions whose lease lapsed.
  // Runs every housekeeping_interval on its own thread; tests may call it.
  void Housekeep(absl::Time now);

  // --- The device -----------------------------------------------------------
  // Waits for everything enqueued so far (daemon shutdown).
  void Drain() { queues_.DrainAll(); }
  // As Drain, for at most `limit`; false when work was still running then.
  bool Drain(absl::Duration limit) { return queues_.DrainAll(limit); }

 private:
  // The process died without closing its sessions: close them now, and
  // release what its descriptors kept.
  void ProcessExited(pid_t pid);
  // The backend of `tenants` was lost at `lost_at` (an executor died):
  // their sessions opened before then, whose pending work already failed
  // with the loss, end; their queues are set aside so new sessions run on
  // the restarted executor.
  void TenantsLost(const std::vector<std::string>& tenants,
                   const absl::Status& why, absl::Time lost_at);

  // Constant after construction.
  const std::unique_ptr<DeviceSet> devices_;
  const HandleAuthority authority_;
  QueuePool queues_;  // internally synchronized
  RefusalCounter refusals_;
  // Declared before the units that report exits through it; its thread is
  // stopped first (in ~Core) since it calls back into Core.
  std::unique_ptr<ProcessWatcher> watcher_;
  SessionTable sessions_;
  Sharing sharing_;
  Buffers buffers_;
  Kernels kernels_;
  CommandPath commands_;
  Events events_;
  Graphs graphs_;
  AdminViews admin_;
  const absl::Duration remote_session_lease_;
  // Starts an eviction's clock (CloseSession with kEviction); `ended` is
  // set once its work has.
  void WatchEviction(uint64_t session,
                     std::shared_ptr<std::atomic<bool>> ended);
  // Evictions whose work has not ended yet, checked by Housekeep.
  struct Eviction {
    std::shared_ptr<Tenant> tenant;
    absl::Time deadline;
    std::shared_ptr<std::atomic<bool>> ended;
  };
  absl::Mutex evictions_mu_;
  std::vector<Eviction> evictions_ ABSL_GUARDED_BY(evictions_mu_);
  // Last: its thread calls back into Core until it is destroyed, first.
  std::unique_ptr<Ticker> housekeeper_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_CORE_H_
