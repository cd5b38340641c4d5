// What carries one stream's messages (the requests and replies of
// Streams.Open) between libhrx and hrxd: a gRPC call (stream_call.h) or the
// stream's shared-memory ring (ring_call.h). The stream's logic
// (stream_state.h) is the same over both.
#ifndef HRX_CLIENT_INTERNAL_STREAM_TRANSPORT_H_
#define HRX_CLIENT_INTERNAL_STREAM_TRANSPORT_H_

#include <cstdint>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::client::internal {

class StreamTransport {
 public:
  enum class Outcome {
    kDone,      // written, or the reply is in *out
    kCallOver,  // the stream has ended; Close gives its status
    kDeadline,  // the deadline passed first
  };

  virtual ~StreamTransport() = default;

  // Queues `request` for sending, in order.
  virtual Outcome Write(hrx::v1::StreamRequest request,
                        absl::Time deadline) = 0;
  // Waits for the reply to the request sent with `token`. Past the deadline
  // the token is abandoned: its reply is dropped when it arrives.
  virtual Outcome Await(uint64_t token, absl::Time deadline,
                        hrx::v1::StreamReply* out) = 0;
  // Ends the stream after the queued writes (the daemon then drains and
  // destroys it) and waits for its end until `deadline`; past it, gives up
  // on it. Returns the stream's final status.
  virtual grpc::Status Close(absl::Time deadline) = 0;
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_STREAM_TRANSPORT_H_
