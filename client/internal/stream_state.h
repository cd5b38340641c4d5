// A stream's client side: the Streams.Open call that carries its ordered
// command stream, and the batch of commands issued but not yet sent. Shared
// by the Stream, its events and the connection's flush registry.
//
// Every wait ends by a deadline: a reply not there by then is refused as
// DEADLINE_EXCEEDED ("deadline_exceeded") naming the request, and the stream
// stays usable (the daemon still runs the request; its late reply is
// dropped). A call the daemon ended breaks the stream ("stream_broken").
//
// Thread-safe: a buffer freed on another thread may flush the batch.
#ifndef HRX_CLIENT_INTERNAL_STREAM_STATE_H_
#define HRX_CLIENT_INTERNAL_STREAM_STATE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/internal/connection.h"
#include "client/internal/stream_call.h"
#include "hrx/v1/stream.grpc.pb.h"

namespace hrx::client::internal {

class StreamState final : public StreamBatch {
 public:
  // Opens the call and the daemon-side stream; registers with the
  // connection's flush registry.
  static absl::StatusOr<std::shared_ptr<StreamState>> Open(
      std::shared_ptr<Connection> connection);
  // Sends what is pending and ends the call; the daemon drains the stream.
  // Waits at most the connection's default timeout, then cancels the call
  // (the daemon still runs what it was sent).
  ~StreamState() override;

  // Adds a command; sends the batch once it reaches the flush thresholds.
  absl::Status Append(hrx::v1::Command command, uint64_t payload_bytes);
  // StreamBatch: sends the batch and waits for the daemon's acknowledgement.
  absl::Status Flush() override { return Flush(connection_->Deadline()); }
  absl::Status Flush(absl::Time deadline);
  // Sends the batch, then a sync point, and returns its reply's status.
  absl::Status Synchronize(absl::Time deadline);
  absl::StatusOr<std::string> Read(const shared::WireHandle& buffer,
                                   uint64_t offset, uint64_t length,
                                   absl::Time deadline);
  absl::StatusOr<bool> Poll(absl::Time deadline);
  absl::StatusOr<hrx::v1::Profile> LaunchProfiled(
      const shared::WireHandle& exec, absl::Time deadline);

  Connection& connection() const { return *connection_; }
  const std::shared_ptr<Connection>& shared_connection() const {
    return connection_;
  }
  const shared::WireHandle& handle() const { return handle_; }
  uint32_t queue() const { return queue_; }

 private:
  StreamState(std::shared_ptr<Connection> connection,
              std::unique_ptr<StreamTransport> call)
      : connection_(std::move(connection)), call_(std::move(call)) {}
  // A stream on its shared-memory ring, opened by Streams.OpenRing.
  static absl::StatusOr<std::shared_ptr<StreamState>> OpenOnRing(
      const std::shared_ptr<Connection>& connection, absl::Time deadline);

  absl::Status SendBatchLocked(bool ack, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `request` (after any pending batch) and reads its reply; `what`
  // names the request in a refusal.
  absl::StatusOr<hrx::v1::StreamReply> RoundTripLocked(
      hrx::v1::StreamRequest request, const char* what, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The refusal for an outcome other than kDone.
  absl::Status FailedLocked(StreamTransport::Outcome outcome, const char* what,
                            absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BrokenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Connection> connection_;
  shared::WireHandle handle_;
  uint32_t queue_ = 0;

  absl::Mutex mu_;
  const std::unique_ptr<StreamTransport> call_;
  hrx::v1::StreamRequest pending_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  // A batch was written without an acknowledgement since the last reply.
  bool unacknowledged_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // the call has ended
  absl::Status broken_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_STREAM_STATE_H_
