// The server side of Streams.Open: one ordered command stream per client
// stream. Requests are handled in arrival order; batches are enqueued with
// refusals deferred to the next sync point (the core keeps them, in
// order, on the stream: stream_gate.h); sync and read replies are sent
// when the device finishes. The call's end (or cancellation, when the client
// dies) destroys the stream after draining it.
//
// Flow control: the next request is read only when the previous batch has
// been enqueued (a batch suspended at the staging bound holds reading), and
// while fewer than kMaxPendingReplies replies (and kMaxPendingReplyBytes of
// read data) are owed or unsent. A client that stops reading its replies
// stops being read: its cost to the daemon stays bounded.
#ifndef HRX_DAEMON_SERVER_STREAM_REACTOR_H_
#define HRX_DAEMON_SERVER_STREAM_REACTOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/core.h"
#include "daemon/server/decode.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// Replies a Streams.Open call may owe (in flight or unsent) before the
// daemon stops reading its requests.
inline constexpr int kMaxPendingReplies = 16;
// Read data a Streams.Open call may have in flight or unsent before the
// daemon stops reading its requests (one read may take it past this).
inline constexpr uint64_t kMaxPendingReplyBytes = uint64_t{16} << 20;

// Requests arrive raw and are measured before they are parsed
// (wire_shape.h); a malformed or too complex one is refused at the next
// sync point, as a bad batch is.
class StreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts reading at once, or finishes with `session`'s error.
  StreamReactor(Core& core, absl::StatusOr<Caller> caller);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  using Reply = std::shared_ptr<hrx::v1::StreamReply>;
  // A reply to `token`; a non-OK `status` is counted as a refusal.
  Reply NewReply(uint64_t token, const absl::Status& status = absl::OkStatus());
  void SetStatus(hrx::v1::StreamReply& reply, const absl::Status& status);

  // Handles one request; false when reading must wait for a callback (a
  // suspended batch) that resumes it.
  bool Handle(const hrx::v1::StreamRequest& request);
  // Queues a reply for writing; safe from any thread.
  // `hold` (a reply_bytes charge) is kept until the reply is written.
  void Send(Reply reply, ChargeRef hold = nullptr);
  // Starts an asynchronous core operation owing `bytes` of reply data;
  // Complete ends it.
  void Begin(uint64_t bytes = 0);
  void Complete(Reply reply, uint64_t bytes = 0, ChargeRef hold = nullptr);
  // Reads the next request if nothing holds reading back.
  void MaybeReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Core& core_;
  std::optional<Caller> caller_;
  uint64_t session_ = 0;
  uint64_t stream_ = 0;  // 0 until opened
  // How the call ends: OK, or a malformed request before the stream opened.
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer raw_request_;
  hrx::v1::StreamRequest request_;
  struct Outgoing {
    grpc::ByteBuffer wire;
    uint64_t data_bytes = 0;
    ChargeRef hold;  // released once the client has taken the reply
  };

  absl::Mutex mu_;
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

#endif  // HRX_DAEMON_SERVER_STREAM_REACTOR_H_
