// Tenants: who a caller is to the daemon (by uid, gid or certificate), what
// role it has, and what it may use. A Tenant counts its use of each budgeted
// resource; a Charge holds part of that use and gives it back when the last
// reference to it goes — so a charge tied to device memory is held until the
// last queued command using the memory has completed, not merely until the
// client frees the buffer.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_TENANTS_H_
#define HRX_DAEMON_CORE_TENANTS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/bound_tenants.h"
#include "daemon/core/identity.h"
#include "hrx/v1/config.pb.h"

namespace hrx::daemon {

// Where a tenant's device work runs (the config's hrx.v1.Isolation).
enum class Isolation : uint8_t {
  kDefault,         // its own executor if it may load kernels, else shared
  kOwnExecutor,     // an executor process of its own
  kSharedExecutor,  // the shared executor, if it loads no kernels
};

// What a tenant may do; the config's hrx.v1.Role, read once at parse time.
enum class Role : uint8_t {
  kClient,    // uses the device within its budget
  kObserver,  // read-only inspection: status, tenants, sessions
  kAdmin,     // a client that may also change budgets and evict
};
// As the config spells it ("ROLE_ADMIN"), for messages.
std::string_view RoleName(Role role);
Role RoleFromConfig(hrx::v1::Role role);
Isolation IsolationFromConfig(hrx::v1::Isolation isolation);

enum class Resource : uint8_t {
  kDeviceBytes = 0,
  kSharedBytes,
  kStreams,
  kKernels,
  kGraphs,
  kInflightCommands,
  kSessions,
  kBuffers,
  kExports,
  kConnections,
  kEvents,
  kGrants,
  kReplyBytes,
};
inline constexpr size_t kResourceCount = 13;
// "device_bytes", ...: the field's name in hrx.v1.Budget (and hrx.v1.Usage).
std::string_view ResourceName(Resource resource);

// Ceilings per resource; nullopt is unlimited.
using Limits = std::array<std::optional<uint64_t>, kResourceCount>;
using UsageCounts = std::array<uint64_t, kResourceCount>;

// Object ceilings a tenant gets when its budget leaves them out, so that no
// tenant (the default one included) can exhaust the daemon by count, and
// the reply bytes it may leave unread. Device and shared bytes and
// in-flight commands have no default (they are bounded by the device and
// by the other ceilings). docs/limits.md lists them.
inline constexpr uint64_t kDefaultSessionsPerTenant = 64;
inline constexpr uint64_t kDefaultStreamsPerTenant = 256;
inline constexpr uint64_t kDefaultKernelsPerTenant = 256;
inline constexpr uint64_t kDefaultGraphsPerTenant = 256;
inline constexpr uint64_t kDefaultBuffersPerTenant = 4096;
inline constexpr uint64_t kDefaultExportsPerTenant = 1024;
inline constexpr uint64_t kDefaultConnectionsPerTenant = 128;
inline constexpr uint64_t kDefaultEventsPerTenant = 65536;
inline constexpr uint64_t kDefaultGrantsPerTenant = 1024;
inline constexpr uint64_t kDefaultReplyBytesPerTenant = uint64_t{256} << 20;
std::optional<uint64_t> DefaultLimit(Resource resource);

// A budget's ceilings, with the defaults above for object ceilings it
// leaves out.
Limits LimitsFromBudget(const hrx::v1::Budget& budget);
hrx::v1::Budget BudgetFromLimits(const Limits& limits);

class Tenant;

class Charge {
 public:
  ~Charge();
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;

 private:
  friend class Tenant;
  Charge(std::shared_ptr<Tenant> tenant, Resource resource, uint64_t amount)
      : tenant_(std::move(tenant)), resource_(resource), amount_(amount) {}
  std::shared_ptr<Tenant> tenant_;
  Resource resource_;
  uint64_t amount_;
};
using ChargeRef = std::shared_ptr<const Charge>;

class Tenant : public std::enable_shared_from_this<Tenant> {
 public:
  Tenant(std::string name, Role role, Limits limits, bool load_kernels = false)
      : name_(std::move(name)),
        role_(role),
        load_kernels_(load_kernels),
        limits_(limits) {}

  // Takes `amount` of `resource`, or refuses with RESOURCE_EXHAUSTED
  // "budget_exhausted" naming the ceiling, the current use and the ask.
  // `what` names the operation, `who` the caller ("uid 1000").
  absl::StatusOr<ChargeRef> Reserve(Resource resource, uint64_t amount,
                                    std::string_view what,
                                    std::string_view who);

  // Replaces the ceilings. Use above a lowered ceiling stays: new
  // reservations are refused, nothing is freed.
  void SetLimits(const Limits& limits);
  Limits limits() const;
  UsageCounts usage() const;
  bool Unlimited(Resource resource) const;

  const std::string& name() const { return name_; }
  Role role() const { return role_.load(); }
  void set_role(Role role) { role_.store(role); }
  // Whether the config lets this tenant load kernels (Tenant.load_kernels).
  bool load_kernels() const { return load_kernels_.load(); }
  void set_load_kernels(bool allowed) { load_kernels_.store(allowed); }
  // Whether its work runs in an executor of its own: always when it may
  // load kernels (its code is as hostile as it is, whatever its isolation
  // or name says), and when its isolation asks for one. Only tenants that
  // load no kernels ever share the shared executor.
  bool own_executor() const {
    return load_kernels() || isolation_.load() == Isolation::kOwnExecutor;
  }
  Isolation isolation() const { return isolation_.load(); }
  void set_isolation(Isolation isolation) { isolation_.store(isolation); }

 private:
  friend class Charge;
  void Release(Resource resource, uint64_t amount);

  const std::string name_;
  std::atomic<Role> role_;  // a reload may change it
  std::atomic<bool> load_kernels_;
  std::atomic<Isolation> isolation_{Isolation::kDefault};
  mutable absl::Mutex mu_;
  Limits limits_ ABSL_GUARDED_BY(mu_);
  UsageCounts usage_ ABSL_GUARDED_BY(mu_) = {};
};

class TenantRegistry {
 public:
  // Reads a DaemonConfig in protobuf text format. INVALID_ARGUMENT
  // "config_invalid" naming the file, line and field of the first problem.
  static absl::StatusOr<std::unique_ptr<TenantRegistry>> Load(
      const std::string& path);
  static absl::StatusOr<std::unique_ptr<TenantRegistry>> Parse(
      const std::string& text, const std::string& source);
  // With no config file: the daemon's own uid (and root) are tenant "local",
  // an admin that may load kernels, with no ceilings; everyone else is
  // tenant "default", a client with the default object ceilings.
  static std::unique_ptr<TenantRegistry> BuiltIn(uid_t daemon_uid);

  // The tenant of a local caller: by uid, then gid, else the default tenant.
  // Remote callers match by certificate subject only, never by uid; nullptr
  // when none does (an empty subject matches nothing). A caller that came
  // through a bound tenant's socket is that tenant and nothing else:
  // nullptr once the tenant is removed.
  std::shared_ptr<Tenant> Resolve(const PeerIdentity& identity) const;
  std::shared_ptr<Tenant> Find(std::string_view name) const;
  // Configured tenants, then bound ones, default last.
  std::vector<std::shared_ptr<Tenant>> All() const;

  // Adds a socket-bound tenant (a client: it may not inspect or administer)
  // named `name`, reached through `socket_path`. Refuses a bad name or
  // labels (see bound_tenants.h), a name any tenant has (ALREADY_EXISTS
  // "tenant_exists"), and more than `max_bound` bound tenants
  // (RESOURCE_EXHAUSTED "too_many_bound_tenants").
  absl::StatusOr<std::shared_ptr<Tenant>> AddBound(
      const std::string& name, const Limits& limits, bool load_kernels,
      const Labels& labels, const std::string& socket_path, size_t max_bound,
      absl::Time now);
  // Removes a bound tenant, which stops matching callers at once; its
  // object lives on while sessions or charges hold it. NOT_FOUND
  // "unknown_tenant" when no bound tenant has the name.
  absl::StatusOr<std::shared_ptr<Tenant>> RemoveBound(const std::string& name);
  // Replaces a bound tenant's labels.
  absl::Status SetBoundLabels(const std::string& name, const Labels& labels);
  std::vector<BoundTenantView> Bound() const;

  // Takes the tenants of `fresh` (a newly parsed config) in place of these.
  // A tenant that keeps its name keeps its object — and so its current use
  // and the charges sessions hold — with the new role, budget and members.
  // Tenants that disappear stop matching callers; their sessions keep them.
  // Refuses (ALREADY_EXISTS "tenant_exists", keeping the old tenants) a
  // config that names a socket-bound tenant.
  absl::Status Reload(TenantRegistry&& fresh);

 private:
  struct Entry {
    std::shared_ptr<Tenant> tenant;
    std::vector<uint32_t> uids, gids;
    std::vector<std::string> subjects;
  };
  std::shared_ptr<Tenant> FindLocked(std::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Tenant> default_ ABSL_GUARDED_BY(mu_);
  // Socket-bound tenants by name; a config reload leaves them alone.
  std::map<std::string, BoundTenantView, std::less<>> bound_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_TENANTS_H_
