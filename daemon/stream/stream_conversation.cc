#include "daemon/stream/stream_conversation.h"

#include <utility>

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
  if (!status.ok()) engine_->CountRefusal(status);
  return MakeReply(token, status);
}

void StreamConversation::SetStatus(hrx::v1::StreamReply& reply,
                                   const absl::Status& status) {
  engine_->CountRefusal(status);
  reply.set_code(static_cast<int32_t>(status.code()));
  reply.set_message(std::string(status.message()));
}

void StreamConversation::Start(
    absl::StatusOr<std::shared_ptr<StreamEngine>> engine, uint64_t stream) {
  if (!engine.ok()) {
    absl::MutexLock lock(&mu_);
    finished_ = true;
    End(engine.status());
    return;
  }
  engine_ = *std::move(engine);
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
    engine_->DestroyStream(stream_,
                           [this](absl::Status) { Complete(nullptr); });
  }
  absl::MutexLock lock(&mu_);
  read_pending_ = false;
  reads_done_ = true;
  MaybeFinishLocked();
}

void StreamConversation::OnBroken(const absl::Status& why) {
  engine_->CountRefusal(why);
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
      engine_->DeferRefusal(stream_, parsed);
    } else {
      engine_->CountRefusal(parsed);
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
    Reply reply = NewReply(token);
    auto opened = engine_->OpenStream(reply->mutable_opened());
    if (opened.ok()) {
      stream_ = *opened;
    } else {
      reply->clear_opened();
      SetStatus(*reply, opened.status());
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
      const bool ack = request.batch().ack();
      // Reading waits for this batch: if it is suspended at the staging
      // bound, the callback resumes reading once it is enqueued.
      {
        absl::MutexLock lock(&mu_);
        ++outstanding_;
      }
      // A refused batch is reported at the stream's next sync point.
      engine_->Submit(stream_, request.batch().commands(),
                      [this, token, ack](absl::StatusOr<size_t> enqueued) {
                        if (!enqueued.ok()) {
                          engine_->DeferRefusal(stream_, enqueued.status());
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
      engine_->Synchronize(stream_, [this, token](absl::Status status) {
        Complete(NewReply(token, status));
      });
      return true;
    }
    case hrx::v1::StreamRequest::kRead: {
      // The tenant's reply_bytes ceiling holds until the client has taken
      // the reply: many calls that never read cannot add up without bound.
      auto read = engine_->PrepareRead(request.read());
      if (!read.ok()) {
        Send(NewReply(token, read.status()));
        return true;
      }
      Reply reply = NewReply(token);
      const uint64_t owed = read->reply_bytes;
      Begin(owed);
      engine_->Read(stream_, *read, reply->mutable_data(),
                    [this, reply, owed, hold = std::move(read->hold)](
                        absl::Status status) mutable {
                      if (!status.ok()) {
                        reply->clear_data();
                        SetStatus(*reply, status);
                      }
                      // Moved on: the hold lives with the reply until the
                      // client has taken it, not with this callback.
                      Complete(std::move(reply), owed, std::move(hold));
                    });
      return true;
    }
    case hrx::v1::StreamRequest::kLaunchProfiled: {
      Reply reply = NewReply(token);
      Begin();
      engine_->LaunchProfiled(stream_, request.launch_profiled().exec(),
                              reply->mutable_profile(),
                              [this, reply](absl::Status status) {
                                if (!status.ok()) {
                                  reply->clear_profile();
                                  SetStatus(*reply, status);
                                }
                                Complete(reply);
                              });
      return true;
    }
    case hrx::v1::StreamRequest::kPoll: {
      auto complete = engine_->Poll(stream_);
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

void StreamConversation::Complete(Reply reply, uint64_t bytes,
                                  StreamHold hold) {
  if (reply != nullptr) Send(std::move(reply), std::move(hold));
  absl::MutexLock lock(&mu_);
  --outstanding_;
  owed_bytes_ -= bytes;
  MaybeReadLocked();
  MaybeFinishLocked();
}

void StreamConversation::Send(Reply reply, StreamHold hold) {
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
