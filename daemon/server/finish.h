// Ends a unary call with a status, counting refusals by reason: how every
// handler of the daemon's services answers.
#ifndef HRX_DAEMON_SERVER_FINISH_H_
#define HRX_DAEMON_SERVER_FINISH_H_

#include "absl/status/status.h"
#include "daemon/core/core.h"
#include "grpcpp/server_context.h"
#include "shared/grpc_status.h"

namespace hrx::daemon {

// The unary call whose handler runs on this thread through OnCallLane
// (services_lane.h), and the reactor it returned for it.
struct LaneCall {
  const grpc::CallbackServerContext* context = nullptr;
  grpc::ServerUnaryReactor* reactor = nullptr;
};
inline thread_local LaneCall current_lane_call;

// The reactor that answers `context`'s call: the lane's, or else (on the
// gRPC thread) the context's default reactor. Once per call.
inline grpc::ServerUnaryReactor* CallReactor(
    grpc::CallbackServerContext* context) {
  return current_lane_call.context == context ? current_lane_call.reactor
                                              : context->DefaultReactor();
}

// Finishes the call's reactor with `status`; returns the reactor for the
// handler to return.
inline grpc::ServerUnaryReactor* Finish(Core& core,
                                        grpc::CallbackServerContext* context,
                                        const absl::Status& status) {
  core.refusals().Count(status);
  grpc::ServerUnaryReactor* reactor = CallReactor(context);
  reactor->Finish(shared::ToGrpcStatus(status));
  return reactor;
}

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_FINISH_H_
