// Ends a unary call with a status, counting refusals by reason: how every
// handler of the daemon's services answers.
#ifndef HRX_DAEMON_SERVER_FINISH_H_
#define HRX_DAEMON_SERVER_FINISH_H_

#include "absl/status/status.h"
#include "daemon/core/core.h"
#include "grpcpp/server_context.h"
#include "shared/grpc_status.h"

namespace hrx::daemon {

// Finishes `context`'s default reactor with `status`; returns the reactor
// for the handler to return.
inline grpc::ServerUnaryReactor* Finish(Core& core,
                                        grpc::CallbackServerContext* context,
                                        const absl::Status& status) {
  core.refusals().Count(status);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(shared::ToGrpcStatus(status));
  return reactor;
}

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_FINISH_H_
