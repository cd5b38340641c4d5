// The shared-memory transport of one stream (shared/shm_ring.h): the same
// messages as a Streams.Open call, through a region hrxd created and this
// process mapped. Streams.OpenRing creates the stream and the region; the
// region's descriptor comes through the side channel.
//
// Waits spin for kRingClientSpin, then sleep on the region's doorbell in
// slices of at most kRingClientSlice, between which hrxd's liveness is
// checked (a pidfd of the daemon, taken when the region was redeemed): a
// daemon that died ends the stream (kCallOver, UNAVAILABLE) instead of
// leaving its waiters to their deadlines.
//
// Thread-safe; one writer and one awaiter at a time (StreamState's lock).
#ifndef HRX_CLIENT_INTERNAL_RING_CALL_H_
#define HRX_CLIENT_INTERNAL_RING_CALL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/internal/connection.h"
#include "client/internal/stream_transport.h"
#include "shared/shm_ring.h"
#include "shared/unique_fd.h"

namespace hrx::client::internal {

// How long a waiter polls the ring before it sleeps on the doorbell: short
// where cores are few (the poll would take the daemon's core), longer where
// a round trip through an executor fits in it (4 cores or more).
inline constexpr absl::Duration kRingClientSpin = absl::Microseconds(30);
inline constexpr absl::Duration kRingClientSpinManyCores =
    absl::Microseconds(250);
// The longest single sleep on the doorbell between liveness checks.
inline constexpr absl::Duration kRingClientSlice = absl::Milliseconds(50);

class RingCall final : public StreamTransport {
 public:
  struct Opened {
    std::unique_ptr<RingCall> call;
    hrx::v1::Handle stream;
    uint32_t queue = 0;
  };
  // Asks hrxd for a ring stream and maps its region. The daemon's refusal
  // passes through; FAILED_PRECONDITION "ring_unavailable" when the region
  // cannot be mapped or is not a ring of this version.
  static absl::StatusOr<Opened> Open(Connection& connection,
                                     absl::Time deadline);
  ~RingCall() override;

  Outcome Write(hrx::v1::StreamRequest request, absl::Time deadline) override;
  Outcome Await(uint64_t token, absl::Time deadline,
                hrx::v1::StreamReply* out) override;
  grpc::Status Close(absl::Time deadline) override;

 private:
  RingCall(void* base, uint64_t bytes, shared::UniqueFd daemon);
  shared::RingHeader& header() {
    return *static_cast<shared::RingHeader*>(base_);
  }
  // Waits until `ready` (checked with the lock held) or the deadline, the
  // daemon's end or its death.
  enum class Wake { kReady, kDeadline, kOver };
  template <typename Ready>
  Wake WaitFor(Ready ready, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes every whole reply off the ring into replies_ (dropping abandoned
  // ones). False when the ring is broken.
  bool DrainRepliesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool OverLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void* const base_;
  const uint64_t bytes_;
  const shared::UniqueFd daemon_;  // a pidfd of hrxd, or invalid

  absl::Mutex mu_;
  shared::MessageWriter writer_ ABSL_GUARDED_BY(mu_);
  shared::MessageReader reader_ ABSL_GUARDED_BY(mu_);
  std::string message_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, hrx::v1::StreamReply> replies_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> abandoned_ ABSL_GUARDED_BY(mu_);
  // Why the stream is over on this side (a broken ring, a dead daemon).
  grpc::Status over_ ABSL_GUARDED_BY(mu_);
  bool is_over_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_RING_CALL_H_
