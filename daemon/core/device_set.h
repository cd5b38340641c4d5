// Where the core's device work runs: one backend in hrxd for every tenant,
// or a backend per executor process (daemon/executor), chosen per tenant by
// its isolation. The core asks for a tenant's backend each time it
// allocates, loads a kernel or creates a queue, so a restarted executor is
// picked up by new work.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_DEVICE_SET_H_
#define HRX_DAEMON_CORE_DEVICE_SET_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/core/tenants.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

// One executor process, for admins.
struct ExecutorInfo {
  std::string name;  // the tenant it serves, or "shared"
  pid_t pid = 0;     // 0 while it is down
  bool running = false;
  uint64_t restarts = 0;
  uint64_t bytes_in_use = 0;
  std::vector<std::string> tenants;  // tenants whose work it has run
  std::string last_loss;             // why it last went down
};

class DeviceSet {
 public:
  virtual ~DeviceSet() = default;

  // The backend running `tenant`'s work; hold it only for the call at
  // hand (a lost executor's backend goes once its last holder lets go).
  // UNAVAILABLE "executor_restarting" while its executor comes back after
  // a loss.
  virtual absl::StatusOr<std::shared_ptr<backend::Backend>> For(
      const Tenant& tenant) = 0;
  // The device, as its backends describe it.
  virtual const backend::DeviceProperties& properties() const = 0;
  virtual uint64_t bytes_in_use() const = 0;
  virtual std::vector<backend::ExportKind> export_kinds() const = 0;
  // Not OK once the device itself is lost (not when one executor is).
  virtual absl::Status device_status() const = 0;
  virtual std::vector<ExecutorInfo> executors() const { return {}; }
  // What `tenant`'s work holds outside hrxd's own charges, as its executors
  // last reported it: commands in flight, reply bytes and events of the
  // rings they serve (charged there, against the limits hrxd set).
  virtual UsageCounts HeldElsewhere(const std::string& tenant) const {
    return {};
  }
  // The work of the rings executors serve, as they last reported it.
  virtual WorkTotals WorkElsewhere() const { return {}; }
  // Whether `tenant`'s backend serves no other tenant: its allocations can
  // only ever reuse its own freed memory. When not, device memory is
  // allocated zeroed, so no tenant reads another's leftovers.
  virtual bool Exclusive(const Tenant& tenant) const { return false; }

  // Who to tell when a backend is lost with the tenants whose work ran on
  // it (an executor crashed, hung or was killed) and when it was lost:
  // their sessions opened before then end.
  using LostCallback =
      std::function<void(const std::vector<std::string>& tenants,
                         const absl::Status& why, absl::Time lost_at)>;
  virtual void SetLostCallback(LostCallback lost) {}
  // `tenant` is gone for good (a removed socket-bound tenant) and its
  // sessions have closed: an executor of its own stops, rather than wait
  // for work that will never come.
  virtual void Retire(const Tenant& tenant) {}
  // Ends `tenant`'s own executor now, with "executor_lost" and `why` (work
  // that will not end: an eviction's limit passed). Nothing where its work
  // runs in hrxd or on the shared executor (which runs no tenant code).
  virtual void Abort(const Tenant& tenant, const std::string& why) {}
};

// Every tenant's work on one backend, in hrxd's own process.
class SingleDevice final : public DeviceSet {
 public:
  // Shared where another owner uses the same backend (an executor's
  // service and the sessions whose rings it serves).
  explicit SingleDevice(std::shared_ptr<backend::Backend> backend)
      : backend_(std::move(backend)) {}

  absl::StatusOr<std::shared_ptr<backend::Backend>> For(
      const Tenant&) override {
    return backend_;
  }
  const backend::DeviceProperties& properties() const override {
    return backend_->properties();
  }
  uint64_t bytes_in_use() const override { return backend_->bytes_in_use(); }
  std::vector<backend::ExportKind> export_kinds() const override {
    return backend_->export_kinds();
  }
  absl::Status device_status() const override {
    return backend_->device_status();
  }

 private:
  const std::shared_ptr<backend::Backend> backend_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_DEVICE_SET_H_
