// Where the core reads the time: ticket expiry, remote session leases and
// uptime. The daemon uses the real clock; tests use a ManualClock, so expiry
// is tested without sleeping.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_CLOCK_H_
#define HRX_DAEMON_CORE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hrx::daemon {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The system's clock; lives for the whole program.
  static const Clock& Real();
};

// A clock that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

inline const Clock& Clock::Real() {
  class RealClock final : public Clock {
   public:
    absl::Time Now() const override { return absl::Now(); }
  };
  static const RealClock* const real = new RealClock();
  return *real;
}

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_CLOCK_H_
