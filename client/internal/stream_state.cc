#include "client/internal/stream_state.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/ring_call.h"
#include "hrx/stream.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::client::internal {
namespace {

absl::Status ReplyStatus(const hrx::v1::StreamReply& reply) {
  return StatusFromWire(reply.code(), reply.message());
}

}  // namespace

absl::StatusOr<std::shared_ptr<StreamState>> StreamState::OpenOnRing(
    const std::shared_ptr<Connection>& connection, absl::Time deadline) {
  HRX_ASSIGN_OR_RETURN(RingCall::Opened opened,
                       RingCall::Open(*connection, deadline));
  std::shared_ptr<StreamState> state(
      new StreamState(connection, std::move(opened.call)));
  state->handle_ = FromProto(opened.stream);
  state->queue_ = opened.queue;
  {
    absl::MutexLock lock(&state->mu_);
    state->pending_.mutable_batch();
  }
  connection->Register(state);
  return state;
}

absl::StatusOr<std::shared_ptr<StreamState>> StreamState::Open(
    std::shared_ptr<Connection> connection) {
  const absl::Time deadline = connection->Deadline();
  if (connection->transport() != Transport::kGrpc) {
    absl::StatusOr<std::shared_ptr<StreamState>> on_ring =
        OpenOnRing(connection, deadline);
    // kAuto falls back to a call when hrxd has no ring to give (an older
    // daemon, a remote one, a tenant without shared bytes to spare).
    if (on_ring.ok() || connection->transport() == Transport::kRing) {
      return on_ring;
    }
  }
  // The call lives as long as the stream: only each wait on it is bounded.
  std::unique_ptr<StreamCall> call = StreamCall::Start(
      connection->streams(), connection->Context(absl::InfiniteFuture()));
  std::shared_ptr<StreamState> state(
      new StreamState(connection, std::move(call)));
  hrx::v1::StreamRequest open;
  open.mutable_open();
  absl::StatusOr<hrx::v1::StreamReply> reply;
  {
    absl::MutexLock lock(&state->mu_);
    reply = state->RoundTripLocked(std::move(open), "open", deadline);
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

StreamState::~StreamState() {
  const absl::Time deadline = connection_->Deadline();
  absl::MutexLock lock(&mu_);
  if (broken_) return;
  (void)SendBatchLocked(/*ack=*/false, deadline);
  if (broken_) return;
  // Close waits for the daemon to drain and destroy the stream.
  (void)call_->Close(deadline);
}

absl::Status StreamState::BrokenLocked() {
  if (!broken_) {
    broken_ = true;
    broken_status_ =
        connection_->Check(call_->Close(connection_->Deadline()), "a stream");
    if (broken_status_.ok()) {
      broken_status_ = Refusal(
          Reason::kStreamBroken,
          absl::StrFormat("hrxd at %s ended stream %u. Fix: check that the "
                          "daemon runs, then create a new stream.",
                          connection_->socket_path(), handle_.object));
    }
  }
  if (ReasonOf(broken_status_) == Reason::kDaemonUnreachable) {
    // The call broke without the daemon saying why. A restarted daemon
    // says so when asked, which is the one error worth reporting; asked
    // again on each call while the answer is still "unreachable".
    if (absl::Status probe = connection_->ProbeSession();
        ReasonOf(probe) == Reason::kPreviousDaemonRun) {
      broken_status_ = Refusal(
          Reason::kPreviousDaemonRun,
          absl::StrFormat("stream %u ended with the hrxd run that made it: %s",
                          handle_.object, probe.message()));
    }
  }
  return broken_status_;
}

absl::Status StreamState::FailedLocked(StreamTransport::Outcome outcome,
                                       const char* what, absl::Time deadline) {
  if (outcome == StreamTransport::Outcome::kCallOver) return BrokenLocked();
  return Refusal(
      Reason::kDeadlineExceeded,
      absl::StrFormat(
          "stream %u on hrxd at %s: no answer to %s by its deadline (%s). "
          "The daemon still runs what it was sent, and the stream stays "
          "usable. Fix: pass a later deadline or raise "
          "ConnectOptions::default_timeout (now %s); if the work is stuck, "
          "look for a hung kernel (hrxctl executors).",
          handle_.object, connection_->socket_path(), what,
          absl::FormatTime(deadline),
          absl::FormatDuration(connection_->default_timeout())));
}

absl::Status StreamState::SendBatchLocked(bool ack, absl::Time deadline) {
  if (broken_) return BrokenLocked();
  // Nothing pending and every batch sent has been answered for: the daemon
  // has already taken everything in, so there is nothing to order after.
  if (pending_.batch().commands_size() == 0 && (!ack || !unacknowledged_)) {
    return absl::OkStatus();
  }
  const uint64_t token = ack ? next_token_++ : 0;
  pending_.set_token(token);
  pending_.mutable_batch()->set_ack(ack);
  hrx::v1::StreamRequest batch = std::move(pending_);
  pending_.Clear();
  pending_.mutable_batch();
  pending_bytes_ = 0;
  const StreamTransport::Outcome sent =
      call_->Write(std::move(batch), deadline);
  if (sent != StreamTransport::Outcome::kDone) {
    return FailedLocked(sent, "sending a batch", deadline);
  }
  if (!ack) {
    unacknowledged_ = true;
    return absl::OkStatus();
  }
  hrx::v1::StreamReply reply;
  const StreamTransport::Outcome answered =
      call_->Await(token, deadline, &reply);
  if (answered != StreamTransport::Outcome::kDone) {
    return FailedLocked(answered, "a flush", deadline);
  }
  unacknowledged_ = false;
  return ReplyStatus(reply);
}

absl::StatusOr<hrx::v1::StreamReply> StreamState::RoundTripLocked(
    hrx::v1::StreamRequest request, const char* what, absl::Time deadline) {
  if (pending_.has_batch() && pending_.batch().commands_size() != 0) {
    if (absl::Status sent = SendBatchLocked(false, deadline); !sent.ok()) {
      return sent;
    }
  }
  if (broken_) return BrokenLocked();
  const uint64_t token = next_token_++;
  request.set_token(token);
  const StreamTransport::Outcome sent =
      call_->Write(std::move(request), deadline);
  if (sent != StreamTransport::Outcome::kDone) {
    return FailedLocked(sent, what, deadline);
  }
  hrx::v1::StreamReply reply;
  const StreamTransport::Outcome answered =
      call_->Await(token, deadline, &reply);
  if (answered != StreamTransport::Outcome::kDone) {
    return FailedLocked(answered, what, deadline);
  }
  // The daemon handles requests in order: a reply means every batch written
  // before this request has been taken in.
  unacknowledged_ = false;
  if (absl::Status status = ReplyStatus(reply); !status.ok()) return status;
  return reply;
}

absl::Status StreamState::Append(hrx::v1::Command command,
                                 uint64_t payload_bytes) {
  const absl::Time deadline = connection_->Deadline();
  absl::MutexLock lock(&mu_);
  *pending_.mutable_batch()->add_commands() = std::move(command);
  pending_bytes_ += payload_bytes;
  if (pending_bytes_ >= kBatchFlushBytes ||
      static_cast<size_t>(pending_.batch().commands_size()) >=
          kBatchFlushCommands) {
    return SendBatchLocked(/*ack=*/false, deadline);
  }
  return absl::OkStatus();
}

absl::Status StreamState::Flush(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return SendBatchLocked(/*ack=*/true, deadline);
}

absl::Status StreamState::Synchronize(absl::Time deadline) {
  hrx::v1::StreamRequest request;
  request.mutable_sync();
  absl::MutexLock lock(&mu_);
  return RoundTripLocked(std::move(request), "a synchronize", deadline)
      .status();
}

absl::StatusOr<std::string> StreamState::Read(const shared::WireHandle& buffer,
                                              uint64_t offset, uint64_t length,
                                              absl::Time deadline) {
  hrx::v1::StreamRequest request;
  ToProto(buffer, request.mutable_read()->mutable_buffer());
  request.mutable_read()->set_offset(offset);
  request.mutable_read()->set_length(length);
  absl::MutexLock lock(&mu_);
  auto reply = RoundTripLocked(std::move(request), "a read", deadline);
  if (!reply.ok()) return reply.status();
  return std::move(*reply->mutable_data());
}

absl::StatusOr<hrx::v1::Profile> StreamState::LaunchProfiled(
    const shared::WireHandle& exec, absl::Time deadline) {
  hrx::v1::StreamRequest request;
  ToProto(exec, request.mutable_launch_profiled()->mutable_exec());
  absl::MutexLock lock(&mu_);
  auto reply =
      RoundTripLocked(std::move(request), "a profiled launch", deadline);
  if (!reply.ok()) return reply.status();
  return std::move(*reply->mutable_profile());
}

absl::StatusOr<bool> StreamState::Poll(absl::Time deadline) {
  hrx::v1::StreamRequest request;
  request.mutable_poll();
  absl::MutexLock lock(&mu_);
  auto reply = RoundTripLocked(std::move(request), "a poll", deadline);
  if (!reply.ok()) return reply.status();
  return reply->complete();
}

}  // namespace hrx::client::internal
