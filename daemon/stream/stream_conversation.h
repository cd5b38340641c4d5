// One ordered command stream's protocol (the messages of Streams.Open),
// apart from the transport that carries it: the gRPC call
// (daemon/server/stream_reactor.h) or the stream's shared-memory ring
// (ring_server.h). Both transports
// therefore apply the same checks, refusals and flow control.
//
// Requests are handled in arrival order; batches are enqueued with refusals
// deferred to the next sync point (the core keeps them, in order, on the
// stream: stream_gate.h); sync and read replies are sent when the device
// finishes. The requests' end (or cancellation, when the client dies)
// destroys the stream after draining it.
//
// Flow control: the next request is read only when the previous batch has
// been enqueued (a batch suspended at the staging bound holds reading), and
// while fewer than kMaxPendingReplies replies (and kMaxPendingReplyBytes of
// read data) are owed or unsent. A client that stops taking its replies
// stops being read: its cost to the daemon stays bounded.
//
// A transport implements the three hooks and reports back through the On*
// methods; each hook call is answered exactly once. The session's work is
// the engine's (stream_engine.h): hrxd's core, or an executor's.
#ifndef HRX_DAEMON_STREAM_STREAM_CONVERSATION_H_
#define HRX_DAEMON_STREAM_STREAM_CONVERSATION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/stream/stream_engine.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// Replies a stream may owe (in flight or unsent) before the daemon stops
// reading its requests.
inline constexpr int kMaxPendingReplies = 16;
// Read data a stream may have in flight or unsent before the daemon stops
// reading its requests (one read may take it past this).
inline constexpr uint64_t kMaxPendingReplyBytes = uint64_t{16} << 20;

class StreamConversation {
 public:
  virtual ~StreamConversation() = default;

 protected:
  using Reply = std::shared_ptr<hrx::v1::StreamReply>;

  StreamConversation() = default;

  // Starts reading, or ends with `engine`'s error (the caller could not be
  // identified). `stream` is a stream already created for this
  // conversation (the ring's), else 0: the first request must then open one.
  void Start(absl::StatusOr<std::shared_ptr<StreamEngine>> engine,
             uint64_t stream = 0);

  // --- Transport hooks (called with the conversation's lock held; they
  // must not call back into it before returning) ---
  // Fetch the next request: answer with OnRequest or OnRequestsEnded.
  virtual void ReadNext() = 0;
  // Send `reply`. True when it was taken at once; otherwise answer with
  // OnWritten. One write is outstanding at a time.
  virtual bool WriteNext(const hrx::v1::StreamReply& reply) = 0;
  // The conversation is over with `status`; nothing more is called.
  virtual void End(const absl::Status& status) = 0;

  // --- From the transport (not under the lock) ---
  // The request fetched by ReadNext is in request(), or `parsed` says why
  // it could not be parsed.
  void OnRequest(const absl::Status& parsed);
  hrx::v1::StreamRequest& request() { return request_; }
  // No more requests: the client finished, or died. Drains and destroys the
  // stream, then ends.
  void OnRequestsEnded();
  // The transport cannot carry the conversation further (a corrupt ring):
  // as OnRequestsEnded, ending with `why`.
  void OnBroken(const absl::Status& why);
  void OnWritten(bool ok);
  // The client is gone: pending replies are dropped.
  void OnCancelled();
  // The requests' end leaves the stream to its session instead of draining
  // and destroying it: hrxd is stopping, its drain covers the stream's work,
  // and a unary call that names the stream while the stop reaches the
  // client must not find it freed (stale_handle) rather than stopping.
  void LeaveStreamAtEnd() { leave_stream_.store(true); }

  // Lends the calling thread to the stream's queue (StreamEngine::Progress)
  // once the stream is open: for a transport that spins anyway, from the
  // thread that handles its requests.
  // True when it retired work (a reply may have been written).
  bool PollProgress() { return stream_ != 0 && engine_->Progress(stream_); }

  // Returns once no other thread is inside the conversation's lock: after
  // End, the transport may then destroy the conversation.
  void AwaitQuiet() { absl::MutexLock lock(&mu_); }

  // Set by Start; null when it ended with an error.
  StreamEngine* engine() const { return engine_.get(); }

 private:
  // A reply to `token`; a non-OK `status` is counted as a refusal.
  Reply NewReply(uint64_t token, const absl::Status& status = absl::OkStatus());
  void SetStatus(hrx::v1::StreamReply& reply, const absl::Status& status);

  // Handles one request; false when reading must wait for a callback (a
  // suspended batch) that resumes it.
  bool Handle(const hrx::v1::StreamRequest& request);
  // Queues a reply for writing; safe from any thread.
  // `hold` (a reply_bytes charge) is kept until the reply is written.
  void Send(Reply reply, StreamHold hold = nullptr);
  // Starts an asynchronous core operation owing `bytes` of reply data;
  // Complete ends it.
  void Begin(uint64_t bytes = 0);
  void Complete(Reply reply, uint64_t bytes = 0, StreamHold hold = nullptr);
  // Writes queued replies while the transport takes them at once.
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WrittenLocked(bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the next request if nothing holds reading back.
  void MaybeReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<StreamEngine> engine_;
  uint64_t stream_ = 0;  // 0 until opened
  std::atomic<bool> leave_stream_{false};
  hrx::v1::StreamRequest request_;
  struct Outgoing {
    Reply reply;
    uint64_t data_bytes = 0;
    StreamHold hold;  // released once the client has taken the reply
  };

  absl::Mutex mu_;
  // How the conversation ends: OK, a malformed request before the stream
  // opened, or a broken transport.
  absl::Status finish_status_ ABSL_GUARDED_BY(mu_);
  std::deque<Outgoing> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;        // core operations in flight
  uint64_t owed_bytes_ ABSL_GUARDED_BY(mu_) = 0;    // of reads in flight
  uint64_t unsent_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of queued replies
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  // A request is being handled (a batch until enqueued): the next read waits.
  bool handling_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_STREAM_STREAM_CONVERSATION_H_
