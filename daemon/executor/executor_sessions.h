// The sessions whose rings this executor serves, as copies of hrxd's: the
// executor runs the same command path as hrxd (daemon/core's units over its
// own backend) against tables that hold only what hrxd installed, under
// hrxd's own names. A ring handed over by hrxd is served here, by a ring
// thread of the executor's: commands go from the client's region to this
// process's queues with no hop through hrxd (docs/architecture.md,
// "Executors").
//
// What the tables hold: for each session hrxd opened here, the buffers and
// kernels hrxd installed (each with the handle hrxd sealed for it, matched
// on all four fields: daemon/executor/installed_handles.h) and the streams
// whose rings it handed over. A handle not installed is put to hrxd, whose
// answer installs it or is the refusal a call to hrxd would get. Tenant
// code runs in this process and can read the tables: they hold handles its
// own sessions already hold, and names of objects in this executor, which
// serves one tenant (or, shared, only tenants that load no code).
//
// Threads: Open, End, Install, Revoke and ServeRing run on the executor's
// request thread, in the order hrxd sent them (so an installation hrxd
// sent before a revocation is undone by it); ring threads run the command
// path and ask through `ask`, which blocks until the request thread has
// applied hrxd's answer.
//
// Thread-safe.
#ifndef HRX_DAEMON_EXECUTOR_EXECUTOR_SESSIONS_H_
#define HRX_DAEMON_EXECUTOR_EXECUTOR_SESSIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/remote/op_codec.h"
#include "daemon/core/command_path.h"
#include "daemon/core/device_set.h"
#include "daemon/core/events.h"
#include "daemon/core/graphs.h"
#include "daemon/core/queue_pool.h"
#include "daemon/core/refusal_counter.h"
#include "daemon/core/session_table.h"
#include "daemon/core/tenants.h"
#include "daemon/executor/installed_handles.h"
#include "daemon/stream/ring_server.h"
#include "hrx/executor/v1/executor.pb.h"
#include "shared/unique_fd.h"

namespace hrx::executor {

// What a client of this executor reads once hrxd's link ended without hrxd
// ending the client's ring first, as a stopping hrxd does (shutting_down,
// written into the ring before the link closes): hrxd died, was killed, or
// broke the link's protocol.
// UNAVAILABLE daemon_unreachable, as the client would say itself, so that
// it asks a restarted hrxd why its stream ended.
absl::Status HrxdGone();

class ExecutorSessions {
 public:
  // Puts a handle this executor does not hold to hrxd and waits for its
  // answer to be applied: the object (installed by then) or the refusal.
  using Ask = InstalledHandles::Ask;
  // A ring ended here (`stream` is hrxd's handle object for its stream).
  using RingEnded = std::function<void(uint64_t session, uint64_t stream)>;
  // Objects of `session` revoked here that no queued work uses any more
  // (hrxd keeps their memory and charges until then); `session_ended`: the
  // last report of an ended session, after all its queued work.
  using Released =
      std::function<void(uint64_t session, const std::vector<uint64_t>& objects,
                         bool session_ended)>;

  ExecutorSessions(std::shared_ptr<backend::Backend> backend, Ask ask,
                   RingEnded ring_ended, Released released);
  // Ends every ring and waits for their threads.
  ~ExecutorSessions();

  // Request thread only (see above).
  absl::Status Open(const hrx::executor::v1::OpenSession& open);
  void End(const hrx::executor::v1::EndSession& end);
  absl::Status Install(const hrx::executor::v1::InstalledObject& object,
                       const backend::remote::LocalObjects& objects);
  void Revoke(const hrx::executor::v1::Revoke& revoke);
  absl::Status ServeRing(const hrx::executor::v1::ServeRing& serve,
                         shared::UniqueFd region);
  // Runs a client's call about an event or a stream of a session here (its
  // events, its streams' queues, staging and caches are here); `done` gets
  // the status and, where OK, the answer's fields (possibly on a queue's
  // thread, once the work waited for has run).
  using CallDone = std::function<void(absl::Status status,
                                      hrx::executor::v1::EventAnswer answer)>;
  void Call(const hrx::executor::v1::EventCall& call, CallDone done);

  // Rings served now.
  size_t rings() const;
  // The longest the queues of the rings served here have had work
  // outstanding without progress: hrxd's watchdog sees this work only
  // through it (reported with each ping's answer). Any thread.
  absl::Duration LongestStall(absl::Time now) const;
  // What the sessions here hold now, by tenant: the usage hrxd does not
  // charge itself (commands in flight, reply bytes, events). Any thread.
  std::vector<hrx::executor::v1::HeldUsage> Held() const;
  // The work of the sessions here (their commands, caches and pools).
  hrx::executor::v1::WorkTotals Work() const;

 private:
  void Ended(daemon::RingServer* ring);  // from the ring's thread
  // Reports `objects` released once every stream of `session` has run what
  // it had queued, behind any batch suspended or parked on it; `keep` (what
  // the objects were) lives until then. Registers on the queues from
  // `after`, run once the session's lock is released. `session_ended`: the
  // session's end, reported even with no objects.
  void ReleaseAfterQueuedWork(daemon::Session& session, uint64_t id,
                              std::vector<uint64_t> objects,
                              std::shared_ptr<const void> keep,
                              bool session_ended, daemon::Deferred& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
  // Takes `object` out of `session`'s tables (whatever is installed in its
  // slot, an older generation included, which hrxd no longer holds) and
  // reports it released after the queued work that may use it.
  // `report_missing`: report `object` even where nothing was installed.
  void RemoveAndRelease(daemon::Session& session, uint64_t id, uint64_t object,
                        bool report_missing, daemon::Deferred& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);

  // First: the units' queues call them as they drain.
  const RingEnded ring_ended_;
  const Released released_;
  std::shared_ptr<backend::Backend> backend_;
  daemon::SingleDevice devices_;
  daemon::SessionTable sessions_;
  daemon::QueuePool queues_;
  daemon::CommandPath commands_;
  daemon::Graphs graphs_;
  daemon::Events events_;
  daemon::RefusalCounter refusals_;
  InstalledHandles handles_;

  mutable absl::Mutex mu_;
  // One per tenant: its ceilings as hrxd set them.
  absl::flat_hash_map<std::string, std::shared_ptr<daemon::Tenant>> tenants_
      ABSL_GUARDED_BY(mu_);
  struct Ring {
    uint64_t session = 0;
    uint64_t stream = 0;
    std::unique_ptr<daemon::RingServer> server;
  };
  absl::flat_hash_map<daemon::RingServer*, Ring> rings_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_EXECUTOR_SESSIONS_H_
