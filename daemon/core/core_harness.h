// A Core over the CPU backend wrapped in a FaultyBackend, with a manual
// clock, and synchronous helpers for the core's asynchronous calls, for the
// core's unit tests.
#ifndef HRX_DAEMON_CORE_CORE_HARNESS_H_
#define HRX_DAEMON_CORE_CORE_HARNESS_H_

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/backend/testing/faulty_backend.h"
#include "daemon/core/clock.h"
#include "daemon/core/core.h"

namespace hrx::daemon::testing {

inline constexpr uint64_t kHarnessDeviceBytes = uint64_t{64} << 20;

// The calling process, on connection `connection`.
inline PeerIdentity Me(uint64_t connection = 1) {
  PeerIdentity me;
  me.uid = getuid();
  me.gid = getgid();
  me.pid = getpid();
  me.connection = connection;
  return me;
}

// The result of an asynchronous call, once it has arrived.
template <typename T>
class Pending {
 public:
  auto Callback() {
    return [this](T result) {
      absl::MutexLock lock(&mu_);
      result_.emplace(std::move(result));
    };
  }
  bool arrived() const {
    absl::MutexLock lock(&mu_);
    return result_.has_value();
  }
  // Waits for the result.
  T Get() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::optional<T>* result) { return result->has_value(); },
        &result_));
    return *result_;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<T> result_ ABSL_GUARDED_BY(mu_);
};

class CoreHarness {
 public:
  explicit CoreHarness(CoreOptions options = {}) {
    auto faulty = std::make_unique<backend::testing::FaultyBackend>(
        std::make_unique<backend::CpuBackend>(
            backend::CpuBackendOptions{.memory_bytes = kHarnessDeviceBytes}));
    faults_ = faulty.get();
    options.clock = &clock_;
    options.housekeeping_interval = absl::ZeroDuration();
    core_ = std::make_unique<Core>(std::move(faulty), options);
    session_ = *core_->OpenSession("test", Me());
    stream_ = core_->commands().CreateStream(session_)->handle;
  }

  ~CoreHarness() {
    // A test that stops while completions are held must not leave them.
    faults_->ReleaseCompletions();
  }

  Core& core() { return *core_; }
  backend::testing::FaultyBackend& faults() { return *faults_; }
  ManualClock& clock() { return clock_; }
  uint64_t session() const { return session_; }
  uint64_t stream() const { return stream_; }

  uint64_t Allocate(uint64_t bytes) {
    return core_->buffers()
        .Allocate(session_, bytes, AllocationKind::kZeroed, stream_)
        ->handle;
  }
  absl::StatusOr<size_t> Submit(std::vector<Command> batch,
                                SubmitErrors errors = SubmitErrors::kReturn) {
    Pending<absl::StatusOr<size_t>> done;
    core_->commands().Submit(session_, stream_, std::move(batch), errors,
                             done.Callback());
    return done.Get();
  }
  absl::Status Sync() {
    Pending<absl::Status> done;
    core_->commands().Synchronize(session_, stream_, done.Callback());
    return done.Get();
  }
  absl::StatusOr<std::string> Read(ViewRef view) {
    Pending<absl::Status> done;
    std::string out;
    core_->commands().Read(session_, stream_, view, &out, done.Callback());
    if (absl::Status status = done.Get(); !status.ok()) return status;
    return out;
  }
  // The session's tenant's current use of `resource`.
  uint64_t Usage(Resource resource) {
    for (const TenantUsage& tenant : core_->admin().ListTenants()) {
      if (tenant.name == "local") {
        return tenant.usage[static_cast<size_t>(resource)];
      }
    }
    return ~uint64_t{0};
  }
  // Whether Usage(resource) comes down to `value` within a few seconds
  // (charges held by callbacks on backend threads go when those return).
  bool UsageReaches(Resource resource, uint64_t value) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (Usage(resource) != value) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

 private:
  ManualClock clock_;
  backend::testing::FaultyBackend* faults_ = nullptr;
  std::unique_ptr<Core> core_;
  uint64_t session_ = 0;
  uint64_t stream_ = 0;
};

}  // namespace hrx::daemon::testing

#endif  // HRX_DAEMON_CORE_CORE_HARNESS_H_
