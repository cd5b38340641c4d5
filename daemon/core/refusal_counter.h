// Refused calls counted by reason (shared/refusal.h), for the metrics
// endpoint. A status not made by Refusal() counts as "other".
//
// Thread-safe; its lock is a leaf.
#ifndef HRX_DAEMON_CORE_REFUSAL_COUNTER_H_
#define HRX_DAEMON_CORE_REFUSAL_COUNTER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "shared/refusal.h"

namespace hrx::daemon {

class RefusalCounter {
 public:
  // Counts `status` when it is not OK.
  void Count(const absl::Status& status) {
    if (status.ok()) return;
    const std::string reason(ReasonToken(status));
    absl::MutexLock lock(&mu_);
    ++counts_[reason];
  }
  std::map<std::string, uint64_t> counts() const {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_REFUSAL_COUNTER_H_
