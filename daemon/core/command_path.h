// The ordered command path of streams: creating and destroying streams,
// submitting batches (check everything, then enqueue in order), and the
// stream's sync points (Synchronize, Read, Poll) that report a deferred
// refusal and reclaim upload staging.
//
// Contract: a batch runs entirely or not at all; a refusal names the
// command's position. No caller's thread ever waits for the device: a batch
// that meets the staging or backlog bound is suspended and resumed from the
// queue's completion callback, and ordered operations arriving meanwhile
// park behind it (stream_gate.h). Completion callbacks (`done`) run exactly
// once, possibly on a backend thread, and must not call back into the core.
//
// Locking: takes one Session::mu at a time and never waits under it;
// completions registered under it run after it is released.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_COMMAND_PATH_H_
#define HRX_DAEMON_CORE_COMMAND_PATH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/core/device_set.h"
#include "daemon/core/queue_pool.h"
#include "daemon/core/session_table.h"
#include "daemon/core/stream_gate.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

class CommandPath {
 public:
  CommandPath(DeviceSet& devices, SessionTable& sessions, QueuePool& queues)
      : devices_(devices), sessions_(sessions), queues_(queues) {}

  absl::StatusOr<StreamInfo> CreateStream(uint64_t session);
  // As CreateStream, under a handle and stream id another process issued
  // (an executor serving a stream of hrxd's, under hrxd's names).
  absl::StatusOr<StreamInfo> CreateStreamAt(uint64_t session, uint64_t handle,
                                            uint64_t stream_id);
  // The handle dies at once; `done` runs after the stream's queued work.
  void DestroyStream(uint64_t session, uint64_t stream, DoneCallback done);

  // Checks every command, then enqueues all of them in order. With
  // SubmitErrors::kDefer a refusal is kept for the stream's next sync point
  // and `done` gets OK(0). `done` gets the number of commands enqueued,
  // often before Submit returns; a batch suspended at a bound
  // reports from the completion that resumes it. Past kMaxParkedOps ordered
  // operations waiting behind it: RESOURCE_EXHAUSTED "stream_busy".
  using SubmitDone = std::function<void(absl::StatusOr<size_t>)>;
  void Submit(uint64_t session, uint64_t stream, std::vector<Command> commands,
              SubmitErrors errors, SubmitDone done);
  // Keeps `refusal` (a batch refused before it reached the core, such as a
  // decode error) for the stream's next sync point, in order with the
  // stream's other operations.
  void DeferRefusal(uint64_t session, uint64_t stream, absl::Status refusal);
  // Completes after everything submitted to the stream so far; reports (and
  // clears) a deferred refusal first.
  void Synchronize(uint64_t session, uint64_t stream, DoneCallback done);
  // A hold on `bytes` of the session's tenant's reply_bytes ceiling, for a
  // read's reply from before it is made until the client has taken it.
  absl::StatusOr<ChargeRef> ReserveReplyBytes(uint64_t session, uint64_t bytes);
  // A hold on `bytes` of the session's tenant's shared_bytes ceiling (a
  // stream's ring region) for as long as the region exists. PERMISSION_DENIED
  // for an observer; RESOURCE_EXHAUSTED past the ceiling.
  absl::StatusOr<ChargeRef> ReserveSharedBytes(uint64_t session, uint64_t bytes,
                                               std::string_view what);
  // Fills `*out` (which must outlive `done`) with the view's bytes, ordered
  // after earlier work on the stream.
  void Read(uint64_t session, uint64_t stream, const ViewRef& src,
            std::string* out, DoneCallback done);
  // Without waiting: whether everything submitted so far has completed.
  // Reports a deferred refusal; reclaims completed staging.
  absl::StatusOr<bool> Poll(uint64_t session, uint64_t stream);
  absl::StatusOr<StreamStats> GetStreamStats(uint64_t session, uint64_t stream);
  // A lease on the queue the stream runs on, for a transport that polls it
  // (backend::Queue::Poll). Held, it keeps the queue from the pool's sweep.
  absl::StatusOr<QueueLease> StreamQueue(uint64_t session, uint64_t stream);

 private:
  struct SubmitJob;
  void StartSubmit(const std::shared_ptr<SubmitJob>& job, Deferred& after);
  void ContinueSubmit(const std::shared_ptr<SubmitJob>& job, Deferred& after);
  // From the completion a suspended batch waited for (`drained`: its
  // status).
  void ResumeSubmit(const std::shared_ptr<SubmitJob>& job,
                    const absl::Status& drained);

  DeviceSet& devices_;
  SessionTable& sessions_;
  QueuePool& queues_;
  std::atomic<uint64_t> next_stream_id_{1};  // StreamEntry::id, never reused
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_COMMAND_PATH_H_
