#include "daemon/server/stream_reactor.h"

#include <string>
#include <utility>

#include "daemon/server/call_lanes.h"
#include "daemon/server/core_stream_engine.h"
#include "daemon/server/services_lane.h"
#include "daemon/stream/wire_shape.h"

namespace hrx::daemon {

StreamReactor::StreamReactor(Core& core, absl::StatusOr<Caller> caller,
                             std::string lane)
    : lane_(std::move(lane)) {
  if (!caller.ok()) {
    Start(caller.status());
    return;
  }
  Start(std::make_shared<CoreStreamEngine>(core, *caller));
}

void StreamReactor::OnReadDone(bool ok) {
  reads_started_.load(std::memory_order_acquire);  // see reads_started_
  if (!ok) return OnRequestsEnded();
  // Safe to hand on: until this request is handled no read is pending, so
  // the conversation cannot end (and OnDone cannot come) before it is.
  const CallLanes::Admitted admitted =
      lane_.empty() ? CallLanes::Admitted::kNoThread
                    : CallLanes::ForServer().Run(
                          lane_, [this] { HandleRead(); }, /*paced=*/false);
  if (admitted == CallLanes::Admitted::kLaneFull) {
    // Refused like a malformed request: at the stream's next sync point
    // (or, before it is open, as the call's end).
    raw_request_.Clear();
    OnRequest(LaneFull());
  } else if (admitted == CallLanes::Admitted::kNoThread) {
    HandleRead();
  }
}

void StreamReactor::HandleRead() {
  request().Clear();
  const absl::Status parsed = ParseChecked(raw_request_, &request());
  raw_request_.Clear();
  OnRequest(parsed);
}

bool StreamReactor::WriteNext(const hrx::v1::StreamReply& reply) {
  raw_reply_.Clear();  // the previous write is done: OnWriteDone came
  SerializeInto(reply, &raw_reply_);
  StartWrite(&raw_reply_);
  return false;  // OnWriteDone answers
}

void StreamReactor::End(const absl::Status& status) {
  Finish(grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message())));
}

}  // namespace hrx::daemon
