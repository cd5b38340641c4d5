#include "deviceplugin/hrxd_admin.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/status.grpc.pb.h"
#include "shared/grpc_status.h"

namespace hrx::deviceplugin {
namespace {

// Every call but a removal: hrxd answers admin calls without waiting on
// the device.
constexpr auto kCallLimit = std::chrono::seconds(5);
// A removal closes the tenant's sessions, which waits for their queued
// work (bounded by hrxd's executor watchdog).
constexpr auto kRemoveLimit = std::chrono::seconds(60);

void Limit(grpc::ClientContext& context,
           std::chrono::seconds limit = kCallLimit) {
  context.set_deadline(std::chrono::system_clock::now() + limit);
}

absl::Status Check(const grpc::Status& status) {
  return shared::FromGrpcStatus(status);
}

}  // namespace

HrxdAdmin::HrxdAdmin(const std::string& socket_path)
    : socket_path_(socket_path) {
  grpc::ChannelArguments arguments;
  // hrxd restarts in well under a second under systemd or Kubernetes.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel(absl::StrCat("unix:", socket_path),
                                       grpc::InsecureChannelCredentials(),
                                       arguments);
}

absl::StatusOr<uint64_t> HrxdAdmin::DeviceMemory() const {
  grpc::ClientContext context;
  Limit(context);
  hrx::v1::GetStatusResponse response;
  const grpc::Status status =
      hrx::v1::DaemonStatus::NewStub(channel_)->GetStatus(
          &context, hrx::v1::GetStatusRequest(), &response);
  if (!status.ok()) return Check(status);
  return response.device().memory_bytes();
}

absl::Status HrxdAdmin::Healthy() const {
  grpc::ClientContext context;
  Limit(context);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = grpc::health::v1::Health::NewStub(channel_)->Check(
      &context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return Check(status);
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(
        "hrxd at ", socket_path_, " is not serving (it is stopping)."));
  }
  return absl::OkStatus();
}

absl::StatusOr<hrx::v1::BoundTenant> HrxdAdmin::Create(
    const std::string& name, const hrx::v1::Budget& budget, bool load_kernels,
    const std::map<std::string, std::string>& labels) const {
  grpc::ClientContext context;
  Limit(context);
  hrx::v1::CreateBoundTenantRequest request;
  request.set_name(name);
  *request.mutable_budget() = budget;
  request.set_load_kernels(load_kernels);
  request.mutable_labels()->insert(labels.begin(), labels.end());
  hrx::v1::CreateBoundTenantResponse response;
  const grpc::Status status = hrx::v1::Admin::NewStub(channel_)
                                  ->CreateBoundTenant(&context, request,
                                                      &response);
  if (!status.ok()) return Check(status);
  return response.tenant();
}

absl::Status HrxdAdmin::Remove(const std::string& name) const {
  grpc::ClientContext context;
  Limit(context, kRemoveLimit);
  hrx::v1::RemoveBoundTenantRequest request;
  request.set_name(name);
  hrx::v1::RemoveBoundTenantResponse response;
  return Check(hrx::v1::Admin::NewStub(channel_)->RemoveBoundTenant(
      &context, request, &response));
}

absl::StatusOr<std::vector<hrx::v1::BoundTenant>> HrxdAdmin::List() const {
  grpc::ClientContext context;
  Limit(context);
  hrx::v1::ListBoundTenantsResponse response;
  const grpc::Status status =
      hrx::v1::Admin::NewStub(channel_)->ListBoundTenants(
          &context, hrx::v1::ListBoundTenantsRequest(), &response);
  if (!status.ok()) return Check(status);
  return std::vector<hrx::v1::BoundTenant>(response.tenants().begin(),
                                           response.tenants().end());
}

absl::Status HrxdAdmin::SetLabels(
    const std::string& name,
    const std::map<std::string, std::string>& labels) const {
  grpc::ClientContext context;
  Limit(context);
  hrx::v1::SetBoundTenantLabelsRequest request;
  request.set_name(name);
  request.mutable_labels()->insert(labels.begin(), labels.end());
  hrx::v1::SetBoundTenantLabelsResponse response;
  return Check(hrx::v1::Admin::NewStub(channel_)->SetBoundTenantLabels(
      &context, request, &response));
}

}  // namespace hrx::deviceplugin
