// Call lanes: where unary handlers that may wait for an executor run, so
// that no gRPC thread waits for one. gRPC runs every callback handler on a
// small pool of its own; a tenant whose executor is frozen (or slow) would
// otherwise fill that pool with its own waiting calls and stall every
// tenant's, connections included.
//
// A lane per caller (its tenant, services_lane.h LaneOf): up to
// kLaneThreads threads of its own, started on demand and ended after
// kLaneIdle without work, kMaxLaneThreads in all. A caller's waiting calls
// hold only its own lane's threads. Past the total, a call runs on the
// gRPC thread as before (documented in docs/limits.md). A lane's paced
// calls (unary calls; not a stream's messages) run at most at the lane's
// pace (call_pacer.h): past it they wait, in order, on the lane.
#ifndef HRX_DAEMON_SERVER_CALL_LANES_H_
#define HRX_DAEMON_SERVER_CALL_LANES_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/server/call_pacer.h"

namespace hrx::daemon {

inline constexpr size_t kLaneThreads = 4;
inline constexpr size_t kMaxLaneThreads = 256;
inline constexpr size_t kMaxLaneQueuedCalls = 4096;
inline constexpr absl::Duration kLaneIdle = absl::Seconds(5);

class CallLanes {
 public:
  // The daemon's lanes (one set per process; never destroyed: idle threads
  // end by themselves).
  static CallLanes& ForServer();

  // Threads end after `idle` without work (kLaneIdle for the server's).
  explicit CallLanes(absl::Duration idle = kLaneIdle) : idle_(idle) {}
  // Waits for every thread to end: give it no more work, and let what it
  // runs finish.
  ~CallLanes();
  CallLanes(const CallLanes&) = delete;
  CallLanes& operator=(const CallLanes&) = delete;

  // What Run did with a call.
  enum class Admitted {
    kQueued,    // it runs on the lane
    kLaneFull,  // the lane holds kMaxLaneQueuedCalls calls: refuse it
    kNoThread,  // the lane has no thread, and none can be started
  };
  // Runs `work` on `lane`'s threads, in arrival order as threads free up
  // (and, when `paced`, no faster than the pace). Otherwise nothing runs:
  // the caller refuses the call (kLaneFull, the caller's own doing) or runs
  // it itself (kNoThread).
  Admitted Run(const std::string& lane, std::function<void()> work,
               bool paced = true) ABSL_LOCKS_EXCLUDED(mu_);

  // Each lane's pace from now on (lanes made before keep theirs); unpaced
  // until set. hrxd sets it at start (--tenant_calls_per_second).
  void SetPace(double calls_per_second, double burst) ABSL_LOCKS_EXCLUDED(mu_);

  size_t threads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Call {
    std::function<void()> work;
    bool paced = true;
  };
  struct Lane {
    explicit Lane(double calls_per_second = 0, double burst = 0)
        : pacer(calls_per_second, burst) {}
    std::deque<Call> queued;
    size_t threads = 0;
    size_t idle = 0;  // threads waiting for work
    CallPacer pacer;
  };
  void Serve(std::string name) ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration idle_;
  mutable absl::Mutex mu_;
  std::map<std::string, Lane> lanes_ ABSL_GUARDED_BY(mu_);
  size_t threads_ ABSL_GUARDED_BY(mu_) = 0;
  double calls_per_second_ ABSL_GUARDED_BY(mu_) = 0;
  double burst_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_CALL_LANES_H_
