// A lane's call budget in time: a token bucket of `burst` calls, refilled
// at `calls_per_second`. A tenant that calls faster than that waits on its
// own lane (call_lanes.h) for its next token: its calls are slowed, never
// refused, and no gRPC thread or other tenant waits with them. What it
// buys: a tenant flooding hrxd with calls takes a bounded share of the
// machine's cores, so another tenant's work keeps its latency
// (docs/performance.md, "A bystander under another tenant's call flood").
#ifndef HRX_DAEMON_SERVER_CALL_PACER_H_
#define HRX_DAEMON_SERVER_CALL_PACER_H_

#include "absl/time/time.h"

namespace hrx::daemon {

// Calls a second each tenant's lane runs by default (--tenant_calls_per_second;
// 0: unpaced), and the burst it may run at once (a second's worth).
inline constexpr double kDefaultTenantCallsPerSecond = 2000;

// Kept as the time the next call would be due if calls came evenly (the
// generic cell rate algorithm): exact in absl::Duration, no float drift.
// Not thread-safe: its lane's lock guards it.
class CallPacer {
 public:
  // Unpaced (Take always grants) when `calls_per_second` is 0; `burst` is
  // at least 1.
  CallPacer(double calls_per_second, double burst);

  // Takes a token as of `now` (zero), or says how long until one is there
  // (nothing taken).
  absl::Duration Take(absl::Time now);

 private:
  const bool paced_;
  const absl::Duration interval_;   // between calls at the steady rate
  const absl::Duration tolerance_;  // how far ahead a burst may run
  absl::Time due_ = absl::InfinitePast();
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_CALL_PACER_H_
