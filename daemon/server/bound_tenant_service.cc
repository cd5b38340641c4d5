// Admin's socket-bound tenant calls: translation between hrx.v1 and
// BoundSockets, which does the work.
#include <utility>

#include "absl/time/time.h"
#include "daemon/server/decode.h"
#include "daemon/server/finish.h"
#include "daemon/server/services.h"
#include "daemon/server/services_lane.h"
#include "shared/grpc_status.h"

namespace hrx::daemon {
namespace {

Labels LabelsOf(const google::protobuf::Map<std::string, std::string>& wire) {
  return Labels(wire.begin(), wire.end());
}

void EncodeBoundTenant(const BoundTenantSummary& bound,
                       hrx::v1::BoundTenant* out) {
  out->set_name(bound.tenant.name);
  out->set_socket_path(bound.socket_path);
  *out->mutable_budget() = BudgetFromLimits(bound.tenant.limits);
  out->set_load_kernels(bound.tenant.load_kernels);
  out->mutable_labels()->insert(bound.labels.begin(), bound.labels.end());
  out->set_created_unix_ms(absl::ToUnixMillis(bound.created));
  EncodeUsage(bound.tenant.usage, out->mutable_usage());
  out->set_sessions(bound.tenant.sessions);
}

}  // namespace

grpc::ServerUnaryReactor* AdminService::CreateBoundTenant(
    grpc::CallbackServerContext* context,
    const hrx::v1::CreateBoundTenantRequest* request,
    hrx::v1::CreateBoundTenantResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kAdmin);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        absl::StatusOr<BoundTenantSummary> created = bound_->Create(
            request->name(), LimitsFromBudget(request->budget()),
            request->load_kernels(), LabelsOf(request->labels()));
        if (created.ok())
          EncodeBoundTenant(*created, response->mutable_tenant());
        return Finish(core_, context, created.status());
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::RemoveBoundTenant(
    grpc::CallbackServerContext* context,
    const hrx::v1::RemoveBoundTenantRequest* request,
    hrx::v1::RemoveBoundTenantResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kAdmin);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        bound_->Remove(
            request->name(),
            [this, reactor,
             response](absl::StatusOr<BoundSockets::Removed> removed) {
              if (removed.ok()) {
                response->set_closed_sessions(removed->sessions);
                response->set_closed_connections(removed->connections);
              }
              core_.refusals().Count(removed.status());
              reactor->Finish(shared::ToGrpcStatus(removed.status()));
            });
        return reactor;
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::ListBoundTenants(
    grpc::CallbackServerContext* context,
    const hrx::v1::ListBoundTenantsRequest* request,
    hrx::v1::ListBoundTenantsResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kObserver);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        for (const BoundTenantSummary& bound :
             core_.admin().ListBoundTenants()) {
          EncodeBoundTenant(bound, response->add_tenants());
        }
        response->set_tenant_socket_dir(bound_->options().root);
        response->set_max_bound_tenants(bound_->options().max_bound_tenants);
        return Finish(core_, context, absl::OkStatus());
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::SetBoundTenantLabels(
    grpc::CallbackServerContext* context,
    const hrx::v1::SetBoundTenantLabelsRequest* request,
    hrx::v1::SetBoundTenantLabelsResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kAdmin);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        return Finish(core_, context,
                      core_.admin().SetBoundTenantLabels(
                          request->name(), LabelsOf(request->labels())));
      },
      LaneKind::kAdmin);
}

}  // namespace hrx::daemon
