// Rings served by executors (--executor_rings): for a tenant whose work runs
// in an executor, hrxd makes the ring's region, charges it and seals its
// stream as for any ring, then hands the region to the executor, whose ring
// thread serves it against copies of the session's tables
// (daemon/executor/executor_sessions.h). hrxd is then off the stream's
// per-command path; it stays the authority on what the session may name:
//
// - it opens the session in the executor before the session's first ring;
// - it answers the executor's Asks about handles not installed there, for
//   sessions it handed to that executor only, with the object to install
//   (a buffer's memory as that executor names it, a kernel) or with the
//   refusal a call to hrxd would get;
// - it revokes an object there before it answers the free or unload
//   (SessionMirror), and ends the session there when it ends here.
//
// An answer and a revocation of the same session are sent under one lock,
// in the order hrxd decided them, and the executor applies them in that
// order: an object freed after hrxd described it is revoked after it was
// installed, never before.
//
// Thread-safe. Asks are answered on the link's delivery thread.
#ifndef HRX_DAEMON_SERVER_EXECUTOR_RINGS_H_
#define HRX_DAEMON_SERVER_EXECUTOR_RINGS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/remote/executor_link.h"
#include "daemon/core/core.h"
#include "daemon/core/session_mirrors.h"
#include "hrx/executor/v1/executor.pb.h"
#include "hrx/v1/common.pb.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

class ExecutorRings final : public SessionMirror {
 public:
  // Sets itself as `core`'s session mirror.
  explicit ExecutorRings(Core& core);
  // Stops answering: no mirror, no link handlers.
  ~ExecutorRings() override;

  // The link to the executor that runs `stream` of `session` (hrxd's side
  // of it: its queue is that executor's); null where it runs in hrxd.
  std::shared_ptr<backend::remote::ExecutorLink> LinkOf(uint64_t session,
                                                        uint64_t stream);

  // Hands the ring of `stream` (sealed for the client as `sealed`, hrxd's
  // StreamEntry id `stream_id`) of `session` to `link`'s executor, which
  // serves `region` from now on. `hold` (the region's charge) is kept until
  // the session ends. Opens the session there first.
  // (hrxd's stream object is `sealed.object()`.)
  // `base` is hrxd's mapping of the region (unmapped when the ring ends);
  // `slot` (the ring's place in its tenant's count) is kept as long.
  absl::Status HandOver(
      const std::shared_ptr<backend::remote::ExecutorLink>& link,
      uint64_t session, const hrx::v1::Handle& sealed, uint64_t stream_id,
      shared::UniqueFd region, void* base, uint64_t region_bytes,
      ChargeRef hold, std::shared_ptr<const void> slot);
  // hrxd is stopping: every ring an executor serves tells its client
  // (shutting_down), as hrxd's own rings do.
  void StopAll();

  // Puts a client's event call to the executor serving `session`'s rings
  // (events recorded on them live there); `done` gets its answer, on a
  // link's delivery thread, or the session's end. False where no executor
  // serves the session (`done` is not called).
  using EventDone = std::function<void(absl::StatusOr<bool>)>;
  bool CallEvent(uint64_t session, uint64_t event,
                 hrx::executor::v1::EventCall::Op op, EventDone done);
  // Puts a client's call about `stream` of `session` (GetStreamStats,
  // Poll, Synchronize, DestroyStream: an OP_STREAM_*) to the executor
  // serving its ring, where its queue, staging and caches are; `done` gets
  // the answer, on a link's delivery thread, or the session's end. False
  // where hrxd serves the stream itself (`done` is not called).
  using AnswerDone =
      std::function<void(absl::StatusOr<hrx::executor::v1::EventAnswer>)>;
  bool CallStream(uint64_t session, uint64_t stream,
                  hrx::executor::v1::EventCall::Op op, AnswerDone done);

  // Whether an executor serves the ring of `stream` of `session`.
  bool ServesStream(uint64_t session, uint64_t stream) const;

  // SessionMirror.
  void Revoke(uint64_t session, uint64_t object) override;
  void EndSession(uint64_t session, const absl::Status& why,
                  std::function<void()> ended) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Asks each executor still to report a release of `session`'s for its
  // work report and waits for the answers (at most kReportWait): the link
  // delivers in order, so the Released it sent before has been handled.
  void SettleReleases(uint64_t session) override ABSL_LOCKS_EXCLUDED(mu_);

  // Sessions with a ring in an executor.
  size_t sessions() const;
  // Objects revoked there and not yet released by their executor.
  size_t releasing() const;

 private:
  // A ring handed to an executor, as hrxd keeps it.
  struct HandedRing {
    HandedRing(ChargeRef charge, void* base, uint64_t bytes,
               std::shared_ptr<const void> slot)
        : charge(std::move(charge)),
          slot(std::move(slot)),
          base(base),
          bytes(bytes) {}
    ~HandedRing();  // unmaps
    ChargeRef charge;
    std::shared_ptr<const void> slot;
    void* const base;
    const uint64_t bytes;
  };
  // A session handed to an executor.
  struct Served {
    std::shared_ptr<backend::remote::ExecutorLink> link;
    // Orders this session's answers and revocations on the link.
    std::shared_ptr<absl::Mutex> order;
    // Its rings, by hrxd's stream object: the region's charge (given back
    // when the ring ends there) and hrxd's mapping of it, through which
    // hrxd ends the ring for its client if the executor is lost with it.
    absl::flat_hash_map<uint64_t, std::shared_ptr<HandedRing>> holds;
    bool opened = false;  // the executor has it
    size_t calls = 0;     // its event and stream calls waiting for answers
    // What the executor was told each installed object is: kept (its
    // memory not reused, its charge held) until the executor reports that
    // no queued work uses it.
    absl::flat_hash_map<uint64_t, std::shared_ptr<const void>> installed;
  };
  // Revoked objects the executor has not released yet.
  struct Releasing {
    std::weak_ptr<backend::remote::ExecutorLink> link;
    std::shared_ptr<const void> keep;
  };
  // What the links' control handlers hold: a delivery thread that copied
  // a handler just before it was cleared finds `self` null, and the
  // destructor waits for calls in progress.
  struct Gate {
    absl::Mutex mu;
    ExecutorRings* self ABSL_GUARDED_BY(mu) = nullptr;
    int active ABSL_GUARDED_BY(mu) = 0;
  };
  // Runs `call` on the ExecutorRings behind `gate`, unless it is gone.
  static void ThroughGate(const std::shared_ptr<Gate>& gate,
                          const std::function<void(ExecutorRings&)>& call);
  // `link` is lost: lets go of what it will never release, and the closes
  // waiting for its sessions' ends are done.
  void OnLost(const std::shared_ptr<backend::remote::ExecutorLink>& link)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status OpenThere(
      const std::shared_ptr<backend::remote::ExecutorLink>& link,
      uint64_t session);
  void OnControl(const std::weak_ptr<backend::remote::ExecutorLink>& link,
                 const hrx::executor::v1::Event& event)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Answer(const std::shared_ptr<backend::remote::ExecutorLink>& link,
              const hrx::executor::v1::Ask& ask);
  // What to install for the answer to `ask`, or why not.
  // (and what to keep while it is installed).
  absl::StatusOr<std::pair<hrx::executor::v1::InstalledObject,
                           std::shared_ptr<const void>>>
  Describe(const std::shared_ptr<backend::remote::ExecutorLink>& link,
           const hrx::executor::v1::Ask& ask);

  Core& core_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Served> served_ ABSL_GUARDED_BY(mu_);
  // By session and object, oldest revocation first (a graph exec can be
  // installed and revoked more than once; its executor releases them in
  // that order).
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, std::deque<Releasing>>
      releasing_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  // Puts `call` (its call id set here) to the executor serving `session`
  // (and, where `stream` is not 0, that stream's ring); false where none.
  bool Put(uint64_t session, uint64_t stream, hrx::executor::v1::EventCall call,
           AnswerDone done) ABSL_LOCKS_EXCLUDED(mu_);

  // Event and stream calls waiting for their executor's answer, by call id.
  struct EventCallWaiting {
    uint64_t session = 0;
    std::weak_ptr<backend::remote::ExecutorLink> link;
    AnswerDone done;
  };
  absl::flat_hash_map<uint64_t, EventCallWaiting> event_calls_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_event_call_ ABSL_GUARDED_BY(mu_) = 1;
  // Sessions ended here whose executor has not yet reported their end
  // (Released with session_ended): the closes waiting for it.
  struct Ending {
    std::weak_ptr<backend::remote::ExecutorLink> link;
    std::function<void()> ended;
    absl::flat_hash_map<uint64_t, std::shared_ptr<HandedRing>> holds;
    // The link's Expect token, due backend::remote::kSessionEndLimit.
    uint64_t promise = 0;
  };
  absl::flat_hash_map<uint64_t, Ending> ending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // StopAll ran
  // Links whose control events come here, to let go of at the end.
  std::vector<std::weak_ptr<backend::remote::ExecutorLink>> links_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_EXECUTOR_RINGS_H_
