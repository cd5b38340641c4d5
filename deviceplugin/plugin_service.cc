#include "deviceplugin/plugin_service.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "deviceplugin/allocation.h"
#include "shared/grpc_status.h"

namespace hrx::deviceplugin {
namespace {

constexpr char kHealthy[] = "Healthy";
constexpr char kUnhealthy[] = "Unhealthy";
// Containers may connect to the socket, never write the directory.
constexpr bool kMountReadOnly = true;
// How often a ListAndWatch stream looks for a cancelled kubelet.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(500);

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<std::string> Ids(
    const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return std::vector<std::string>(ids.begin(), ids.end());
}

}  // namespace

PluginService::PluginService(const PluginOptions& options,
                             const HrxdAdmin& hrxd, uint64_t device_count)
    : options_(options), hrxd_(hrxd), device_count_(device_count) {}

void PluginService::SetHealthy(bool healthy) {
  absl::MutexLock lock(&mu_);
  if (healthy_ == healthy) return;
  healthy_ = healthy;
  ++version_;
}

void PluginService::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  ++version_;
}

void PluginService::Restart() {
  absl::MutexLock lock(&mu_);
  stopped_ = false;
  ++version_;
}

v1beta1::ListAndWatchResponse PluginService::Devices(bool healthy) const {
  v1beta1::ListAndWatchResponse response;
  for (uint64_t i = 0; i < device_count_; ++i) {
    v1beta1::Device* device = response.add_devices();
    device->set_id(DeviceId(i));
    device->set_health(healthy ? kHealthy : kUnhealthy);
  }
  return response;
}

hrx::v1::Budget PluginService::BudgetFor(size_t devices) const {
  hrx::v1::Budget budget;
  budget.set_device_bytes(devices * options_.unit_bytes);
  budget.set_shared_bytes(options_.shared_bytes);
  budget.set_connections(kPodConnections);
  budget.set_reply_bytes(kPodReplyBytes);
  return budget;
}

absl::StatusOr<hrx::v1::BoundTenant> PluginService::EnsureTenant(
    const std::vector<std::string>& devices, const std::string& pod,
    const std::string& container, bool replace) const {
  const std::string name = TenantNameFor(options_.resource_name, devices);
  const auto labels =
      TenantLabels(options_.resource_name, devices, pod, container);
  absl::StatusOr<hrx::v1::BoundTenant> created = hrxd_.Create(
      name, BudgetFor(devices.size()), options_.load_kernels, labels);
  if (created.ok() || created.status().code() != absl::StatusCode::kAlreadyExists) {
    return created;
  }
  absl::StatusOr<std::vector<hrx::v1::BoundTenant>> tenants = hrxd_.List();
  if (!tenants.ok()) return tenants.status();
  const hrx::v1::BoundTenant* existing = nullptr;
  for (const hrx::v1::BoundTenant& tenant : *tenants) {
    if (tenant.name() == name) existing = &tenant;
  }
  if (existing == nullptr) return created.status();  // not a bound tenant
  auto label = [existing](const char* key) {
    auto it = existing->labels().find(key);
    return it == existing->labels().end() ? std::string() : it->second;
  };
  if (label(kManagedByLabel) != kManagedByValue ||
      label(kResourceLabel) != options_.resource_name) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "hrxd has a tenant named \"%s\" that this plugin did not make for "
        "%s. Fix: remove it (hrxctl bound remove %s) or rename it.",
        name, options_.resource_name, name));
  }
  if (!replace) return *existing;
  // The kubelet hands out only devices no live container holds: a tenant
  // of the same name belongs to a container that is gone (or to an earlier
  // Allocate for this one that the kubelet retried).
  if (absl::Status removed = hrxd_.Remove(name); !removed.ok()) {
    return removed;
  }
  return hrxd_.Create(name, BudgetFor(devices.size()), options_.load_kernels,
                      labels);
}

grpc::Status PluginService::GetDevicePluginOptions(
    grpc::ServerContext* context, const v1beta1::Empty* request,
    v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(true);
  response->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status PluginService::ListAndWatch(
    grpc::ServerContext* context, const v1beta1::Empty* request,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t sent = UINT64_MAX;
  while (!context->IsCancelled()) {
    bool healthy = false;
    {
      absl::MutexLock lock(&mu_);
      auto changed = [this, sent]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return version_ != sent;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), kWatchPoll);
      if (stopped_) return grpc::Status::OK;
      if (version_ == sent) continue;
      sent = version_;
      healthy = healthy_;
    }
    if (!writer->Write(Devices(healthy))) break;
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::GetPreferredAllocation(
    grpc::ServerContext* context,
    const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  for (const auto& container : request->container_requests()) {
    if (container.allocation_size() < 0) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrFormat("allocation_size is %d. Fix: ask for a positive "
                          "number of devices.",
                          container.allocation_size()));
    }
    auto* chosen = response->add_container_responses();
    for (const std::string& id :
         PreferredDevices(Ids(container.available_deviceids()),
                          Ids(container.must_include_deviceids()),
                          static_cast<size_t>(container.allocation_size()))) {
      chosen->add_deviceids(id);
    }
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::Allocate(grpc::ServerContext* context,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) {
  for (const auto& container : request->container_requests()) {
    absl::StatusOr<std::vector<std::string>> devices =
        CheckDevices(Ids(container.devices_ids()), device_count_);
    if (!devices.ok()) return shared::ToGrpcStatus(devices.status());
    // The pod is not named here; reconciliation labels the tenant once the
    // kubelet's pod resources list it.
    absl::StatusOr<hrx::v1::BoundTenant> tenant;
    {
      absl::MutexLock lock(&tenants_mu_);
      tenant = EnsureTenant(*devices, "", "", /*replace=*/true);
    }
    if (!tenant.ok()) {
      return shared::ToGrpcStatus(absl::Status(
          tenant.status().code(),
          absl::StrFormat("hrxd could not make a tenant for %u devices: %s",
                          devices->size(), tenant.status().message())));
    }
    auto* out = response->add_container_responses();
    (*out->mutable_envs())[kSocketEnv] = options_.container_socket();
    v1beta1::Mount* mount = out->add_mounts();
    mount->set_host_path(Directory(tenant->socket_path()));
    mount->set_container_path(options_.container_socket_dir);
    mount->set_read_only(kMountReadOnly);
    (*out->mutable_annotations())["hrx.dev/tenant"] = tenant->name();
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::PreStartContainer(
    grpc::ServerContext* context,
    const v1beta1::PreStartContainerRequest* request,
    v1beta1::PreStartContainerResponse* response) {
  // hrxd may have restarted since Allocate: the tenant must exist before
  // the container's first connection.
  absl::StatusOr<std::vector<std::string>> devices =
      CheckDevices(Ids(request->devices_ids()), device_count_);
  if (!devices.ok()) return shared::ToGrpcStatus(devices.status());
  absl::MutexLock lock(&tenants_mu_);
  return shared::ToGrpcStatus(
      EnsureTenant(*devices, "", "", /*replace=*/false).status());
}

}  // namespace hrx::deviceplugin
