// A queue that runs in an executor process: hrxd's fences (1, 2, 3...,
// a FenceTimeline with the rule every queue keeps) are assigned here as
// commands are sent, without waiting for the executor;
// completions, failures, read data and profiles come back through the
// link. Commands hold the memory, kernels and graphs they use until they
// complete, as an in-process queue does.
//
// Thread-safe.
#ifndef HRX_DAEMON_BACKEND_REMOTE_REMOTE_QUEUE_H_
#define HRX_DAEMON_BACKEND_REMOTE_REMOTE_QUEUE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/fence_timeline.h"
#include "daemon/backend/remote/executor_link.h"

namespace hrx::backend::remote {

// The executor's id of `plan`, defined there (one message, ahead of
// whatever uses it on the same socket) on first use.
absl::StatusOr<uint64_t> GraphOn(const backend::GraphRef& plan,
                                 const std::shared_ptr<ExecutorLink>& link);

class RemoteQueue final : public backend::Queue {
 public:
  RemoteQueue(std::shared_ptr<ExecutorLink> link, uint64_t id);
  // The link to the executor that runs it.
  const std::shared_ptr<ExecutorLink>& link() const { return link_; }
  ~RemoteQueue() override;  // waits for its commands (or the link's loss)

  absl::StatusOr<backend::Fence> EnqueueFill(const backend::MemoryRef& dst,
                                             uint64_t offset, uint64_t length,
                                             uint8_t value) override;
  absl::StatusOr<backend::Fence> EnqueueCopy(const backend::MemoryRef& dst,
                                             uint64_t dst_offset,
                                             const backend::MemoryRef& src,
                                             uint64_t src_offset,
                                             uint64_t length) override;
  absl::StatusOr<backend::Fence> EnqueueWrite(
      const backend::MemoryRef& dst, uint64_t offset,
      std::shared_ptr<const std::string> bytes) override;
  absl::StatusOr<backend::Fence> EnqueueRead(const backend::MemoryRef& src,
                                             uint64_t offset, uint64_t length,
                                             void* host) override;
  absl::StatusOr<backend::Fence> EnqueueHostCallback(
      backend::CompletionCallback callback) override;
  absl::StatusOr<backend::Fence> EnqueueWaitFor(backend::Queue& other,
                                                backend::Fence fence) override;
  absl::StatusOr<backend::Fence> EnqueueDispatch(
      backend::DispatchRef dispatch) override;
  absl::StatusOr<backend::Fence> EnqueueGraph(
      backend::GraphRef graph,
      std::vector<uint64_t>* node_nanoseconds) override;
  void OnComplete(backend::Fence fence,
                  backend::CompletionCallback callback) override;
  backend::Fence completed() const override;
  absl::Status Wait(backend::Fence fence) override;

  // From the link.
  void OnProgress(uint64_t completed);
  void OnFailed(uint64_t fence, absl::Status status);
  void OnReadData(uint64_t fence, std::string data);
  void OnProfile(uint64_t fence, std::vector<uint64_t> nanoseconds);
  void OnLost(absl::Status status);
  absl::Duration StalledSince(absl::Time now) const override;

 private:
  // What a command holds until it completes.
  struct Held {
    std::vector<std::shared_ptr<const void>> objects;
  };
  struct ReadTarget {
    void* host = nullptr;
    uint64_t length = 0;
  };
  // Sends `request` (an Enqueue whose op is set) under the next fence, with
  // where its read data or profile goes.
  absl::StatusOr<backend::Fence> Send(hrx::executor::v1::Request& request,
                                      Held held, ReadTarget read,
                                      std::vector<uint64_t>* profile = nullptr);

  const std::shared_ptr<ExecutorLink> link_;
  const uint64_t id_;
  backend::FenceTimeline timeline_;

  // Lock order: mu_, then the timeline's (Send issues under mu_, so that
  // the executor sees this queue's fences in order); never publishes under
  // mu_.
  mutable absl::Mutex mu_;
  // Set by OnLost: no fence is issued after the one it completed, so none
  // is left outstanding (a destructor waits for the last one).
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, ReadTarget> reads_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<uint64_t>*> profiles_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, Held>> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::backend::remote

#endif  // HRX_DAEMON_BACKEND_REMOTE_REMOTE_QUEUE_H_
