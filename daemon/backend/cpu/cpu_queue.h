// A native queue of the CPU backend: one worker thread running an ordered
// command list. Each command gets the next fence of the queue's timeline
// (fence_timeline.h); the worker publishes it after the command ran, so
// fences complete in order, and a failed command fails its fence and every
// later one.
#ifndef HRX_DAEMON_BACKEND_CPU_CPU_QUEUE_H_
#define HRX_DAEMON_BACKEND_CPU_CPU_QUEUE_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/cpu/thread_pool.h"
#include "daemon/backend/fence_timeline.h"

namespace hrx::backend {

class CpuQueue final : public Queue {
 public:
  // `pool` runs dispatches' workgroups; it must outlive the queue.
  explicit CpuQueue(ThreadPool& pool);
  ~CpuQueue() override;  // runs everything queued, then joins the worker
  CpuQueue(const CpuQueue&) = delete;
  CpuQueue& operator=(const CpuQueue&) = delete;

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

 private:
  // A command returns its failure, which fails its fence and every later
  // one (the timeline's rule).
  using Work = std::function<absl::Status()>;
  struct Entry {
    Fence fence;
    Work work;
    CompletionCallback callback;  // set for host callbacks only
  };

  Fence Enqueue(Work work, CompletionCallback callback);
  // Runs one dispatch on the calling thread and the pool.
  absl::Status RunDispatch(const DispatchArgs& dispatch);
  absl::Status RunNode(const GraphNode& node);
  void RunWorker();

  ThreadPool& pool_;
  FenceTimeline timeline_;
  // Lock order: mu_, then the timeline's (Enqueue issues under mu_, so that
  // pending_ is in fence order); never publishes under mu_.
  mutable absl::Mutex mu_;
  std::deque<Entry> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread worker_;  // last: starts after the members above exist
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_CPU_QUEUE_H_
