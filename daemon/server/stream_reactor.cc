#include "daemon/server/stream_reactor.h"

#include <utility>

#include "daemon/server/decode.h"

namespace hrx::daemon {
namespace {

using Reply = std::shared_ptr<hrx::v1::StreamReply>;

Reply NewReply(uint64_t token, const absl::Status& status = absl::OkStatus()) {
  auto reply = std::make_shared<hrx::v1::StreamReply>();
  reply->set_token(token);
  if (!status.ok()) {
    reply->set_code(static_cast<int32_t>(status.code()));
    reply->set_message(std::string(status.message()));
  }
  return reply;
}

void SetStatus(hrx::v1::StreamReply& reply, const absl::Status& status) {
  reply.set_code(static_cast<int32_t>(status.code()));
  reply.set_message(std::string(status.message()));
}

}  // namespace

StreamReactor::StreamReactor(Core& core, absl::StatusOr<Caller> caller)
    : core_(core) {
  if (!caller.ok()) {
    const absl::Status& session = caller.status();
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(grpc::Status(static_cast<grpc::StatusCode>(session.code()),
                        std::string(session.message())));
    return;
  }
  caller_.emplace(*caller);
  session_ = caller->session();
  StartRead(&request_);
}

void StreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The client finished writing, or the call died: drain and destroy.
    if (stream_ != 0) {
      Begin();
      core_.DestroyStream(session_, stream_, [this](absl::Status) {
        Complete(nullptr);
      });
    }
    absl::MutexLock lock(&mu_);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  Handle(request_);
  StartRead(&request_);
}

absl::Status StreamReactor::TakeDeferred() {
  return std::exchange(deferred_, absl::OkStatus());
}

void StreamReactor::Handle(const hrx::v1::StreamRequest& request) {
  const uint64_t token = request.token();
  if (request.op_case() == hrx::v1::StreamRequest::kOpen) {
    if (stream_ != 0) {
      return Send(NewReply(token, absl::FailedPreconditionError(
                                      "stream_already_open: this call already "
                                      "opened a stream. Fix: send open once, "
                                      "as the first message.")));
    }
    auto opened = core_.CreateStream(session_);
    Reply reply = NewReply(token, opened.status());
    if (opened.ok()) {
      stream_ = opened->handle;
      caller_->Seal(opened->handle, reply->mutable_opened()->mutable_stream());
      reply->mutable_opened()->set_queue(opened->queue);
    }
    return Send(std::move(reply));
  }
  if (stream_ == 0) {
    return Send(NewReply(token, absl::FailedPreconditionError(
                                    "stream_not_open: the first message of "
                                    "Streams.Open must be open. Fix: send "
                                    "open before anything else.")));
  }
  switch (request.op_case()) {
    case hrx::v1::StreamRequest::kBatch: {
      auto commands = caller_->Commands(request.batch().commands());
      absl::StatusOr<size_t> enqueued =
          commands.ok() ? core_.Submit(session_, stream_, *std::move(commands),
                                       SubmitErrors::kDefer)
                        : absl::StatusOr<size_t>(commands.status());
      if (!enqueued.ok() && deferred_.ok()) deferred_ = enqueued.status();
      if (request.batch().ack()) {
        Reply reply = NewReply(token);
        reply->set_enqueued(enqueued.ok() ? *enqueued : 0);
        Send(std::move(reply));
      }
      return;
    }
    case hrx::v1::StreamRequest::kSync: {
      if (absl::Status deferred = TakeDeferred(); !deferred.ok()) {
        return Send(NewReply(token, deferred));
      }
      Begin();
      core_.Synchronize(session_, stream_, [this, token](absl::Status status) {
        Complete(NewReply(token, status));
      });
      return;
    }
    case hrx::v1::StreamRequest::kRead: {
      if (absl::Status deferred = TakeDeferred(); !deferred.ok()) {
        return Send(NewReply(token, deferred));
      }
      auto src = caller_->View(request.read(), "read src");
      if (!src.ok()) return Send(NewReply(token, src.status()));
      Reply reply = NewReply(token);
      Begin();
      core_.Read(session_, stream_, *src,
                 reply->mutable_data(), [this, reply](absl::Status status) {
                   if (!status.ok()) {
                     reply->clear_data();
                     SetStatus(*reply, status);
                   }
                   Complete(reply);
                 });
      return;
    }
    case hrx::v1::StreamRequest::kLaunchProfiled: {
      if (absl::Status deferred = TakeDeferred(); !deferred.ok()) {
        return Send(NewReply(token, deferred));
      }
      auto exec = caller_->Object(request.launch_profiled().exec(),
                                  shared::HandleKind::kGraphExec,
                                  "launch profiled");
      if (!exec.ok()) return Send(NewReply(token, exec.status()));
      Begin();
      core_.LaunchProfiled(
          session_, stream_, *exec,
          [this, token](absl::StatusOr<std::vector<NodeTime>> profile) {
            Reply reply = NewReply(token, profile.status());
            if (profile.ok()) {
              hrx::v1::Profile* out = reply->mutable_profile();
              for (const NodeTime& node : *profile) {
                hrx::v1::ProfiledNode* wire = out->add_nodes();
                wire->set_label(node.label);
                wire->set_nanoseconds(node.nanoseconds);
              }
            }
            Complete(std::move(reply));
          });
      return;
    }
    case hrx::v1::StreamRequest::kPoll: {
      if (absl::Status deferred = TakeDeferred(); !deferred.ok()) {
        return Send(NewReply(token, deferred));
      }
      auto complete = core_.Poll(session_, stream_);
      Reply reply = NewReply(token, complete.status());
      if (complete.ok()) reply->set_complete(*complete);
      return Send(std::move(reply));
    }
    default:
      return Send(NewReply(token, absl::InvalidArgumentError(
                                      "empty_request: a Streams.Open message "
                                      "has no operation set. Fix: set one of "
                                      "open, batch, sync, read, poll.")));
  }
}

void StreamReactor::Begin() {
  absl::MutexLock lock(&mu_);
  ++outstanding_;
}

void StreamReactor::Complete(Reply reply) {
  if (reply != nullptr) Send(std::move(reply));
  absl::MutexLock lock(&mu_);
  --outstanding_;
  MaybeFinishLocked();
}

void StreamReactor::Send(Reply reply) {
  if (reply->code() != 0) {
    core_.CountRefusal(absl::Status(static_cast<absl::StatusCode>(reply->code()),
                                    reply->message()));
  }
  absl::MutexLock lock(&mu_);
  if (cancelled_ || finished_) return;
  writes_.push_back(std::move(reply));
  if (!writing_) {
    writing_ = true;
    StartWrite(writes_.front().get());
  }
}

void StreamReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writes_.pop_front();
  if (!ok) {
    cancelled_ = true;  // the client is gone; drop what is left
    writes_.clear();
  }
  if (!writes_.empty()) {
    StartWrite(writes_.front().get());
  } else {
    writing_ = false;
    MaybeFinishLocked();
  }
}

void StreamReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

void StreamReactor::MaybeFinishLocked() {
  if (finished_ || !reads_done_ || outstanding_ != 0 || writing_) return;
  finished_ = true;
  Finish(grpc::Status::OK);
}

}  // namespace hrx::daemon
