#include "daemon/server/call_pacer.h"

#include <algorithm>

namespace hrx::daemon {

CallPacer::CallPacer(double calls_per_second, double burst)
    : paced_(calls_per_second > 0),
      interval_(paced_ ? absl::Seconds(1) / calls_per_second
                       : absl::ZeroDuration()),
      tolerance_(interval_ * (std::max(burst, 1.0) - 1)) {}

absl::Duration CallPacer::Take(absl::Time now) {
  if (!paced_) return absl::ZeroDuration();
  const absl::Time due = std::max(due_, now);
  const absl::Duration ahead = due - now;
  if (ahead > tolerance_) return ahead - tolerance_;
  due_ = due + interval_;
  return absl::ZeroDuration();
}

}  // namespace hrx::daemon
