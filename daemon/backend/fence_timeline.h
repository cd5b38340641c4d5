// The fences of one queue, and the one rule every queue (CPU, HIP, and
// hrxd's RemoteQueue for an executor's) keeps for them:
//
// - Fences are issued 1, 2, 3... in enqueue order and complete in that
//   order: publishing fence F completes every fence up to F.
// - The first failure fails its fence and every later one; fences before
//   it stay OK. A later failure never replaces the first.
// - A waiter (OnComplete) runs exactly once, with its fence's status: at
//   once when the fence has completed, otherwise on the thread that
//   publishes it, after the timeline's lock is released, in fence order.
//
// Thread-safe. Lock contract: callbacks never run under the timeline's
// lock, so a callback may call back into the timeline (or its queue); a
// queue that calls Issue under a lock of its own must not hold that lock
// while it publishes.
#ifndef HRX_DAEMON_BACKEND_FENCE_TIMELINE_H_
#define HRX_DAEMON_BACKEND_FENCE_TIMELINE_H_

#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"

namespace hrx::backend {

class FenceTimeline {
 public:
  FenceTimeline() = default;
  FenceTimeline(const FenceTimeline&) = delete;
  FenceTimeline& operator=(const FenceTimeline&) = delete;

  // The next fence, for a command being enqueued.
  Fence Issue();
  // The last fence issued (0 before the first).
  Fence issued() const;
  // The highest fence completed; never decreases.
  Fence completed() const;

  // Every fence up to `fence` (at most the last issued) has completed: runs
  // their waiters, `first` (with `fence`'s status) before any of them. A
  // fence at or below completed() changes nothing but still runs `first`.
  void Publish(Fence fence, CompletionCallback first = nullptr);
  // `fence` and every later one fail with `status`, unless an earlier
  // fence failed already (the first failure stands). A fence already
  // complete stays as its waiters heard it: the failure starts after it.
  // Completes nothing.
  void Fail(Fence fence, absl::Status status);
  // Nothing issued will complete on its own (a lost device or executor):
  // fails every incomplete fence with `status` (unless an earlier failure
  // covers it). Completes nothing; returns the last fence issued, for the
  // caller to publish once it has let go of what those commands held.
  Fence FailIncomplete(absl::Status status);
  // FailIncomplete, then publishes every fence issued.
  Fence FailAll(absl::Status status);

  // Runs `callback` with `fence`'s status once it has completed.
  void OnComplete(Fence fence, CompletionCallback callback);
  // Blocks until `fence` has completed (or the timeline has failed at or
  // before it, when `stop_at_failure`: a device that faulted completes
  // nothing more); returns its status.
  absl::Status Wait(Fence fence, bool stop_at_failure = false);
  // `fence`'s status as far as known now (OK for one not yet failed).
  absl::Status StatusOf(Fence fence) const;
  // The first failure, or OK.
  absl::Status failure() const;
  // How long issued work has been outstanding without a fence completing
  // (zero when everything issued has completed).
  absl::Duration StalledSince(absl::Time now) const;

 private:
  absl::Status StatusOfLocked(Fence fence) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Fence issued_ ABSL_GUARDED_BY(mu_) = 0;
  Fence completed_ ABSL_GUARDED_BY(mu_) = 0;
  // Since when the oldest incomplete fence has waited (set when the queue
  // turns busy, and at each completion).
  absl::Time progress_at_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  Fence failed_from_ ABSL_GUARDED_BY(mu_) = 0;  // valid when failure_ is set
  std::multimap<Fence, CompletionCallback> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_FENCE_TIMELINE_H_
