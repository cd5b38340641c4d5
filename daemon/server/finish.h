// Ends a unary call with a status, counting refusals by reason: how every
// handler of the daemon's services answers.
#ifndef HRX_DAEMON_SERVER_FINISH_H_
#define HRX_DAEMON_SERVER_FINISH_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "daemon/core/core.h"
#include "grpcpp/server_context.h"
#include "shared/grpc_status.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

// The reactor of a unary call whose handler runs on a call lane
// (services_lane.h). It deletes itself when the call is done, and keeps
// what the handler gave it (a reply's charge) until then.
class LaneReactor final : public grpc::ServerUnaryReactor {
 public:
  // Before the call is finished: OnDone may run at once after Finish.
  void KeepUntilDone(std::shared_ptr<void> kept) {
    kept_.push_back(std::move(kept));
  }
  void OnDone() override { delete this; }

 private:
  std::vector<std::shared_ptr<void>> kept_;
};

// The unary call whose handler runs on this thread through OnCallLane
// (services_lane.h), and the reactor it returned for it.
struct LaneCall {
  const grpc::CallbackServerContext* context = nullptr;
  LaneReactor* reactor = nullptr;
};
inline thread_local LaneCall current_lane_call;

// The reactor that answers `context`'s call: the lane's, or else (on the
// gRPC thread) the context's default reactor. Once per call.
inline grpc::ServerUnaryReactor* CallReactor(
    grpc::CallbackServerContext* context) {
  return current_lane_call.context == context ? current_lane_call.reactor
                                              : context->DefaultReactor();
}

// Keeps `kept` until the call `context` is done. Only in a handler that
// runs through OnCallLane, and before the call is finished.
inline void KeepUntilDone(grpc::CallbackServerContext* context,
                          std::shared_ptr<void> kept) {
  HRX_CHECK(current_lane_call.context == context);  // only under OnCallLane
  current_lane_call.reactor->KeepUntilDone(std::move(kept));
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
