// The shared-memory transport of a command stream (shared/shm_ring.h): the
// same protocol as Streams.Open (StreamConversation), carried by a region
// the client maps instead of a gRPC call.
//
// Each ring has one serving thread in hrxd. It takes requests off the
// submit pipe when the conversation asks for one, finishes replies too large
// for the free space, and sleeps on its doorbell when there is nothing to
// do: after work it polls for kRingServeSpin first, so a client's next
// request in a tight loop costs no wake-up; an idle ring costs no CPU but
// a check every kRingLivenessInterval that its session still exists.
// Replies are written into the complete pipe by whichever thread finishes
// them (a queue's completion), so a sync's answer reaches the client
// without a hop through the serving thread.
//
// Everything in the region is the client's to scribble on: messages are
// copied out before they are parsed, positions are validated, and a broken
// ring ends only its own stream (DATA_LOSS "ring_broken", counted as a
// refusal). The region is sealed against resizing, so a client cannot make
// hrxd's mapping fault.
#ifndef HRX_DAEMON_SERVER_RING_STREAM_H_
#define HRX_DAEMON_SERVER_RING_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/core/core.h"
#include "daemon/server/decode.h"
#include "daemon/server/stream_conversation.h"
#include "shared/shm_ring.h"

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

// A ring handed to a client: what OpenRing answers.
struct OpenedRing {
  uint64_t stream = 0;  // the stream object (to seal into a handle)
  uint32_t queue = 0;
  std::string ticket;
  uint64_t region_bytes = 0;
};

class RingStream;

// The rings of one daemon: opens them, and ends them all at shutdown.
// Thread-safe.
// Rings (each a serving thread in hrxd) a tenant may have open at once,
// and all tenants together: past either, OpenRing is refused with
// RESOURCE_EXHAUSTED "too_many_rings" (libhrx then opens the stream as a
// gRPC call, which costs hrxd no thread of its own).
inline constexpr size_t kMaxRingsPerTenant = 64;
inline constexpr size_t kMaxRings = 1024;

class RingRegistry {
 public:
  explicit RingRegistry(Core& core) : core_(core) {}
  ~RingRegistry();  // Shutdown(), if not yet

  // Creates a stream for `caller`'s session with a ring region charged to
  // its tenant's shared_bytes, and a ticket for the region's descriptor.
  // FAILED_PRECONDITION "peer_not_visible" for a caller without a visible
  // process (remote, or another PID namespace): only a local process can
  // map the region. Refusals of CreateStream and the budget pass through.
  absl::StatusOr<OpenedRing> Open(const Caller& caller,
                                  const PeerIdentity& peer);

  // hrxd is stopping: every ring tells its client at once (UNAVAILABLE, as
  // a stopping server ends its calls) and stops taking requests. Its stream
  // stays with its session, which the stop drains with every queue: gRPC
  // still answers unary calls until its own shutdown, and one naming the
  // stream must not find it freed. Does not wait.
  void StopAll();
  // StopAll, then waits for every ring to end.
  void Shutdown();

  // Rings whose serving thread runs.
  size_t live() const;

 private:
  friend class RingStream;
  void Ended(RingStream* ring);  // from its serving thread, as it exits

  Core& core_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RingStream*, std::unique_ptr<RingStream>> rings_
      ABSL_GUARDED_BY(mu_);
  // Open rings by tenant, for kMaxRingsPerTenant (those being opened
  // included), and rings being opened, not yet in rings_.
  absl::flat_hash_map<std::string, size_t> per_tenant_ ABSL_GUARDED_BY(mu_);
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

class RingStream final : public StreamConversation {
 public:
  ~RingStream() override;

 private:
  friend class RingRegistry;
  struct Region {
    void* base = nullptr;  // mapped shared, read-write; unmapped at the end
    uint64_t bytes = 0;
  };

  RingStream(Core& core, RingRegistry& registry, Region region,
             ChargeRef charge, std::string tenant);
  shared::RingHeader& header() {
    return *static_cast<shared::RingHeader*>(region_.base);
  }

  // Starts the serving thread, waiting for Run (or Abandon) to let it go:
  // taken before the ring's stream exists, so that a machine out of
  // threads refuses the ring instead of failing after it was set up.
  absl::Status PrepareThread();
  // The ring will not run: the waiting thread ends (joined).
  void Abandon();
  // Starts the conversation on `stream` and lets the serving thread go.
  void Run(const Caller& caller, uint64_t stream);
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
  // hrxd is stopping: the client learns at once (shutting_down), and the
  // stream stays with its session for the stop's drain.
  void StopForShutdown();
  // Marks the ring finished with `status` (code and message) for the
  // client, once.
  void Finish(const absl::Status& status);
  void Wake() { shared::RingDoorbell(header().daemon_bell); }

  // StreamConversation.
  void ReadNext() override;
  bool WriteNext(const hrx::v1::StreamReply& reply) override;
  void End(const absl::Status& status) override;

  RingRegistry& registry_;
  Region region_;
  const ChargeRef charge_;    // the region's shared_bytes
  const std::string tenant_;  // whose ring it is (the registry's count)
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

#endif  // HRX_DAEMON_SERVER_RING_STREAM_H_
