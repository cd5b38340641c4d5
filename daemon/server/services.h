// The hrx.v1 gRPC services: translation only. Each method identifies the
// caller, decodes the request, calls Core and encodes the reply; any method
// that waits for the device finishes its reactor from Core's callback, so no
// gRPC thread blocks on the device; methods that may wait for an executor's
// answer run on their caller's call lane (services_lane.h).
#ifndef HRX_DAEMON_SERVER_SERVICES_H_
#define HRX_DAEMON_SERVER_SERVICES_H_

#include "daemon/core/core.h"
#include "daemon/server/bound_sockets.h"
#include "daemon/server/executor_rings.h"
#include "daemon/server/peer_registry.h"
#include "daemon/server/ring_registry.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "hrx/v1/device.grpc.pb.h"
#include "hrx/v1/event.grpc.pb.h"
#include "hrx/v1/graph.grpc.pb.h"
#include "hrx/v1/kernel.grpc.pb.h"
#include "hrx/v1/session.grpc.pb.h"
#include "hrx/v1/status.grpc.pb.h"
#include "hrx/v1/stream.grpc.pb.h"

namespace hrx::daemon {

class SessionsService final : public hrx::v1::Sessions::CallbackService {
 public:
  SessionsService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* OpenSession(
      grpc::CallbackServerContext* context,
      const hrx::v1::OpenSessionRequest* request,
      hrx::v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(
      grpc::CallbackServerContext* context,
      const hrx::v1::CloseSessionRequest* request,
      hrx::v1::CloseSessionResponse* response) override;

 private:
  Core& core_;
  const PeerRegistry& peers_;
};

class DevicesService final : public hrx::v1::Devices::CallbackService {
 public:
  DevicesService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* GetDeviceInfo(
      grpc::CallbackServerContext* context,
      const hrx::v1::GetDeviceInfoRequest* request,
      hrx::v1::DeviceInfo* response) override;
  grpc::ServerUnaryReactor* SetQueueCount(
      grpc::CallbackServerContext* context,
      const hrx::v1::SetQueueCountRequest* request,
      hrx::v1::SetQueueCountResponse* response) override;

 private:
  Core& core_;
  const PeerRegistry& peers_;
};

// Raw methods (LoadKernel, Streams.Submit and Open, Graphs.CreateExec) take
// requests that may be large: their bytes are measured (wire_shape.h)
// before they are parsed.
class KernelsService final
    : public hrx::v1::Kernels::WithRawCallbackMethod_LoadKernel<
          hrx::v1::Kernels::CallbackService> {
 public:
  KernelsService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* LoadKernel(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnloadKernel(
      grpc::CallbackServerContext* context,
      const hrx::v1::UnloadKernelRequest* request,
      hrx::v1::UnloadKernelResponse* response) override;

 private:
  Core& core_;
  const PeerRegistry& peers_;
};

class EventsService final : public hrx::v1::Events::CallbackService {
 public:
  // With `executor_rings`, events of sessions whose rings an executor
  // serves are asked there when hrxd does not know them.
  EventsService(Core& core, const PeerRegistry& peers,
                ExecutorRings* executor_rings)
      : core_(core), peers_(peers), executor_rings_(executor_rings) {}
  grpc::ServerUnaryReactor* QueryEvent(
      grpc::CallbackServerContext* context,
      const hrx::v1::EventRequest* request,
      hrx::v1::QueryEventResponse* response) override;
  grpc::ServerUnaryReactor* SynchronizeEvent(
      grpc::CallbackServerContext* context,
      const hrx::v1::EventRequest* request,
      hrx::v1::SynchronizeEventResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseEvent(
      grpc::CallbackServerContext* context,
      const hrx::v1::EventRequest* request,
      hrx::v1::ReleaseEventResponse* response) override;

 private:
  // Finishes an event call hrxd answered `answer`, or asks the executor
  // serving the session's rings when hrxd does not know the event.
  grpc::ServerUnaryReactor* AnswerOrForward(
      grpc::CallbackServerContext* context, uint64_t session, uint64_t event,
      hrx::executor::v1::EventCall::Op op, absl::StatusOr<bool> answer,
      std::function<void(bool)> fill);

  Core& core_;
  const PeerRegistry& peers_;
  ExecutorRings* const executor_rings_;
};

class BuffersService final : public hrx::v1::Buffers::CallbackService {
 public:
  BuffersService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* Allocate(
      grpc::CallbackServerContext* context,
      const hrx::v1::AllocateRequest* request,
      hrx::v1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* Free(grpc::CallbackServerContext* context,
                                 const hrx::v1::FreeRequest* request,
                                 hrx::v1::FreeResponse* response) override;
  grpc::ServerUnaryReactor* Grant(grpc::CallbackServerContext* context,
                                  const hrx::v1::GrantRequest* request,
                                  hrx::v1::GrantResponse* response) override;
  grpc::ServerUnaryReactor* Import(grpc::CallbackServerContext* context,
                                   const hrx::v1::ImportRequest* request,
                                   hrx::v1::ImportResponse* response) override;
  grpc::ServerUnaryReactor* Revoke(grpc::CallbackServerContext* context,
                                   const hrx::v1::RevokeRequest* request,
                                   hrx::v1::RevokeResponse* response) override;
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* context,
                                   const hrx::v1::ExportRequest* request,
                                   hrx::v1::ExportResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseExport(
      grpc::CallbackServerContext* context,
      const hrx::v1::ReleaseExportRequest* request,
      hrx::v1::ReleaseExportResponse* response) override;

  // The descriptor side channel's path, told to exporting clients.
  void set_fd_socket(std::string path) { fd_socket_ = std::move(path); }

 private:
  Core& core_;
  const PeerRegistry& peers_;
  std::string fd_socket_;
};

// Streams: Open and Submit raw, the rest typed. (A bidi method's raw and
// typed forms differ only in return type, so the chain is spelled out.)
using StreamsBase = hrx::v1::Streams::WithRawCallbackMethod_Open<
    hrx::v1::Streams::WithCallbackMethod_CreateStream<
        hrx::v1::Streams::WithCallbackMethod_DestroyStream<
            hrx::v1::Streams::WithRawCallbackMethod_Submit<
                hrx::v1::Streams::WithCallbackMethod_Synchronize<
                    hrx::v1::Streams::WithCallbackMethod_Read<
                        hrx::v1::Streams::WithCallbackMethod_Poll<
                            hrx::v1::Streams::WithCallbackMethod_GetStreamStats<
                                hrx::v1::Streams::WithCallbackMethod_OpenRing<
                                    hrx::v1::Streams::Service>>>>>>>>>;

class StreamsService final : public StreamsBase {
 public:
  StreamsService(Core& core, const PeerRegistry& peers, RingRegistry& rings,
                 ExecutorRings* executor_rings)
      : core_(core),
        peers_(peers),
        rings_(rings),
        executor_rings_(executor_rings) {}
  void set_fd_socket(std::string path) { fd_socket_ = std::move(path); }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Open(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Poll(grpc::CallbackServerContext* context,
                                 const hrx::v1::PollRequest* request,
                                 hrx::v1::PollResponse* response) override;
  grpc::ServerUnaryReactor* GetStreamStats(
      grpc::CallbackServerContext* context,
      const hrx::v1::StreamStatsRequest* request,
      hrx::v1::StreamStatsResponse* response) override;
  grpc::ServerUnaryReactor* CreateStream(
      grpc::CallbackServerContext* context,
      const hrx::v1::CreateStreamRequest* request,
      hrx::v1::CreateStreamResponse* response) override;
  grpc::ServerUnaryReactor* DestroyStream(
      grpc::CallbackServerContext* context,
      const hrx::v1::DestroyStreamRequest* request,
      hrx::v1::DestroyStreamResponse* response) override;
  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Synchronize(
      grpc::CallbackServerContext* context,
      const hrx::v1::SynchronizeRequest* request,
      hrx::v1::SynchronizeResponse* response) override;
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                 const hrx::v1::ReadRequest* request,
                                 hrx::v1::ReadResponse* response) override;
  grpc::ServerUnaryReactor* OpenRing(
      grpc::CallbackServerContext* context,
      const hrx::v1::OpenRingRequest* request,
      hrx::v1::OpenRingResponse* response) override;

 private:
  // A call about a stream whose ring an executor serves is answered there
  // (its queue, staging and caches are there): `then` gets the answer and
  // finishes the call. Null where hrxd serves the stream itself.
  using Forwarded = std::function<void(
      absl::StatusOr<hrx::executor::v1::EventAnswer>, DoneCallback finish)>;
  grpc::ServerUnaryReactor* ForwardToExecutor(
      grpc::CallbackServerContext* context, uint64_t session, uint64_t stream,
      hrx::executor::v1::EventCall::Op op, Forwarded then);
  // For Submit and Read: FAILED_PRECONDITION "not_served_by_executor" for
  // a stream whose ring an executor serves (OK otherwise).
  absl::Status NotOnAnExecutorsRing(uint64_t session, uint64_t stream,
                                    std::string_view what) const;

  Core& core_;
  const PeerRegistry& peers_;
  RingRegistry& rings_;
  ExecutorRings* const executor_rings_;  // null: hrxd serves every ring
  std::string fd_socket_;
};

class DaemonStatusService final
    : public hrx::v1::DaemonStatus::CallbackService {
 public:
  DaemonStatusService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* GetStatus(
      grpc::CallbackServerContext* context,
      const hrx::v1::GetStatusRequest* request,
      hrx::v1::GetStatusResponse* response) override;

 private:
  Core& core_;
  const PeerRegistry& peers_;
};

class GraphsService final
    : public hrx::v1::Graphs::WithRawCallbackMethod_CreateExec<
          hrx::v1::Graphs::CallbackService> {
 public:
  GraphsService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* CreateExec(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DestroyExec(
      grpc::CallbackServerContext* context,
      const hrx::v1::GraphExecRequest* request,
      hrx::v1::GraphExecResponse* response) override;
  grpc::ServerUnaryReactor* ClearFailure(
      grpc::CallbackServerContext* context,
      const hrx::v1::GraphExecRequest* request,
      hrx::v1::GraphExecResponse* response) override;

 private:
  Core& core_;
  const PeerRegistry& peers_;
};

class AdminService final : public hrx::v1::Admin::CallbackService {
 public:
  AdminService(Core& core, const PeerRegistry& peers)
      : core_(core), peers_(peers) {}
  grpc::ServerUnaryReactor* ListTenants(
      grpc::CallbackServerContext* context,
      const hrx::v1::ListTenantsRequest* request,
      hrx::v1::ListTenantsResponse* response) override;
  grpc::ServerUnaryReactor* ListSessions(
      grpc::CallbackServerContext* context,
      const hrx::v1::ListSessionsRequest* request,
      hrx::v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* SetBudget(
      grpc::CallbackServerContext* context,
      const hrx::v1::SetBudgetRequest* request,
      hrx::v1::SetBudgetResponse* response) override;
  grpc::ServerUnaryReactor* ListBuffers(
      grpc::CallbackServerContext* context,
      const hrx::v1::ListBuffersRequest* request,
      hrx::v1::ListBuffersResponse* response) override;
  grpc::ServerUnaryReactor* EvictSession(
      grpc::CallbackServerContext* context,
      const hrx::v1::EvictSessionRequest* request,
      hrx::v1::EvictSessionResponse* response) override;
  grpc::ServerUnaryReactor* ListExecutors(
      grpc::CallbackServerContext* context,
      const hrx::v1::ListExecutorsRequest* request,
      hrx::v1::ListExecutorsResponse* response) override;

  // Socket-bound tenants (bound_tenant_service.cc).
  grpc::ServerUnaryReactor* CreateBoundTenant(
      grpc::CallbackServerContext* context,
      const hrx::v1::CreateBoundTenantRequest* request,
      hrx::v1::CreateBoundTenantResponse* response) override;
  grpc::ServerUnaryReactor* RemoveBoundTenant(
      grpc::CallbackServerContext* context,
      const hrx::v1::RemoveBoundTenantRequest* request,
      hrx::v1::RemoveBoundTenantResponse* response) override;
  grpc::ServerUnaryReactor* ListBoundTenants(
      grpc::CallbackServerContext* context,
      const hrx::v1::ListBoundTenantsRequest* request,
      hrx::v1::ListBoundTenantsResponse* response) override;
  grpc::ServerUnaryReactor* SetBoundTenantLabels(
      grpc::CallbackServerContext* context,
      const hrx::v1::SetBoundTenantLabelsRequest* request,
      hrx::v1::SetBoundTenantLabelsResponse* response) override;
  // Set once, before the daemon accepts its first connection.
  void set_bound_sockets(BoundSockets* bound) { bound_ = bound; }

 private:
  // The caller's identity, checked to have at least `role`.
  absl::Status Authorize(const grpc::CallbackServerContext& context, Role role);

  Core& core_;
  const PeerRegistry& peers_;
  BoundSockets* bound_ = nullptr;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_SERVICES_H_
