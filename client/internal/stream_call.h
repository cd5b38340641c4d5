// The Streams.Open call of one stream, on gRPC's callback API, so that no
// wait on it is unbounded: a reply is awaited until a deadline, and a reply
// that arrives after its waiter gave up is dropped when it comes, leaving the
// call usable for the next request.
//
// Writes are queued and sent one at a time; Write waits (until its deadline)
// while kMaxQueuedWriteBytes are already queued, which is the backpressure
// the blocking API had from gRPC's flow control.
//
// Lifetime: the owner destroys the call on its own thread, after gRPC is
// done with it (the destructor cancels a call still running and waits for
// that). It must never be destroyed on a gRPC thread: its context holds a
// reference to the channel, and a channel's last reference dropped on one of
// gRPC's callback threads makes that thread join itself.
//
// Thread-safe.
#ifndef HRX_CLIENT_INTERNAL_STREAM_CALL_H_
#define HRX_CLIENT_INTERNAL_STREAM_CALL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/internal/stream_transport.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "hrx/v1/stream.grpc.pb.h"

namespace hrx::client::internal {

// Bytes of requests queued for sending before Write waits.
inline constexpr uint64_t kMaxQueuedWriteBytes = uint64_t{16} << 20;

class StreamCall final : public grpc::ClientBidiReactor<hrx::v1::StreamRequest,
                                                        hrx::v1::StreamReply>,
                         public StreamTransport {
 public:
  // Starts the call on `stub`; `context` carries the session metadata.
  static std::unique_ptr<StreamCall> Start(
      hrx::v1::Streams::Stub& stub,
      std::unique_ptr<grpc::ClientContext> context);
  ~StreamCall() override;

  // Queues `request` for sending, in order.
  Outcome Write(hrx::v1::StreamRequest request, absl::Time deadline) override;
  // Waits for the reply to the request sent with `token`. Past the deadline
  // the token is abandoned: its reply is dropped when it arrives.
  Outcome Await(uint64_t token, absl::Time deadline,
                hrx::v1::StreamReply* out) override;
  // Ends the call after the queued writes (the daemon then drains the
  // stream and ends it) and waits for its end until `deadline`; past it,
  // cancels the call. Returns the call's status.
  grpc::Status Close(absl::Time deadline) override;

  // grpc::ClientBidiReactor.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  explicit StreamCall(std::unique_ptr<grpc::ClientContext> context)
      : context_(std::move(context)) {}

  // Starts the next queued write, or the half-close once the queue drained.
  void StartNextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<grpc::ClientContext> context_;
  hrx::v1::StreamReply incoming_;  // the read in flight; one at a time

  absl::Mutex mu_;
  std::deque<hrx::v1::StreamRequest> writes_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool close_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_started_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_over_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, hrx::v1::StreamReply> replies_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> abandoned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_STREAM_CALL_H_
