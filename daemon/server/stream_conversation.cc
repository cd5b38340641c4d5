#include "daemon/server/stream_conversation.h"

#include <algorithm>
#include <utility>

#include "daemon/server/decode.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

using Reply = std::shared_ptr<hrx::v1::StreamReply>;

Reply MakeReply(uint64_t token, const absl::Status& status) {
  auto reply = std::make_shared<hrx::v1::StreamReply>();
  reply->set_token(token);
  if (!status.ok()) {
    reply->set_code(static_cast<int32_t>(status.code()));
    reply->set_message(std::string(status.message()));
  }
  return reply;
}

}  // namespace

// Every refusal the stream sends passes here or through SetStatus, where it
// is counted by its reason.
StreamConversation::Reply StreamConversation::NewReply(
    uint64_t token, const absl::Status& status) {
  core_.refusals().Count(status);
  return MakeReply(token, status);
}

void StreamConversation::SetStatus(hrx::v1::StreamReply& reply,
                                   const absl::Status& status) {
  core_.refusals().Count(status);
  reply.set_code(static_cast<int32_t>(status.code()));
  reply.set_message(std::string(status.message()));
}

void StreamConversation::Start(absl::StatusOr<Caller> caller, uint64_t stream) {
  if (!caller.ok()) {
    absl::MutexLock lock(&mu_);
    finished_ = true;
    End(caller.status());
    return;
  }
  caller_.emplace(*caller);
  session_ = caller->session();
  stream_ = stream;
  absl::MutexLock lock(&mu_);
  MaybeReadLocked();
}

void StreamConversation::MaybeReadLocked() {
  // One request at a time: while one is being handled (a batch until it is
  // enqueued), nothing else may start the next read, or a completion could
  // let a later request overtake it.
  if (read_pending_ || handling_ || reads_done_ || finished_) return;
  // A cancelled call is read at once: the read fails, and that failure is
  // what destroys the stream and ends the call.
  if (cancelled_) {
    read_pending_ = true;
    ReadNext();
    return;
  }
  const int owed = outstanding_ + static_cast<int>(writes_.size());
  if (owed >= kMaxPendingReplies ||
      owed_bytes_ + unsent_bytes_ >= kMaxPendingReplyBytes) {
    return;  // OnWritten or Complete reads again
  }
  read_pending_ = true;
  ReadNext();
}

void StreamConversation::OnRequestsEnded() {
  // The client finished writing, or the call died: drain and destroy.
  if (stream_ != 0 && !leave_stream_.load()) {
    Begin();
    core_.commands().DestroyStream(session_, stream_,
                                   [this](absl::Status) { Complete(nullptr); });
  }
  absl::MutexLock lock(&mu_);
  read_pending_ = false;
  reads_done_ = true;
  MaybeFinishLocked();
}

void StreamConversation::OnBroken(const absl::Status& why) {
  core_.refusals().Count(why);
  {
    absl::MutexLock lock(&mu_);
    if (finish_status_.ok()) finish_status_ = why;
    cancelled_ = true;  // nothing more can reach the client
    if (!writing_) {
      writes_.clear();
      unsent_bytes_ = 0;
    }
  }
  OnRequestsEnded();
}

void StreamConversation::OnRequest(const absl::Status& parsed) {
  {
    absl::MutexLock lock(&mu_);
    read_pending_ = false;
    handling_ = true;
  }
  if (!parsed.ok()) {
    // The request's token is unknown: the refusal waits for the stream's
    // next sync point, like a bad batch's. Before the stream is open there
    // is no stream to keep it, and no token to answer: the call ends with it.
    if (stream_ != 0) {
      core_.commands().DeferRefusal(session_, stream_, parsed);
    } else {
      core_.refusals().Count(parsed);
    }
    absl::MutexLock lock(&mu_);
    handling_ = false;
    if (stream_ == 0) {
      reads_done_ = true;
      finish_status_ = parsed;
      MaybeFinishLocked();
      return;
    }
    MaybeReadLocked();
    return;
  }
  const bool read_on = Handle(request_);
  if (!read_on) return;  // a batch: its callback reads on
  absl::MutexLock lock(&mu_);
  handling_ = false;
  MaybeReadLocked();
}

bool StreamConversation::Handle(const hrx::v1::StreamRequest& request) {
  const uint64_t token = request.token();
  if (request.op_case() == hrx::v1::StreamRequest::kOpen) {
    if (stream_ != 0) {
      Send(NewReply(token, Refusal(Reason::kStreamAlreadyOpen,
                                   "this call already "
                                   "opened a stream. Fix: send open once, "
                                   "as the first message.")));
      return true;
    }
    auto opened = core_.commands().CreateStream(session_);
    Reply reply = NewReply(token, opened.status());
    if (opened.ok()) {
      stream_ = opened->handle;
      caller_->Seal(opened->handle, reply->mutable_opened()->mutable_stream());
      reply->mutable_opened()->set_queue(opened->queue);
    }
    Send(std::move(reply));
    return true;
  }
  if (stream_ == 0) {
    Send(NewReply(token, Refusal(Reason::kStreamNotOpen,
                                 "the first message of "
                                 "Streams.Open must be open. Fix: send "
                                 "open before anything else.")));
    return true;
  }
  switch (request.op_case()) {
    case hrx::v1::StreamRequest::kBatch: {
      auto commands = caller_->Commands(request.batch().commands());
      const bool ack = request.batch().ack();
      if (!commands.ok()) {
        // Reported at the stream's next sync point, like any refused batch.
        core_.commands().DeferRefusal(session_, stream_, commands.status());
        if (ack) Send(NewReply(token));
        return true;
      }
      // Reading waits for this batch: if it is suspended at the staging
      // bound, the callback resumes reading once it is enqueued.
      {
        absl::MutexLock lock(&mu_);
        ++outstanding_;
      }
      core_.commands().Submit(
          session_, stream_, *std::move(commands), SubmitErrors::kDefer,
          [this, token, ack](absl::StatusOr<size_t> enqueued) {
            if (!enqueued.ok()) {
              core_.commands().DeferRefusal(session_, stream_,
                                            enqueued.status());
            }
            if (ack) {
              Reply reply = NewReply(token);
              reply->set_enqueued(enqueued.ok() ? *enqueued : 0);
              Send(std::move(reply));
            }
            absl::MutexLock lock(&mu_);
            handling_ = false;  // enqueued: the next may be read
            --outstanding_;
            MaybeReadLocked();
            MaybeFinishLocked();
          });
      return false;  // the callback reads on (it may already have)
    }
    case hrx::v1::StreamRequest::kSync: {
      Begin();
      core_.commands().Synchronize(session_, stream_,
                                   [this, token](absl::Status status) {
                                     Complete(NewReply(token, status));
                                   });
      return true;
    }
    case hrx::v1::StreamRequest::kRead: {
      auto src = caller_->View(request.read(), "read src");
      if (!src.ok()) {
        Send(NewReply(token, src.status()));
        return true;
      }
      // The tenant's reply_bytes ceiling holds until the client has taken
      // the reply: many calls that never read cannot add up without bound.
      auto hold = core_.commands().ReserveReplyBytes(session_, src->length);
      if (!hold.ok()) {
        Send(NewReply(token, hold.status()));
        return true;
      }
      Reply reply = NewReply(token);
      const uint64_t owed = std::min(src->length, kMaxInlineReadBytes);
      Begin(owed);
      core_.commands().Read(
          session_, stream_, *src, reply->mutable_data(),
          [this, reply, owed, hold = *std::move(hold)](absl::Status status) {
            if (!status.ok()) {
              reply->clear_data();
              SetStatus(*reply, status);
            }
            Complete(reply, owed, hold);
          });
      return true;
    }
    case hrx::v1::StreamRequest::kLaunchProfiled: {
      auto exec =
          caller_->Object(request.launch_profiled().exec(),
                          shared::HandleKind::kGraphExec, "launch profiled");
      if (!exec.ok()) {
        Send(NewReply(token, exec.status()));
        return true;
      }
      Begin();
      core_.graphs().LaunchProfiled(
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
      return true;
    }
    case hrx::v1::StreamRequest::kPoll: {
      auto complete = core_.commands().Poll(session_, stream_);
      Reply reply = NewReply(token, complete.status());
      if (complete.ok()) reply->set_complete(*complete);
      Send(std::move(reply));
      return true;
    }
    default:
      Send(NewReply(token, Refusal(Reason::kEmptyRequest,
                                   "a Streams.Open message "
                                   "has no operation set. Fix: set one of "
                                   "open, batch, sync, read, poll.")));
      return true;
  }
}

void StreamConversation::Begin(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ++outstanding_;
  owed_bytes_ += bytes;
}

void StreamConversation::Complete(Reply reply, uint64_t bytes, ChargeRef hold) {
  if (reply != nullptr) Send(std::move(reply), std::move(hold));
  absl::MutexLock lock(&mu_);
  --outstanding_;
  owed_bytes_ -= bytes;
  MaybeReadLocked();
  MaybeFinishLocked();
}

void StreamConversation::Send(Reply reply, ChargeRef hold) {
  Outgoing outgoing;
  outgoing.data_bytes = reply->data().size();
  outgoing.hold = std::move(hold);
  outgoing.reply = std::move(reply);
  absl::MutexLock lock(&mu_);
  if (cancelled_ || finished_) return;
  unsent_bytes_ += outgoing.data_bytes;
  writes_.push_back(std::move(outgoing));
  WriteLocked();
}

void StreamConversation::WriteLocked() {
  while (!writing_ && !writes_.empty()) {
    writing_ = true;
    if (!WriteNext(*writes_.front().reply)) return;  // OnWritten follows
    WrittenLocked(true);
  }
}

void StreamConversation::OnWritten(bool ok) {
  absl::MutexLock lock(&mu_);
  WrittenLocked(ok);
  WriteLocked();
  MaybeFinishLocked();
  MaybeReadLocked();
}

void StreamConversation::WrittenLocked(bool ok) {
  writing_ = false;
  unsent_bytes_ -= writes_.front().data_bytes;
  writes_.pop_front();
  if (!ok || cancelled_) {
    cancelled_ = true;  // the client is gone; drop what is left
    writes_.clear();
    unsent_bytes_ = 0;
  }
}

void StreamConversation::OnCancelled() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  MaybeReadLocked();
}

void StreamConversation::MaybeFinishLocked() {
  if (finished_ || !reads_done_ || outstanding_ != 0 || writing_) return;
  finished_ = true;
  End(finish_status_);
}

}  // namespace hrx::daemon
