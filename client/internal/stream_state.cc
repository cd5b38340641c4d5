#include "client/internal/stream_state.h"

#include <utility>

#include "hrx/stream.h"

namespace hrx::client::internal {

std::shared_ptr<StreamState> StreamState::Create(
    std::shared_ptr<Connection> connection, uint64_t handle, uint32_t queue) {
  std::shared_ptr<StreamState> state(
      new StreamState(std::move(connection), handle, queue));
  state->connection_->Register(state);
  return state;
}

StreamState::StreamState(std::shared_ptr<Connection> connection,
                         uint64_t handle, uint32_t queue)
    : connection_(std::move(connection)), handle_(handle), queue_(queue) {
  pending_.set_stream(handle_);
}

StreamState::~StreamState() {
  {
    absl::MutexLock lock(&mu_);
    (void)SendLocked();
  }
  auto context = connection_->Context();
  hrx::v1::DestroyStreamRequest request;
  request.set_stream(handle_);
  hrx::v1::DestroyStreamResponse response;
  (void)connection_->streams().DestroyStream(context.get(), request, &response);
}

absl::Status StreamState::Append(hrx::v1::Command command,
                                 uint64_t payload_bytes) {
  absl::MutexLock lock(&mu_);
  if (!deferred_error_.ok()) return std::exchange(deferred_error_, {});
  *pending_.add_commands() = std::move(command);
  pending_bytes_ += payload_bytes;
  if (pending_bytes_ >= kBatchFlushBytes ||
      static_cast<size_t>(pending_.commands_size()) >= kBatchFlushCommands) {
    return SendLocked();
  }
  return absl::OkStatus();
}

absl::Status StreamState::FlushForCaller() {
  absl::MutexLock lock(&mu_);
  if (!deferred_error_.ok()) {
    pending_.clear_commands();  // ordered after a refused batch: not sent
    pending_bytes_ = 0;
    return std::exchange(deferred_error_, {});
  }
  return SendLocked();
}

absl::Status StreamState::Flush() {
  absl::MutexLock lock(&mu_);
  absl::Status sent = SendLocked();
  if (!sent.ok() && deferred_error_.ok()) deferred_error_ = sent;
  return sent;
}

absl::Status StreamState::SendLocked() {
  if (pending_.commands_size() == 0) return absl::OkStatus();
  auto context = connection_->Context();
  hrx::v1::SubmitResponse response;
  const grpc::Status status =
      connection_->streams().Submit(context.get(), pending_, &response);
  pending_.clear_commands();
  pending_bytes_ = 0;
  return connection_->Check(status);
}

}  // namespace hrx::client::internal
