// The shared-memory transport of a command stream (shared/shm_ring.h): the
// same protocol as Streams.Open (StreamConversation), carried by a region
// the client maps instead of a gRPC call. It serves the region for whoever
// owns it (hrxd's ring registry, daemon/server/ring_registry.h) against the
// session's engine (stream_engine.h).
//
// Each ring has one serving thread. It takes requests off the
// submit pipe when the conversation asks for one, finishes replies too large
// for the free space, and sleeps on its doorbell when there is nothing to
// do: after work it polls for kRingServeSpin first, so a client's next
// request in a tight loop costs no wake-up; an idle ring costs no CPU but
// a check every kRingLivenessInterval that its session still exists. While
// it polls it also lends itself to the stream's queue (StreamEngine::
// Progress): where completions need polling (the HIP backend's events), a
// finished command is retired, and the reply the client spins for written,
// from this thread, with no other thread woken in between. Replies are
// written into the complete pipe by whichever thread finishes
// them (a queue's completion), so a sync's answer reaches the client
// without a hop through the serving thread.
//
// Everything in the region is the client's to scribble on: messages are
// copied out before they are parsed, positions are validated, and a broken
// ring ends only its own stream (DATA_LOSS "ring_broken", counted as a
// refusal). The region is sealed against resizing, so a client cannot make
// the server's mapping fault.
#ifndef HRX_DAEMON_STREAM_RING_SERVER_H_
#define HRX_DAEMON_STREAM_RING_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/stream/stream_conversation.h"
#include "daemon/stream/stream_engine.h"
#include "shared/shm_ring.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

// How long a ring's serving thread keeps polling after its last work
// before it sleeps on the doorbell: short where cores are few, longer (a
// client's next request after a round trip fits in it) with 4 or more.
inline constexpr absl::Duration kRingServeSpin = absl::Microseconds(50);
inline constexpr absl::Duration kRingServeSpinManyCores =
    absl::Microseconds(250);
// How often a ring checks that its session still exists (a client that
// died without closing its ring, or a process still writing to the region
// of an ended session).
inline constexpr absl::Duration kRingLivenessInterval = absl::Seconds(1);
// Wake-ups in a row that find no work before each further one is delayed
// by kRingIdleBackoff (a client ringing without work, or scribbling the
// bell, cannot keep the serving thread busy).
inline constexpr int kRingIdleWakesBeforeBackoff = 64;
inline constexpr absl::Duration kRingIdleBackoff = absl::Milliseconds(1);
// A request buffer larger than this is released after its message.
inline constexpr uint64_t kRingKeptMessageBytes = uint64_t{1} << 20;

// A region for a ring: a sealed memfd (the client can write its pages but
// cannot shrink it under the server's mapping), mapped read-write and laid
// out for the default pipes. `what` names the operation in refusals.
struct RingRegion {
  shared::UniqueFd fd;
  void* base = nullptr;
  uint64_t bytes = 0;
};
absl::StatusOr<RingRegion> CreateRingRegion(std::string_view what);
// Marks the ring at `base` finished with `status` (code and message) and
// wakes its client, unless it is finished already: what a ring's server
// does at its end, and what its region's creator does for it when the
// server is gone (an executor lost with the ring it served). Of two callers
// at once (hrxd and an executor share the region), one writes it whole
// (RingHeader::finish_claimed).
void FinishRingRegion(void* base, const absl::Status& status);

// What every ring's client reads when hrxd stops (UNAVAILABLE
// shutting_down), written by hrxd into each region before its links to the
// executors close.
absl::Status HrxdStopping();

class RingServer final : public StreamConversation {
 public:
  // Called on the serving thread as it exits, once the conversation is
  // quiet: the owner destroys the ring (from there or later).
  using Ended = std::function<void(RingServer*)>;

  // Serves the region mapped at `base` (`bytes` long; unmapped by the
  // destructor).
  RingServer(void* base, uint64_t bytes, Ended ended);
  ~RingServer() override;

  // Starts the serving thread, waiting for Run (or Abandon) to let it go:
  // taken before the ring's stream exists, so that a machine out of
  // threads refuses the ring instead of failing after it was set up.
  // RESOURCE_EXHAUSTED "too_many_rings" when no thread can be started.
  absl::Status PrepareThread();
  // The ring will not run: the waiting thread ends (joined).
  void Abandon();
  // Starts the conversation on `stream` of `engine`'s session and lets the
  // serving thread go. From here the ring ends by calling `ended`.
  void Run(std::shared_ptr<StreamEngine> engine, uint64_t stream);
  // The region's owner is stopping: the client learns at once (`tell`,
  // which is hrxd's shutting_down or, in an executor that lost hrxd
  // unannounced, daemon_unreachable), and the stream stays with its session
  // for the stop's drain.
  void StopForShutdown(const absl::Status& tell);

 private:
  shared::RingHeader& header() {
    return *static_cast<shared::RingHeader*>(base_);
  }

  void Serve();
  // Set before go_ is notified: Run's (false) or Abandon's (true) word.
  bool abandoned_ = false;
  absl::Notification go_;
  // One pass over the ring; true when it did anything.
  bool ServeOnce();
  // Asks the serving thread to stop: the conversation is cancelled and its
  // stream drained. With a non-OK `tell`, the client learns at once that
  // the ring has ended, with that code.
  void Stop(const absl::Status& tell = absl::OkStatus());
  // Marks the ring finished with `status` (code and message) for the
  // client, once.
  void Finish(const absl::Status& status);
  void Wake() { shared::RingDoorbell(header().daemon_bell); }

  // StreamConversation.
  void ReadNext() override;
  bool WriteNext(const hrx::v1::StreamReply& reply) override;
  void End(const absl::Status& status) override;

  void* const base_;  // mapped shared, read-write; unmapped at the end
  const uint64_t bytes_;
  const Ended ended_callback_;
  std::thread thread_;

  // Set by the conversation, served by the thread.
  std::atomic<bool> want_read_{false};
  std::atomic<bool> ended_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> finish_told_{false};
  bool requests_ended_ = false;  // serving thread only

  shared::MessageReader reader_;  // serving thread only
  std::string message_;           // serving thread only

  absl::Mutex write_mu_;
  shared::MessageWriter writer_ ABSL_GUARDED_BY(write_mu_);
  // A reply that did not fit at once: the serving thread finishes it.
  bool write_pending_ ABSL_GUARDED_BY(write_mu_) = false;
  bool write_broken_ ABSL_GUARDED_BY(write_mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(write_mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_STREAM_RING_SERVER_H_
