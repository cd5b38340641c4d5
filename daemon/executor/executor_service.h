// The executor's side of hrxd's executor protocol: runs the requests hrxd
// sends against the executor's own backend, and reports completions,
// failures, read data and profiles back.
//
// Every object is named by hrxd's id for it; fences are hrxd's (1, 2, 3...
// per queue), each mapped to the real queue's fence that completes it.
// Requests are handled in order on the calling thread (Serve); completion
// callbacks run on backend threads and only queue events.
#ifndef HRX_DAEMON_EXECUTOR_EXECUTOR_SERVICE_H_
#define HRX_DAEMON_EXECUTOR_EXECUTOR_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/remote/frame_io.h"
#include "daemon/backend/remote/op_codec.h"
#include "daemon/executor/executor_sessions.h"
#include "hrx/executor/v1/executor.pb.h"

namespace hrx::executor {

// How long a ring thread waits for hrxd's answer about a handle (hrxd
// answers at once; past it hrxd is stopping or stuck).
inline constexpr absl::Duration kAskLimit = absl::Seconds(60);

class ExecutorService final : private backend::remote::LocalObjects {
 public:
  ExecutorService(backend::Backend& backend, int socket);
  ~ExecutorService() override;

  // Sends Hello, then handles requests until hrxd closes the socket.
  void Serve();

 private:
  using Request = hrx::executor::v1::Request;
  struct QueueState {
    std::unique_ptr<backend::Queue> queue;
    backend::Fence last_real = 0;  // the real fence of the last command
    // hrxd's fences not yet known complete, with their real fences.
    std::deque<std::pair<uint64_t, backend::Fence>> pending;
    // Completed up to (hrxd's fence): every fence up to it has completed
    // and its callback has finished (so its ReadData, Profile or
    // QueueFailed is queued ahead of any Progress past it).
    std::atomic<uint64_t> completed{0};
    // Fences past `completed` whose callbacks have finished: callbacks of
    // one real fence may run on two threads at once (the backend's, and
    // inline in OnComplete once the fence is published), so they finish
    // out of order; `completed` only advances over an unbroken run.
    absl::Mutex finished_mu;
    std::set<uint64_t> finished ABSL_GUARDED_BY(finished_mu);
    std::atomic<bool> failed{false};
    // hrxd's fence of the last command enqueued (Serve's thread writes it).
    std::atomic<uint64_t> enqueued{0};
  };

  void Handle(const Request& request);
  // `with_work`: carry the sessions' work report (it waits for each
  // session's lock; the reader thread's ping answers go without it).
  void Reply(uint64_t id, const absl::Status& status,
             hrx::executor::v1::Reply reply = {},
             shared::UniqueFd fd = shared::UniqueFd(), bool with_work = true);
  absl::Status Enqueue(const hrx::executor::v1::Enqueue& enqueue);
  // Runs `done` with the status of hrxd's fence `fence` once real fence
  // `real` of `state` has completed, then reports progress.
  void Complete(uint64_t queue, QueueState& state, uint64_t fence,
                backend::Fence real, absl::Status refused,
                std::function<void(absl::Status)> done = {});
  // backend::remote::LocalObjects, for decoding hrxd's ops.
  absl::StatusOr<backend::MemoryRef> Memory(uint64_t id) const override;
  absl::StatusOr<backend::KernelRef> Kernel(uint64_t id) const override;
  absl::StatusOr<backend::GraphRef> Graph(uint64_t id) const override;
  // Sends Progress for queues whose completion moved since the last report.
  void SendProgress();
  // Whether hrxd has sent more than Serve has read yet (more work coming:
  // its progress can wait for the reporter).
  bool MoreRequestsWaiting() const;
  // The reporter thread: SendProgress whenever a queue's completion moved
  // (one thread, so a busy queue's many completions become one event).
  void ReportProgress();
  // Ends the process soon after a fault lost the device context (the
  // backend's OnDeviceLost handler).
  static void ExitForLostDevice(const absl::Status& why);
  // A ring thread's question to hrxd about a handle not installed here;
  // waits until Serve's thread has applied the answer.
  absl::StatusOr<uint64_t> AskHrxd(const shared::WireHandle& handle,
                                   uint64_t session, shared::HandleKind kind,
                                   std::string_view what);
  // Serve's thread: applies hrxd's answer and lets its asker go.
  void Answer(const hrx::executor::v1::AskAnswer& answer);

  backend::Backend& backend_;
  const int socket_;
  backend::remote::FrameReader reader_;
  backend::remote::FrameWriter writer_;

  // Touched only by Serve's thread (its reader thread reads frames).
  shared::UniqueFd incoming_fd_;  // of the request being handled
  absl::flat_hash_map<uint64_t, backend::MemoryRef> memories_;
  absl::flat_hash_map<uint64_t, backend::KernelRef> kernels_;
  absl::flat_hash_map<uint64_t, backend::GraphRef> graphs_;
  // Defined dispatches; a definition that failed keeps its reason, which
  // its launches report (DefineDispatch is one-way).
  absl::flat_hash_map<uint64_t, absl::StatusOr<backend::DispatchRef>>
      dispatches_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<QueueState>> queues_;

  // Requests read off the socket by Serve's reader thread (which answers
  // pings itself), for Serve's thread to handle in order.
  struct Incoming {
    Request request;
    shared::UniqueFd fd;  // the descriptor it carried (ImportMemory)
  };
  mutable absl::Mutex requests_mu_;
  std::deque<Incoming> requests_ ABSL_GUARDED_BY(requests_mu_);
  bool requests_done_ ABSL_GUARDED_BY(requests_mu_) = false;

  // Asks waiting for hrxd's answer, by id; failed once hrxd is gone.
  struct PendingAsk {
    bool done = false;
    absl::StatusOr<uint64_t> answer;
  };
  absl::Mutex asks_mu_;
  absl::flat_hash_map<uint64_t, PendingAsk*> asks_ ABSL_GUARDED_BY(asks_mu_);
  uint64_t next_ask_ ABSL_GUARDED_BY(asks_mu_) = 1;
  bool hrxd_gone_ ABSL_GUARDED_BY(asks_mu_) = false;

  absl::Mutex mu_;
  // Queues whose completion moved since the last report.
  absl::flat_hash_map<uint64_t, QueueState*> dirty_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reporter_;
  // The rings hrxd handed over, and the sessions they serve. Last: its
  // rings end (and stop asking) before anything above goes.
  std::unique_ptr<ExecutorSessions> sessions_;
};

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_EXECUTOR_SERVICE_H_
