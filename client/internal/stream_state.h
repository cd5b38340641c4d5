// A stream's client side: the Streams.Open call that carries its ordered
// command stream, and the batch of commands issued but not yet sent. Shared
// by the Stream, its events and the connection's flush registry.
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
#include "client/internal/connection.h"
#include "grpcpp/support/sync_stream.h"
#include "hrx/v1/stream.grpc.pb.h"

namespace hrx::client::internal {

class StreamState final : public StreamBatch {
 public:
  // Opens the call and the daemon-side stream; registers with the
  // connection's flush registry.
  static absl::StatusOr<std::shared_ptr<StreamState>> Open(
      std::shared_ptr<Connection> connection);
  // Sends what is pending and ends the call; the daemon drains the stream.
  ~StreamState() override;

  // Adds a command; sends the batch once it reaches the flush thresholds.
  absl::Status Append(hrx::v1::Command command, uint64_t payload_bytes);
  // StreamBatch: sends the batch and waits for the daemon's acknowledgement.
  absl::Status Flush() override;
  // Sends the batch, then a sync point, and returns its reply's status.
  absl::Status Synchronize();
  absl::StatusOr<std::string> Read(const shared::WireHandle& buffer,
                                   uint64_t offset, uint64_t length);
  absl::StatusOr<bool> Poll();
  absl::StatusOr<hrx::v1::Profile> LaunchProfiled(
      const shared::WireHandle& exec);

  Connection& connection() const { return *connection_; }
  const std::shared_ptr<Connection>& shared_connection() const {
    return connection_;
  }
  const shared::WireHandle& handle() const { return handle_; }
  uint32_t queue() const { return queue_; }

 private:
  using Call =
      grpc::ClientReaderWriter<hrx::v1::StreamRequest, hrx::v1::StreamReply>;
  StreamState(std::shared_ptr<Connection> connection,
              std::unique_ptr<grpc::ClientContext> context,
              std::unique_ptr<Call> call);

  absl::Status SendBatchLocked(bool ack) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `request` (after any pending batch) and reads its reply.
  absl::StatusOr<hrx::v1::StreamReply> RoundTripLocked(
      hrx::v1::StreamRequest request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BrokenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Connection> connection_;
  shared::WireHandle handle_;
  uint32_t queue_ = 0;

  absl::Mutex mu_;
  const std::unique_ptr<grpc::ClientContext> context_;
  const std::unique_ptr<Call> call_ ABSL_GUARDED_BY(mu_);
  hrx::v1::StreamRequest pending_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  // A batch was written without an acknowledgement since the last reply.
  bool unacknowledged_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // Finish already called
  absl::Status broken_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_STREAM_STATE_H_
