// hrxd's end of one executor process: the socket, the calls waiting for
// replies, and the queues that receive the executor's events. Shared by the
// RemoteBackend, queues, memory and kernels of that executor.
//
// Contract: once the link is lost (the executor exited, was killed, broke
// the protocol or did not answer within the call limit) every waiting call
// and every queue's pending completion gets the loss's status, and so does
// everything asked of the link afterwards.
//
// Thread-safe. A reader thread takes the executor's frames and answers
// calls; queue events go to a second thread, which runs completion callbacks
// (those may call into the link, even wait on a Call).
#ifndef HRX_DAEMON_BACKEND_REMOTE_EXECUTOR_LINK_H_
#define HRX_DAEMON_BACKEND_REMOTE_EXECUTOR_LINK_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/remote/frame_io.h"
#include "hrx/executor/v1/executor.pb.h"
#include "shared/unique_fd.h"

namespace hrx::backend::remote {

class RemoteQueue;

// What an executor's events may hold in hrxd before they are delivered
// (progress, failures, read data, profiles waiting for the delivery
// thread): past either, the executor is flooding hrxd, and its link is lost
// (the executor killed) instead of hrxd's memory growing.
inline constexpr size_t kMaxQueuedEvents = 65536;
inline constexpr uint64_t kMaxQueuedEventBytes = uint64_t{256} << 20;
// Tenants a pong's usage report may name (one executor serves one tenant,
// or the shared executor's tenants): the rest are not kept.
inline constexpr int kMaxHeldEntries = 1024;
// How long an executor may take to report a session's end (its queued work
// there run, Released with session_ended): past it, the watchdog kills it
// (its tenant's work is lost, and the close is done).
inline constexpr absl::Duration kSessionEndLimit = absl::Minutes(10);
// How long hrxd waits for executors' answers to AskReport (a status's
// current work reports, a budget refusal's settled releases); past it, an
// executor's last report stands.
inline constexpr absl::Duration kReportWait = absl::Milliseconds(100);

// UNAVAILABLE "executor_lost": the executor serving `name` (a tenant, or
// "shared") `why` ("exited with status 3", "did not answer ...").
absl::Status ExecutorLostStatus(const std::string& name,
                                const std::string& why);

class ExecutorLink {
 public:
  struct Answer {
    hrx::executor::v1::Reply reply;
    shared::UniqueFd fd;
  };
  // Describes why the executor went away (the owner reaps the process).
  using Cause = std::function<absl::Status()>;

  // Takes the socket of a started executor and reads its Hello, waiting at
  // most `start_limit` (the runtime's start, however short the call limit:
  // a device's first context can wait for the driver to tear down a killed
  // one). Calls are bounded by `call_limit`. `cause` is asked once the
  // socket ends.
  static absl::StatusOr<std::shared_ptr<ExecutorLink>> Open(
      shared::UniqueFd socket, std::string tenant, absl::Duration start_limit,
      absl::Duration call_limit, Cause cause);
  ~ExecutorLink();
  ExecutorLink(const ExecutorLink&) = delete;
  ExecutorLink& operator=(const ExecutorLink&) = delete;

  // Sends `request` (with a fresh id) and waits for its reply, at most the
  // call limit (then the link is lost as hung).
  absl::StatusOr<Answer> Call(hrx::executor::v1::Request request,
                              shared::UniqueFd fd = shared::UniqueFd());
  // Sends a one-way request.
  void Post(const hrx::executor::v1::Request& request,
            shared::UniqueFd fd = shared::UniqueFd());
  // Tells the executor hrxd let go of `object` (nothing, once the link is
  // lost: nothing is left there to forget).
  void Forget(hrx::executor::v1::Forget::Kind kind, uint64_t object);
  // What hrxd does with the executor's control events (Ask, RingEnded,
  // Released, EventAnswer):
  // run on the delivery thread, in order with completions. Null: ignored.
  using ControlHandler =
      std::function<void(const hrx::executor::v1::Event& event)>;
  // `on_lost` runs on the delivery thread once the link is lost, after the
  // events read before the loss (possibly more than once).
  using LostHandler = std::function<void()>;
  void SetControlHandler(ControlHandler handler, LostHandler on_lost = nullptr);
  // A fresh name for an object of this executor.
  uint64_t NewId() { return next_id_.fetch_add(1); }

  void Attach(uint64_t queue, RemoteQueue* target);
  void Detach(uint64_t queue);

  // The executor's id for `plan` if it was defined there (0 if not); plans
  // gone since are forgotten there.
  uint64_t CachedGraph(const backend::GraphRef& plan);
  void CacheGraph(const backend::GraphRef& plan, uint64_t id);

  // What the rings the executor serves hold, per tenant, as of its last
  // pong (at most kMaxHeldEntries entries; empty once lost).
  std::vector<hrx::executor::v1::HeldUsage> held() const;
  // The work of the rings it serves, as of its last answer (empty once
  // lost).
  hrx::executor::v1::WorkTotals work() const;
  // Asks for a current report without waiting (ReportWork, answered in
  // order with the executor's other requests); returns its id (0 once
  // lost).
  uint64_t AskReport();
  // Waits until `deadline` for the answer to AskReport's `id`: work() is
  // then as of the ask. A frozen executor only costs the wait (the
  // watchdog judges it).
  void AwaitReport(uint64_t id, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // hrxd waits for a word of the executor's (a session's end) until `by`;
  // past it, Overdue says so and the watchdog kills the executor. Returns
  // the wait's token for Kept.
  uint64_t Expect(absl::Time by);
  void Kept(uint64_t token);
  bool Overdue(absl::Time now) const;

  // Whether the delivery thread has delivered everything and the loss, and
  // runs nothing of this link's any more: only then may its last holder let
  // go of it on any thread (a link destroyed on its own delivery thread
  // would join itself).
  bool delivered() const { return delivered_.load(); }

  // OK while the executor serves.
  absl::Status lost() const;
  // When lost() stopped being OK (InfiniteFuture while it is).
  absl::Time lost_at() const;
  // Ends the link with `why` (for a hang or an exit seen by the owner).
  // Calls fail at once; queues hear of it from the delivery thread, which
  // this never waits for (a completion callback it runs may be waiting for
  // a lock the caller holds).
  void Lose(absl::Status why);
  // Whether a queue has had work outstanding without progress for longer
  // than `limit`: a RemoteQueue here, or, as of the executor's last pong, a
  // queue serving the rings it serves itself (never while events wait for
  // the delivery thread, which it does not wait for).
  bool Stalled(absl::Time now, absl::Duration limit);
  // Sends a ping unless one is outstanding or one was answered less than
  // `interval` ago (the watchdog's; never waits).
  void Ping(absl::Time now, absl::Duration interval);
  // Whether a ping has waited longer than `limit` for its answer: the
  // executor is stopped, or its main thread is stuck.
  bool Unresponsive(absl::Time now, absl::Duration limit) const;

  const hrx::executor::v1::Hello& hello() const { return hello_; }
  const std::string& tenant() const { return tenant_; }
  // Whether the executor answered any call: it started and served, so a
  // loss is not a failure to start.
  bool served() const { return served_.load(); }
  // Bytes of the executor's allocations hrxd (or queued work) still holds.
  uint64_t bytes_in_use() const { return bytes_in_use_.load(); }
  void Charge(uint64_t bytes) { bytes_in_use_.fetch_add(bytes); }
  void Uncharge(uint64_t bytes) { bytes_in_use_.fetch_sub(bytes); }

 private:
  ExecutorLink(shared::UniqueFd socket, std::string tenant,
               absl::Duration call_limit, Cause cause);
  void ReadLoop();
  void DeliverLoop();
  // Tells every attached queue the link's loss status (the delivery
  // thread's, or a callback's it runs).
  void NotifyLostDelivering() ABSL_EXCLUSIVE_LOCKS_REQUIRED(deliver_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Deliver(hrx::executor::v1::Event& event);

  const shared::UniqueFd socket_;
  const std::string tenant_;
  const absl::Duration call_limit_;
  const Cause cause_;
  FrameReader reader_;  // the reader thread's
  FrameWriter writer_;
  hrx::executor::v1::Hello hello_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> bytes_in_use_{0};
  std::atomic<bool> served_{false};

  mutable absl::Mutex mu_;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
  absl::Time lost_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  struct Pending {
    bool done = false;
    Answer answer;
  };
  absl::flat_hash_map<uint64_t, Pending*> calls_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, RemoteQueue*> queues_ ABSL_GUARDED_BY(mu_);
  ControlHandler control_ ABSL_GUARDED_BY(mu_);
  LostHandler on_lost_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> delivered_{false};
  // Expect's waits, by token: when each is due.
  absl::flat_hash_map<uint64_t, absl::Time> expected_ ABSL_GUARDED_BY(mu_);
  struct Defined {
    std::weak_ptr<const backend::GraphPlan> plan;
    uint64_t id = 0;
  };
  absl::flat_hash_map<const backend::GraphPlan*, Defined> graphs_
      ABSL_GUARDED_BY(mu_);
  // Queue events waiting for the delivery thread, in arrival order.
  // With each, the size of the frame it came in.
  std::deque<std::pair<hrx::executor::v1::Event, size_t>> events_
      ABSL_GUARDED_BY(mu_);
  uint64_t event_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // their frames' sizes
  bool reading_done_ ABSL_GUARDED_BY(mu_) = false;
  // Lose was called off the delivery thread: that thread tells the queues
  // next (Lose never waits for it).
  bool loss_unannounced_ ABSL_GUARDED_BY(mu_) = false;
  // The ping outstanding (0: none), when it went, and when one was last
  // answered.
  uint64_t ping_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time ping_sent_ ABSL_GUARDED_BY(mu_);
  absl::Time pong_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The last pong's ring_stall_ms: the executor's own queues (the rings it
  // serves), which no RemoteQueue here sees.
  absl::Duration ring_stall_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::vector<hrx::executor::v1::HeldUsage> held_ ABSL_GUARDED_BY(mu_);
  hrx::executor::v1::WorkTotals work_ ABSL_GUARDED_BY(mu_);
  // AskReport's asks not yet answered.
  absl::flat_hash_set<uint64_t> reports_asked_ ABSL_GUARDED_BY(mu_);
  // Held while an event is delivered to a queue: Detach waits for it.
  // Lock order: deliver_mu_, attached_mu_, mu_.
  absl::Mutex deliver_mu_;
  // Held by Detach, after deliver_mu_, and by Stalled, alone: keeps the
  // queues Stalled asks attached without waiting for a delivery.
  absl::Mutex attached_mu_;
  std::thread reader_thread_;
  std::thread deliver_thread_;
};

}  // namespace hrx::backend::remote

#endif  // HRX_DAEMON_BACKEND_REMOTE_EXECUTOR_LINK_H_
