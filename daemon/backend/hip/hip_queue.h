// A native queue of the HIP backend: one non-blocking hipStream_t. Fences
// complete through pooled events, recorded lazily: after a command only when
// someone needs to know about it (Wait, OnComplete, another queue's wait, a
// host callback) or every kEventStride commands, because recording one per
// command would cost about as much as a small launch. Commands are retired
// in order (their fences published, callbacks run, what they kept alive
// released: memory, kernels, graphs, bounce buffers) by whichever thread
// sees their event complete first: a completion thread that waits on the
// events, or a thread in Wait, which polls its own fence's event for
// kWaitSpin before it sleeps. A synchronous step therefore costs no thread
// hand-off between the device finishing and its waiter returning.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_QUEUE_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_QUEUE_H_

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/fence_timeline.h"
#include "daemon/backend/hip/hip_pinned_pool.h"
#include "daemon/backend/hip/hip_platform.h"

namespace hrx::backend {

// Reuses events: creating one per command would cost more than recording.
class HipEventPool : public std::enable_shared_from_this<HipEventPool> {
 public:
  using EventRef = std::shared_ptr<const hipEvent_t>;
  explicit HipEventPool(int device) : device_(device) {}
  ~HipEventPool();
  // An event without timing; back in the pool when the last reference goes.
  absl::StatusOr<EventRef> Take();

 private:
  void Give(hipEvent_t event);

  const int device_;
  absl::Mutex mu_;
  std::vector<hipEvent_t> free_ ABSL_GUARDED_BY(mu_);
};

// The device's state, shared by a backend and its queues: the first fault
// any queue sees loses the context for all of them.
class HipDeviceHealth {
 public:
  // The first loss runs `on_lost_` outside mu_ but on the caller's thread,
  // which may hold a queue's lock.
  void Lost(const absl::Status& why) {
    std::function<void(const absl::Status&)> on_lost;
    {
      absl::MutexLock lock(&mu_);
      if (!status_.ok()) return;
      status_ = why;
      on_lost = on_lost_;
    }
    if (on_lost) on_lost(why);
  }
  void SetOnLost(std::function<void(const absl::Status&)> on_lost) {
    absl::MutexLock lock(&mu_);
    on_lost_ = std::move(on_lost);
  }
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::function<void(const absl::Status&)> on_lost_ ABSL_GUARDED_BY(mu_);
};

// Commands between two completion events at most; bounds how long a
// command's memory stays held after it completed when nobody waits on it.
inline constexpr Fence kEventStride = 32;
// How long Wait polls its fence's completion event itself (retiring what
// completed) before it sleeps until the completion thread publishes the
// fence: longer than a small command takes, so a synchronous step returns
// as soon as the device is done; short enough that a long kernel's waiter
// costs a core only briefly.
inline constexpr absl::Duration kWaitSpin = absl::Microseconds(200);

class HipQueue final : public Queue {
 public:
  // A fault this queue finds is reported to `health`.
  static absl::StatusOr<std::unique_ptr<HipQueue>> Create(
      int device, std::shared_ptr<HipDeviceHealth> health);
  ~HipQueue() override;  // drains queued work first
  HipQueue(const HipQueue&) = delete;
  HipQueue& operator=(const HipQueue&) = delete;

  absl::StatusOr<Fence> EnqueueFill(const MemoryRef& dst, uint64_t offset,
                                    uint64_t length, uint8_t value) override;
  absl::StatusOr<Fence> EnqueueCopy(const MemoryRef& dst, uint64_t dst_offset,
                                    const MemoryRef& src, uint64_t src_offset,
                                    uint64_t length) override;
  absl::StatusOr<Fence> EnqueueWrite(
      const MemoryRef& dst, uint64_t offset,
      std::shared_ptr<const std::string> bytes) override;
  absl::StatusOr<Fence> EnqueueRead(const MemoryRef& src, uint64_t offset,
                                    uint64_t length, void* host) override;
  absl::StatusOr<Fence> EnqueueHostCallback(
      CompletionCallback callback) override;
  absl::StatusOr<Fence> EnqueueWaitFor(Queue& other, Fence fence) override;
  absl::StatusOr<Fence> EnqueueDispatch(DispatchRef dispatch) override;
  absl::StatusOr<Fence> EnqueueGraph(
      GraphRef graph, std::vector<uint64_t>* node_nanoseconds) override;
  void OnComplete(Fence fence, CompletionCallback callback) override;

  Fence completed() const override;
  absl::Duration StalledSince(absl::Time now) const override;
  absl::Status Wait(Fence fence) override;
  bool NeedsPoll() const override { return true; }
  // Retires what completed unless another thread is retiring already.
  bool Poll() override;

 private:
  // What a command was, for the message of a fault found at its event.
  enum class Op : uint8_t {
    kFill,
    kCopy,
    kWrite,
    kRead,
    kMarker,
    kWait,
    kDispatch,
    kGraph
  };
  using Keep = std::array<std::shared_ptr<const void>, 2>;
  struct InFlight {
    Fence fence = 0;
    HipEventPool::EventRef event;  // null: completes with a later event
    Op op = Op::kMarker;
    Keep keep;                       // released once the command completed
    const Kernel* kernel = nullptr;  // dispatches: kept alive by `keep`
    CompletionCallback callback;     // host callbacks
    // Runs once the command completed, before its fence is published:
    // bounced reads copy out, profiled graphs read their timings.
    std::function<void()> finish;
  };
  // Enqueues one command on the stream, then its completion event.
  using Issue = std::function<absl::Status(hipStream_t)>;

  HipQueue(int device, hipStream_t stream,
           std::shared_ptr<HipDeviceHealth> health);
  absl::StatusOr<Fence> Submit(Op op, const Issue& issue, Keep keep,
                               const Kernel* kernel = nullptr,
                               CompletionCallback callback = nullptr,
                               std::function<void()> finish = nullptr);
  // Records an event after everything enqueued so far, on the newest entry.
  absl::Status RecordEventLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes sure an event will report `fence` complete (records one when no
  // event at or after it exists yet).
  absl::Status EnsureEventLocked(Fence fence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queue cannot go on (`why`): it refuses further work, and every
  // fence not yet complete fails (Wait stops at it).
  void FailLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The event that completes with `fence`, or null when it already has.
  HipEventPool::EventRef EventFor(Fence fence);
  absl::StatusOr<hipGraphExec_t> ExecFor(const GraphRef& graph);
  absl::Status DescribeFault(hipError_t error, const InFlight& entry) const;
  // Retires, in order, every command whose completion event has fired (or
  // failed): runs finishes, publishes fences, runs host callbacks, then
  // releases what the commands kept. `synced` is an event the caller has
  // already waited for, with the runtime's answer `synced_error` (not
  // asked again). Returns whether anything was retired.
  bool RetireCompleted(const HipEventPool::EventRef& synced,
                       hipError_t synced_error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(retire_mu_);
  void RunCompletions();

  const int device_;
  const hipStream_t stream_;
  const std::shared_ptr<HipEventPool> events_;
  const std::shared_ptr<HipPinnedPool> bounce_;
  const std::shared_ptr<HipDeviceHealth> health_;

  // Fences and their waiters (fence_timeline.h). Lock order: retire_mu_,
  // then mu_, then the timeline's; fences are published without mu_.
  FenceTimeline timeline_;
  // Held by the one thread retiring commands at a time (the completion
  // thread, or a waiter that took it with TryLock), so fences are published
  // and callbacks run in fence order. Never waited for by a waiter.
  absl::Mutex retire_mu_;
  mutable absl::Mutex mu_;
  std::deque<InFlight> inflight_ ABSL_GUARDED_BY(mu_);
  Fence last_event_fence_ ABSL_GUARDED_BY(mu_) = 0;  // newest with an event
  size_t pending_events_ ABSL_GUARDED_BY(mu_) = 0;   // in inflight_
  // The first device fault (or failure to record an event): nothing more is
  // submitted, and what is outstanding fails.
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Instantiated graphs by plan, while the plan lives (the core's graph
  // executables own plans, so this is bounded by the tenants' graph
  // budgets). Used only under mu_.
  struct CachedExec {
    std::weak_ptr<const GraphPlan> plan;
    hipGraphExec_t exec = nullptr;
  };
  absl::flat_hash_map<const GraphPlan*, CachedExec> execs_ ABSL_GUARDED_BY(mu_);

  std::thread completions_;  // last: starts after the members above exist
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_QUEUE_H_
