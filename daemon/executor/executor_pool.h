// The executors hrxd runs and supervises: one per tenant whose isolation
// asks for its own, and one shared by the rest. Each is hrxd's own binary
// started with --executor, sandboxed (executor/sandbox.h), owning its own
// backend; hrxd itself never opens the device. An executor that exits,
// crashes, breaks the protocol or makes no progress within the watchdog is
// killed and its tenants' sessions end (executor_lost); it is started
// again on the next use, with a backoff that doubles while it keeps dying.
//
// Thread-safe.
#ifndef HRX_DAEMON_EXECUTOR_EXECUTOR_POOL_H_
#define HRX_DAEMON_EXECUTOR_EXECUTOR_POOL_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/remote/remote_backend.h"
#include "daemon/core/device_set.h"
#include "daemon/executor/executor_cgroups.h"
#include "daemon/executor/executor_log.h"
#include "daemon/executor/uid_leases.h"
#include "shared/unique_fd.h"

namespace hrx::executor {

struct ExecutorOptions {
  std::string backend = "cpu";  // the executors' --backend
  uint64_t cpu_memory_bytes = 0;
  int gpu_device = 0;
  std::string log_level = "info";
  // The user executors run as when hrxd is root (never root).
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<gid_t> groups;  // e.g. the render group of /dev/kfd
  // When hrxd is root and this is not 0: each executor runs as uid (and
  // gid) uid_base + its slot, one slot per executor name for hrxd's life,
  // so no two executors share a uid (or its process limit), and none has
  // hrxd's. uid/gid above are then unused.
  uid_t uid_base = 0;
  static constexpr uint32_t kUidSlots = 65536;
  // Where those uids are leased machine-wide (UidLeases), so that another
  // root hrxd's executors never run as the same uid: a slot whose uid
  // another hrxd holds is skipped.
  std::string uid_lease_file = kDefaultUidLeaseFile;
  // Each executor in a control group of its own (ExecutorCgroups) with a
  // task limit of kExecutorMaxThreads and, for a tenant's own executor,
  // memory_bytes (0: none). Where hrxd cannot make groups it says why and
  // runs without them.
  bool cgroups = false;
  uint64_t memory_bytes = 0;
  // Every tenant's own executor together (their groups' parent), so that
  // several at memory_bytes each cannot fill the machine (0: no cap).
  uint64_t tenants_memory_bytes = 0;
  // Work outstanding this long without progress is a hang.
  absl::Duration watchdog = absl::Seconds(kDefaultWatchdogSeconds);
  // A call (allocate, load a kernel) the executor must answer within.
  absl::Duration call_limit = absl::Seconds(kDefaultWatchdogSeconds);
  // Its start (process, sandbox, the runtime's device context) must end in
  // its hello within this, whatever the watchdog: a context's creation can
  // wait for the driver to tear down a killed executor's context.
  absl::Duration start_limit = absl::Seconds(kDefaultStartSeconds);
  // A ping the executor must answer within (stopped, or its main thread
  // stuck, past it): see kPingInterval.
  absl::Duration hang_limit = absl::Seconds(kDefaultHangSeconds);
  absl::Duration first_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  static constexpr int64_t kDefaultWatchdogSeconds = 30;
  static constexpr int64_t kDefaultHangSeconds = 10;
  static constexpr int64_t kDefaultStartSeconds = 30;
};

// How often the watchdog pings each executor; one that does not answer
// within ExecutorOptions::hang_limit (--executor_hang_ms) is frozen and is
// killed, so a stopped executor holds its tenant's calls at most that long.
inline constexpr absl::Duration kPingInterval = absl::Milliseconds(250);
// How long a status waits for the executors' current work reports.
using backend::remote::kReportWait;

class ExecutorPool final : public daemon::DeviceSet {
 public:
  // Starts the shared executor (to learn the device; a failure to start it
  // is hrxd's failure to start).
  static absl::StatusOr<std::unique_ptr<ExecutorPool>> Start(
      const ExecutorOptions& options);
  ~ExecutorPool() override;  // kills every executor

  absl::StatusOr<std::shared_ptr<backend::Backend>> For(
      const daemon::Tenant& tenant) override;
  const backend::DeviceProperties& properties() const override {
    return properties_;
  }
  uint64_t bytes_in_use() const override;
  std::vector<backend::ExportKind> export_kinds() const override;
  absl::Status device_status() const override { return absl::OkStatus(); }
  std::vector<daemon::ExecutorInfo> executors() const override;
  daemon::UsageCounts HeldElsewhere(const std::string& tenant) const override;
  daemon::WorkTotals WorkElsewhere() const override;
  bool Exclusive(const daemon::Tenant& tenant) const override {
    return tenant.own_executor();
  }
  void SetLostCallback(LostCallback lost) override;
  // Stops `tenant`'s own executor, if it has one running; it stays listed,
  // not running, with why (it starts again if a tenant of that name ever
  // needs it).
  void Retire(const daemon::Tenant& tenant) override;
  void Abort(const daemon::Tenant& tenant, const std::string& why) override;

 private:
  struct Executor {
    std::string name;  // the tenant, or kShared (key kSharedKey)
    pid_t pid = 0;
    // Signals it (shared with the watchdog's snapshot; invalid where the
    // kernel has no pidfds, and then nothing is signalled after a reap).
    std::shared_ptr<const shared::UniqueFd> pidfd;
    // Null while down. A lost one's last holder (a call in progress, or
    // the watchdog) lets it go; its queues, memory and kernels keep their
    // link to it until they go too (QueuePool::Sweep, sessions closing).
    std::shared_ptr<backend::remote::RemoteBackend> backend;
    std::set<std::string> tenants;
    uint64_t restarts = 0;
    int failures_in_a_row = 0;
    absl::Time retry_at = absl::InfinitePast();
    // Why it was last lost, without its Fix (the restarting refusal that
    // quotes it ends with a Fix of its own).
    std::string last_loss;
    // Losses are logged at most once per kLossLogInterval per executor: a
    // tenant crash-looping its executor cannot flood hrxd's log. The losses
    // not logged since the last line are counted in it.
    absl::Time loss_logged_at = absl::InfinitePast();
    uint64_t losses_unlogged = 0;
    // A call is starting it (unlocked); others wait for that one.
    bool launching = false;
    // Its uid's offset from uid_base and its control group's number
    // (kNoSlot until it first starts).
    uint32_t slot = kNoSlot;
  };
  // The shared executor's name in logs and listings, and its key in
  // executors_: a key no tenant name can be (names are never empty), so a
  // tenant called "shared" gets an executor of its own, never this one.
  static constexpr char kShared[] = "shared";
  static constexpr absl::Duration kLossLogInterval = absl::Seconds(1);
  static constexpr char kSharedKey[] = "";

  explicit ExecutorPool(const ExecutorOptions& options) : options_(options) {}
  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  struct Launched {
    pid_t pid = 0;
    std::shared_ptr<const shared::UniqueFd> pidfd;
    std::shared_ptr<backend::remote::RemoteBackend> backend;
  };
  // Starts the executor called `name` and connects to it: waits up to the
  // call limit for its hello, so never under mu_.
  // Which executor Launch starts: the trust domain is this, never its name
  // (a tenant may be called "shared").
  enum class Role { kShared, kTenantsOwn };
  absl::StatusOr<Launched> Launch(const std::string& name, Role role,
                                  uint32_t slot) const ABSL_LOCKS_EXCLUDED(mu_);
  // `executor`'s slot, given on first use and leased (skipping slots whose
  // uid another hrxd holds); executor_lost past kUidSlots slots in hrxd's
  // life.
  absl::StatusOr<uint32_t> SlotOf(Executor& executor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Install(Executor& executor, Launched launched);
  struct Running {
    std::shared_ptr<backend::remote::ExecutorLink> link;
    std::shared_ptr<const shared::UniqueFd> pidfd;
  };
  // Loses and kills `tenant`'s own executor with `why` (forgetting its
  // tenants first when asked); what it stopped, or nulls if none ran.
  Running Stop(const daemon::Tenant& tenant, const std::string& why,
               bool forget_tenants);
  // The link of `name`'s current life ended with `why`.
  void Lost(const std::string& name, backend::remote::ExecutorLink* link,
            absl::Status why);
  void Watch();
  absl::Duration HangLimit() const {
    return std::min(options_.watchdog, options_.hang_limit);
  }

  const ExecutorOptions options_;
  // Every executor's stdout and stderr (set once, by Start).
  std::unique_ptr<ExecutorLogPump> log_pump_;
  // Their control groups (set once, by Start; null without them).
  std::unique_ptr<ExecutorCgroups> cgroups_;
  // The uids' leases (set once, by Start; null without uid_base).
  std::unique_ptr<UidLeases> uid_leases_;
  backend::DeviceProperties properties_;
  mutable absl::Mutex mu_;
  std::map<std::string, Executor> executors_ ABSL_GUARDED_BY(mu_);
  // Backends of lost executors, held until their link's delivery thread is
  // done (the watchdog lets go of them then): what its callbacks let go of
  // (a released buffer, the link itself) must never be the link's last
  // reference, or the link would be destroyed on that thread.
  std::vector<std::shared_ptr<backend::remote::RemoteBackend>> dying_
      ABSL_GUARDED_BY(mu_);
  LostCallback lost_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watchdog_;
};

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_EXECUTOR_POOL_H_
