// What operators see and change: the device, the daemon's status, tenants
// with their budgets and use, sessions and buffers; budgets, tenant reloads
// and the queue pool's size. Callers are checked by identity (RequireRole)
// before the server calls the rest.
//
// Contract: every view is a snapshot; nothing here changes a session.
//
// Locking: reads the session table, then each session under its own lock,
// one at a time.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_ADMIN_VIEWS_H_
#define HRX_DAEMON_CORE_ADMIN_VIEWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/core/device_set.h"
#include "daemon/core/identity.h"
#include "daemon/core/queue_pool.h"
#include "daemon/core/session_table.h"
#include "daemon/core/sharing.h"
#include "daemon/core/tenants.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

// The work of `table`'s sessions, summed (each session under its own lock,
// one at a time).
WorkTotals SumWork(const SessionTable& table);

class AdminViews {
 public:
  AdminViews(const DeviceSet& devices, SessionTable& sessions, Sharing& sharing,
             QueuePool& queues)
      : devices_(devices),
        sessions_(sessions),
        sharing_(sharing),
        queues_(queues),
        started_(sessions.clock().Now()) {}

  // PERMISSION_DENIED "role_required" unless `caller`'s tenant has at least
  // `role` (observer < admin; clients may not inspect other tenants).
  absl::Status RequireRole(const PeerIdentity& caller, Role role) const;
  // Local callers may always read the daemon's status; a remote caller must
  // be a certificate some tenant lists (PERMISSION_DENIED
  // "unknown_certificate" otherwise).
  absl::Status RequireKnownCaller(const PeerIdentity& caller) const;

  DeviceInfo device_info() const;
  // Not OK once the device itself is lost.
  absl::Status device_status() const { return devices_.device_status(); }
  std::vector<backend::ExportKind> export_kinds() const {
    return devices_.export_kinds();
  }
  CoreStatus status() const;
  std::vector<TenantUsage> ListTenants() const;
  // Open sessions, of one tenant or all ("").
  std::vector<SessionSummary> ListSessions(const std::string& tenant) const;
  // Live buffers, optionally of one tenant and/or one session (0: all).
  std::vector<BufferSummary> ListBuffers(const std::string& tenant,
                                         uint64_t session) const;

  // Executor processes, when work runs in them.
  std::vector<ExecutorInfo> executors() const { return devices_.executors(); }

  // Socket-bound tenants (TenantRegistry::AddBound and what follows); the
  // server owns their sockets.
  absl::StatusOr<std::shared_ptr<Tenant>> AddBoundTenant(
      const std::string& name, const Limits& limits, bool load_kernels,
      const Labels& labels, const std::string& socket_path, size_t max_bound);
  absl::Status SetBoundTenantLabels(const std::string& name,
                                    const Labels& labels);
  std::vector<BoundTenantSummary> ListBoundTenants() const;

  absl::Status SetBudget(const std::string& tenant, const Limits& limits);
  // Takes a newly read config's tenants (see TenantRegistry::Reload).
  absl::Status ReloadTenants(TenantRegistry&& fresh);
  // See QueuePool::SetCapacity. Sessions of admin tenants only.
  absl::Status SetQueueCount(uint64_t session, uint32_t count);

 private:
  TenantUsage UsageOf(const Tenant& tenant, uint64_t sessions) const;
  // Open sessions per tenant, in one pass over the session table.
  absl::flat_hash_map<const Tenant*, uint64_t> SessionsByTenant() const;

  const DeviceSet& devices_;
  SessionTable& sessions_;
  Sharing& sharing_;
  QueuePool& queues_;
  const absl::Time started_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_ADMIN_VIEWS_H_
