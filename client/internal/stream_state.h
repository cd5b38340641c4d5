// A stream's client-side state: its handle and the batch of commands issued
// but not yet sent. Shared by the Stream and the Connection's flush registry.
//
// Thread-safe: a buffer freed on another thread may flush the batch.
#ifndef HRX_CLIENT_INTERNAL_STREAM_STATE_H_
#define HRX_CLIENT_INTERNAL_STREAM_STATE_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/connection.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::client::internal {

class StreamState final : public StreamBatch {
 public:
  // Registers the new state with the connection's flush registry.
  static std::shared_ptr<StreamState> Create(
      std::shared_ptr<Connection> connection, uint64_t handle, uint32_t queue);
  ~StreamState() override;  // sends what is pending, then destroys the stream

  // Adds a command; sends the batch once it reaches the flush thresholds.
  absl::Status Append(hrx::v1::Command command, uint64_t payload_bytes);
  // Sends the batch for the stream's own caller: an error left by an earlier
  // flush from elsewhere is returned first.
  absl::Status FlushForCaller();
  // StreamBatch: sends the batch on behalf of another object (a buffer being
  // freed); a failure is kept for the stream's next call.
  absl::Status Flush() override;

  Connection& connection() const { return *connection_; }
  const std::shared_ptr<Connection>& shared_connection() const {
    return connection_;
  }
  uint64_t handle() const { return handle_; }
  uint32_t queue() const { return queue_; }

 private:
  StreamState(std::shared_ptr<Connection> connection, uint64_t handle,
              uint32_t queue);
  absl::Status SendLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Connection> connection_;
  const uint64_t handle_;
  const uint32_t queue_;

  absl::Mutex mu_;
  hrx::v1::SubmitRequest pending_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status deferred_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_STREAM_STATE_H_
