// How device resources go back to the runtime without stalling the device.
// hipFree waits for the whole device to go idle and holds up other runtime
// calls meanwhile: one tenant's long kernel would stall every queue's
// completions whenever any buffer is freed (seen on the H200). So device
// memory comes from the runtime's stream-ordered allocator
// (hipMallocAsync / hipFreeAsync on a stream of its own), where the runtime
// offers it. hipHostUnregister and hipModuleUnload, which may wait too, run
// on a thread of the reclaimer's own, never on a queue's completion thread
// or a client's call.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_RECLAIMER_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_RECLAIMER_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/hip/hip_platform.h"

namespace hrx::backend {

class HipReclaimer {
 public:
  // Binds `device`, and makes the stream that allocations and frees of
  // device memory are ordered on.
  static absl::StatusOr<std::shared_ptr<HipReclaimer>> Create(int device);
  explicit HipReclaimer(int device, hipStream_t stream);
  ~HipReclaimer();  // runs everything deferred, then joins
  HipReclaimer(const HipReclaimer&) = delete;
  HipReclaimer& operator=(const HipReclaimer&) = delete;

  // Runs `release` soon, on the reclaimer's thread, with the device bound.
  // `release` must not hold references that would destroy the reclaimer.
  void Defer(std::function<void()> release);

  // The stream device memory is allocated and freed on.
  hipStream_t stream() const { return stream_; }
  // Whether device memory comes from the stream-ordered allocator (false:
  // hipMalloc and a deferred hipFree, which stalls the device).
  bool stream_ordered() const { return stream_ordered_; }
  void set_stream_ordered(bool ordered) { stream_ordered_ = ordered; }

 private:
  void Run();

  const int device_;
  const hipStream_t stream_;
  bool stream_ordered_ = true;  // settled once, at backend open
  absl::Mutex mu_;
  std::deque<std::function<void()>> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_RECLAIMER_H_
