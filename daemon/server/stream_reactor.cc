#include "daemon/server/stream_reactor.h"

#include <string>
#include <utility>

#include "daemon/server/wire_shape.h"

namespace hrx::daemon {

StreamReactor::StreamReactor(Core& core, absl::StatusOr<Caller> caller)
    : StreamConversation(core) {
  Start(std::move(caller));
}

void StreamReactor::OnReadDone(bool ok) {
  if (!ok) return OnRequestsEnded();
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
