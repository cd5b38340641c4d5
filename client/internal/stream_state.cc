#include "client/internal/stream_state.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "hrx/stream.h"
#include "shared/refusal.h"

namespace hrx::client::internal {
namespace {

absl::Status ReplyStatus(const hrx::v1::StreamReply& reply) {
  if (reply.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(reply.code()),
                      reply.message());
}

}  // namespace

absl::StatusOr<std::shared_ptr<StreamState>> StreamState::Open(
    std::shared_ptr<Connection> connection) {
  std::unique_ptr<grpc::ClientContext> context = connection->Context();
  std::unique_ptr<Call> call = connection->streams().Open(context.get());
  std::shared_ptr<StreamState> state(
      new StreamState(connection, std::move(context), std::move(call)));
  hrx::v1::StreamRequest open;
  open.mutable_open();
  absl::StatusOr<hrx::v1::StreamReply> reply;
  {
    absl::MutexLock lock(&state->mu_);
    reply = state->RoundTripLocked(std::move(open));
  }
  if (!reply.ok()) return reply.status();
  state->handle_ = FromProto(reply->opened().stream());
  state->queue_ = reply->opened().queue();
  {
    absl::MutexLock lock(&state->mu_);
    state->pending_.mutable_batch();
  }
  connection->Register(state);
  return state;
}

StreamState::StreamState(std::shared_ptr<Connection> connection,
                         std::unique_ptr<grpc::ClientContext> context,
                         std::unique_ptr<Call> call)
    : connection_(std::move(connection)),
      context_(std::move(context)),
      call_(std::move(call)) {}

StreamState::~StreamState() {
  absl::MutexLock lock(&mu_);
  if (broken_) return;
  (void)SendBatchLocked(/*ack=*/false);
  if (broken_) return;
  call_->WritesDone();
  // Finish waits for the daemon to drain and destroy the stream.
  (void)call_->Finish();
}

absl::Status StreamState::BrokenLocked() {
  if (!broken_) {
    broken_ = true;
    call_->WritesDone();
    broken_status_ = connection_->Check(call_->Finish());
    if (broken_status_.ok()) {
      broken_status_ = Refusal(
          Reason::kStreamBroken,
          absl::StrFormat("hrxd at %s ended stream %u. Fix: check that the "
                          "daemon runs, then create a new stream.",
                          connection_->socket_path(), handle_.object));
    }
  }
  return broken_status_;
}

absl::Status StreamState::SendBatchLocked(bool ack) {
  if (broken_) return broken_status_;
  // Nothing pending and every batch sent has been answered for: the daemon
  // has already taken everything in, so there is nothing to order after.
  if (pending_.batch().commands_size() == 0 && (!ack || !unacknowledged_)) {
    return absl::OkStatus();
  }
  pending_.set_token(ack ? next_token_++ : 0);
  pending_.mutable_batch()->set_ack(ack);
  const bool sent = call_->Write(pending_);
  pending_.mutable_batch()->clear_commands();
  pending_bytes_ = 0;
  if (!sent) return BrokenLocked();
  if (!ack) {
    unacknowledged_ = true;
    return absl::OkStatus();
  }
  hrx::v1::StreamReply reply;
  if (!call_->Read(&reply)) return BrokenLocked();
  unacknowledged_ = false;
  return ReplyStatus(reply);
}

absl::StatusOr<hrx::v1::StreamReply> StreamState::RoundTripLocked(
    hrx::v1::StreamRequest request) {
  if (pending_.has_batch() && pending_.batch().commands_size() != 0) {
    if (absl::Status sent = SendBatchLocked(false); !sent.ok()) return sent;
  }
  if (broken_) return broken_status_;
  const uint64_t token = next_token_++;
  request.set_token(token);
  if (!call_->Write(request)) return BrokenLocked();
  hrx::v1::StreamReply reply;
  if (!call_->Read(&reply)) return BrokenLocked();
  // The daemon handles requests in order: a reply means every batch written
  // before this request has been taken in.
  unacknowledged_ = false;
  if (reply.token() != token) {
    return Refusal(
        Reason::kStreamProtocol,
        absl::StrFormat("expected the reply to request %u, got %u. Fix: "
                        "report this daemon bug.",
                        token, reply.token()));
  }
  if (absl::Status status = ReplyStatus(reply); !status.ok()) return status;
  return reply;
}

absl::Status StreamState::Append(hrx::v1::Command command,
                                 uint64_t payload_bytes) {
  absl::MutexLock lock(&mu_);
  *pending_.mutable_batch()->add_commands() = std::move(command);
  pending_bytes_ += payload_bytes;
  if (pending_bytes_ >= kBatchFlushBytes ||
      static_cast<size_t>(pending_.batch().commands_size()) >=
          kBatchFlushCommands) {
    return SendBatchLocked(/*ack=*/false);
  }
  return absl::OkStatus();
}

absl::Status StreamState::Flush() {
  absl::MutexLock lock(&mu_);
  return SendBatchLocked(/*ack=*/true);
}

absl::Status StreamState::Synchronize() {
  hrx::v1::StreamRequest request;
  request.mutable_sync();
  absl::MutexLock lock(&mu_);
  return RoundTripLocked(std::move(request)).status();
}

absl::StatusOr<std::string> StreamState::Read(const shared::WireHandle& buffer,
                                              uint64_t offset,
                                              uint64_t length) {
  hrx::v1::StreamRequest request;
  ToProto(buffer, request.mutable_read()->mutable_buffer());
  request.mutable_read()->set_offset(offset);
  request.mutable_read()->set_length(length);
  absl::MutexLock lock(&mu_);
  auto reply = RoundTripLocked(std::move(request));
  if (!reply.ok()) return reply.status();
  return std::move(*reply->mutable_data());
}

absl::StatusOr<hrx::v1::Profile> StreamState::LaunchProfiled(
    const shared::WireHandle& exec) {
  hrx::v1::StreamRequest request;
  ToProto(exec, request.mutable_launch_profiled()->mutable_exec());
  absl::MutexLock lock(&mu_);
  auto reply = RoundTripLocked(std::move(request));
  if (!reply.ok()) return reply.status();
  return std::move(*reply->mutable_profile());
}

absl::StatusOr<bool> StreamState::Poll() {
  hrx::v1::StreamRequest request;
  request.mutable_poll();
  absl::MutexLock lock(&mu_);
  auto reply = RoundTripLocked(std::move(request));
  if (!reply.ok()) return reply.status();
  return reply->complete();
}

}  // namespace hrx::client::internal
