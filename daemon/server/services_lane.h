// OnCallLane: runs a unary handler's body on its caller's call lane
// (call_lanes.h) instead of the gRPC thread, for handlers that may wait for
// an executor (allocations, kernel loads, new streams' queues, exports).
#ifndef HRX_DAEMON_SERVER_SERVICES_LANE_H_
#define HRX_DAEMON_SERVER_SERVICES_LANE_H_

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/core.h"
#include "daemon/server/call_lanes.h"
#include "daemon/server/decode.h"
#include "daemon/server/finish.h"
#include "daemon/server/peer_registry.h"
#include "grpcpp/server_context.h"

namespace hrx::daemon {

// The lane of a caller: its tenant's. A tenant's calls wait on the same
// executor and draw on the same budget, so they share one lane: however
// many uids or connections a tenant floods with, its calls hold at most
// kLaneThreads threads and never another tenant's. Pods of different
// socket-bound tenants are different tenants, whatever uid they share. A
// caller no tenant takes is refused by its handler; its lane is its uid's.
inline std::string LaneOf(Core& core, const PeerIdentity& identity) {
  std::shared_ptr<Tenant> tenant = core.sessions().tenants().Resolve(identity);
  if (tenant != nullptr) return "tenant:" + tenant->name();
  return identity.remote ? "cert:" + identity.certificate_subject
                         : absl::StrCat("uid:", identity.uid);
}

// The lane of the caller `context` identifies ("" when it is not
// identified: its work then runs where it arrives, and is refused there).
inline std::string LaneOf(Core& core, const grpc::ServerContextBase& context,
                          const PeerRegistry& peers) {
  auto identity = Identify(context, peers);
  return identity.ok() ? LaneOf(core, *identity) : "";
}

// A call refused because its tenant already has kMaxLaneQueuedCalls calls
// waiting for its lane.
inline absl::Status LaneFull() {
  return Refusal(Reason::kTooManyCalls,
                 absl::StrFormat("your tenant already has %d calls waiting "
                                 "for hrxd (%d run at once; its executor may "
                                 "be frozen or slow). Fix: wait for your "
                                 "calls' answers before sending more.",
                                 kMaxLaneQueuedCalls, kLaneThreads));
}

// Runs `body` (which answers through Finish or CallReactor, never through
// the context's default reactor) on the caller's lane, and returns the
// reactor it answers on. An unidentified caller is refused on the spot; a
// call the lanes cannot take runs here, as every call once did.
//
// Which of its tenant's lanes a call takes: its work's, or (kAdmin, for
// the Admin and BoundTenants services) one for administration, so that an
// admin whose own tenant's executor is frozen, with that tenant's lane
// full of calls waiting for it, can still list and evict.
enum class LaneKind { kWork, kAdmin };
template <typename Body>
grpc::ServerUnaryReactor* OnCallLane(Core& core, const PeerRegistry& peers,
                                     grpc::CallbackServerContext* context,
                                     Body body,
                                     LaneKind kind = LaneKind::kWork) {
  auto identity = Identify(*context, peers);
  if (!identity.ok()) return Finish(core, context, identity.status());
  auto* reactor = new LaneReactor();
  auto run = [context, reactor, body = std::move(body)]() mutable {
    const LaneCall outer = current_lane_call;
    current_lane_call = LaneCall{context, reactor};
    (void)body();
    current_lane_call = outer;
  };
  const std::string lane = LaneOf(core, *identity);
  switch (CallLanes::ForServer().Run(
      kind == LaneKind::kAdmin ? "admin:" + lane : lane, run)) {
    case CallLanes::Admitted::kQueued:
      break;
    case CallLanes::Admitted::kLaneFull:
      // Run here instead, it could hold a gRPC thread (its executor frozen).
      core.refusals().Count(LaneFull());
      reactor->Finish(shared::ToGrpcStatus(LaneFull()));
      break;
    case CallLanes::Admitted::kNoThread:
      run();
      break;
  }
  return reactor;
}

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_SERVICES_LANE_H_
