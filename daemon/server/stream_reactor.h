// The gRPC transport of a command stream: the server side of Streams.Open.
// The protocol, its checks and flow control are StreamConversation's; this
// reads requests off the call, writes replies to it and finishes it. The
// call's end (or cancellation, when the client dies) destroys the stream
// after draining it.
//
// Requests arrive raw and are measured before they are parsed
// (wire_shape.h); a malformed or too complex one is refused at the next
// sync point, as a bad batch is.
#ifndef HRX_DAEMON_SERVER_STREAM_REACTOR_H_
#define HRX_DAEMON_SERVER_STREAM_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "daemon/core/core.h"
#include "daemon/server/decode.h"
#include "daemon/stream/stream_conversation.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

class StreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public StreamConversation {
 public:
  // Starts reading at once, or finishes with `caller`'s error. Requests are
  // handled on the caller's call `lane` (call_lanes.h; "" for where they
  // arrive), since they may wait for its executor.
  StreamReactor(Core& core, absl::StatusOr<Caller> caller, std::string lane);

  // grpc::ServerBidiReactor.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override { OnWritten(ok); }
  void OnCancel() override { OnCancelled(); }
  // End runs with the conversation's lock held, and gRPC may call OnDone
  // on another thread before that thread has let go of it: destroying the
  // conversation then would unlock a freed mutex (hrxd aborted so, with
  // "Mutex unlocked when destroyed", while executors crash-looped and their
  // streams' calls ended). AwaitQuiet waits for that thread first.
  void OnDone() override {
    AwaitQuiet();
    delete this;
  }

 private:
  // StreamConversation.
  void ReadNext() override {
    reads_started_.fetch_add(1, std::memory_order_release);
    StartRead(&raw_request_);
  }
  bool WriteNext(const hrx::v1::StreamReply& reply) override;
  void End(const absl::Status& status) override;

  // Parses and handles the request read into raw_request_.
  void HandleRead();

  const std::string lane_;
  // gRPC calls OnReadDone only after the StartRead it answers, but orders
  // the two inside its own library, where ThreadSanitizer cannot see it.
  // A request may be handled on a different lane thread than the previous
  // one: this release (in ReadNext) and acquire (in OnReadDone) state the
  // order gRPC gives, so the previous handling's writes to the request are
  // seen to come first.
  std::atomic<uint64_t> reads_started_{0};
  grpc::ByteBuffer raw_request_;
  grpc::ByteBuffer raw_reply_;  // the write in flight
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_STREAM_REACTOR_H_
