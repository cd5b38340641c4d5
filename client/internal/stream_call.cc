#include "client/internal/stream_call.h"

#include <utility>

namespace hrx::client::internal {

std::unique_ptr<StreamCall> StreamCall::Start(
    hrx::v1::Streams::Stub& stub,
    std::unique_ptr<grpc::ClientContext> context) {
  std::unique_ptr<StreamCall> call(new StreamCall(std::move(context)));
  stub.async()->Open(call->context_.get(), call.get());
  // The owner's hold: gRPC frees its side of the call once every operation
  // completed and the status arrived, possibly between two writes of ours;
  // an operation started outside a reaction after that would reach freed
  // memory. Close releases the hold once no write can come any more.
  call->AddHold();
  call->StartRead(&call->incoming_);
  call->StartCall();
  return call;
}

StreamCall::Outcome StreamCall::Write(hrx::v1::StreamRequest request,
                                      absl::Time deadline) {
  const uint64_t bytes = request.ByteSizeLong();
  absl::MutexLock lock(&mu_);
  auto room = [this] {
    mu_.AssertHeld();
    return done_ || write_failed_ || queued_bytes_ < kMaxQueuedWriteBytes;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&room), deadline)) {
    return Outcome::kDeadline;
  }
  if (done_ || write_failed_ || close_requested_) return Outcome::kCallOver;
  queued_bytes_ += bytes;
  writes_.push_back(std::move(request));
  if (!writing_) StartNextWriteLocked();
  return Outcome::kDone;
}

void StreamCall::StartNextWriteLocked() {
  if (!writes_.empty() && !write_failed_) {
    writing_ = true;
    StartWrite(&writes_.front());
    return;
  }
  writing_ = false;
  if (close_requested_ && !writes_done_started_) {
    writes_done_started_ = true;
    StartWritesDone();
  }
}

void StreamCall::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  queued_bytes_ -= writes_.front().ByteSizeLong();
  writes_.pop_front();
  if (!ok) {
    // The call is ending: nothing queued can be sent any more.
    write_failed_ = true;
    writes_.clear();
    queued_bytes_ = 0;
  }
  StartNextWriteLocked();
}

StreamCall::Outcome StreamCall::Await(uint64_t token, absl::Time deadline,
                                      hrx::v1::StreamReply* out) {
  absl::MutexLock lock(&mu_);
  auto arrived = [this, token] {
    mu_.AssertHeld();
    return reads_over_ || replies_.count(token) != 0;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&arrived), deadline)) {
    abandoned_.insert(token);
    return Outcome::kDeadline;
  }
  auto reply = replies_.find(token);
  if (reply == replies_.end()) return Outcome::kCallOver;
  *out = std::move(reply->second);
  replies_.erase(reply);
  return Outcome::kDone;
}

void StreamCall::OnReadDone(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) {
    reads_over_ = true;  // the daemon ended the call, or it failed
    return;
  }
  const uint64_t token = incoming_.token();
  if (abandoned_.erase(token) == 0) {
    replies_[token] = std::move(incoming_);
  }
  incoming_.Clear();
  StartRead(&incoming_);
}

grpc::Status StreamCall::Close(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!close_requested_) {
    close_requested_ = true;
    // From here only reactions start operations (the half-close after the
    // last queued write), and those run while gRPC holds the call.
    if (!writing_) StartNextWriteLocked();
    RemoveHold();
  }
  auto done = [this] {
    mu_.AssertHeld();
    return done_;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
    // Cancelling is local: gRPC ends the call promptly after it.
    context_->TryCancel();
    mu_.Await(absl::Condition(&done));
  }
  return status_;
}

void StreamCall::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  status_ = status;
  done_ = true;
  reads_over_ = true;
  // Nothing touches `this` after the unlock: the owner may destroy it as
  // soon as it sees done_.
}

StreamCall::~StreamCall() {
  // Normally Close already waited; this covers an owner that did not.
  (void)Close(absl::InfinitePast());
}

}  // namespace hrx::client::internal
