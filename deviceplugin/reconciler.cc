#include "deviceplugin/reconciler.h"

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "deviceplugin/log.h"
#include "grpcpp/create_channel.h"
#include "k8s/podresources/v1/api.grpc.pb.h"
#include "shared/grpc_status.h"

namespace hrx::deviceplugin {
Reconciler::Reconciler(const PluginOptions& options, const HrxdAdmin& hrxd,
                       const PluginService& service)
    : options_(options),
      hrxd_(hrxd),
      service_(service),
      pod_resources_(grpc::CreateChannel(
          absl::StrCat("unix:", options.pod_resources_socket),
          grpc::InsecureChannelCredentials())) {}

absl::StatusOr<std::vector<PodContainer>> Reconciler::ListContainers() const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  ::v1::ListPodResourcesResponse response;
  const grpc::Status status =
      ::v1::PodResourcesLister::NewStub(pod_resources_)
          ->List(&context, ::v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) return shared::FromGrpcStatus(status);
  std::vector<PodContainer> containers;
  for (const ::v1::PodResources& pod : response.pod_resources()) {
    for (const ::v1::ContainerResources& container : pod.containers()) {
      for (const ::v1::ContainerDevices& devices : container.devices()) {
        if (devices.resource_name() != options_.resource_name) continue;
        containers.push_back(PodContainer{
            absl::StrCat(pod.namespace_(), "/", pod.name()), container.name(),
            std::vector<std::string>(devices.device_ids().begin(),
                                     devices.device_ids().end())});
      }
    }
  }
  return containers;
}

void Reconciler::Pass(absl::Time now) {
  absl::MutexLock lock(&service_.tenants_lock());
  absl::StatusOr<std::vector<hrx::v1::BoundTenant>> tenants = hrxd_.List();
  if (!tenants.ok()) return;  // hrxd is down: the health check says so
  absl::StatusOr<std::vector<PodContainer>> containers = ListContainers();
  if (!containers.ok()) {
    Log(absl::StrCat("pod resources unreadable, nothing reclaimed: ",
                     containers.status().message()));
    return;
  }
  std::vector<ExistingTenant> existing;
  for (const hrx::v1::BoundTenant& tenant : *tenants) {
    existing.push_back(ExistingTenant{
        tenant.name(),
        std::map<std::string, std::string>(tenant.labels().begin(),
                                           tenant.labels().end()),
        absl::FromUnixMillis(tenant.created_unix_ms())});
  }
  const ReconcilePlan plan =
      PlanReconcile(existing, *containers, options_.resource_name,
                    service_.device_count(), now, options_.allocation_grace);
  for (const PodContainer& container : plan.create) {
    auto made = service_.EnsureTenant(container.device_ids, container.pod,
                                      container.container, /*replace=*/false);
    Log(made.ok() ? absl::StrFormat("restored tenant %s of %s/%s",
                                    made->name(), container.pod,
                                    container.container)
                  : absl::StrFormat("restoring the tenant of %s/%s: %s",
                                    container.pod, container.container,
                                    made.status().message()));
  }
  for (const PodContainer& container : plan.label) {
    const std::string name =
        TenantNameFor(options_.resource_name, container.device_ids);
    absl::Status labelled = hrxd_.SetLabels(
        name, TenantLabels(options_.resource_name, container.device_ids,
                           container.pod, container.container));
    if (labelled.ok()) {
      Log(absl::StrFormat("tenant %s belongs to %s/%s", name, container.pod,
                          container.container));
    }
  }
  std::map<std::string, int> candidates;
  for (const std::string& name : plan.remove) {
    const int passes = candidate_passes_[name] + 1;
    if (passes < kReclaimAfterPasses) {
      candidates[name] = passes;
      continue;
    }
    absl::Status removed = hrxd_.Remove(name);
    Log(removed.ok() ? absl::StrCat("removed tenant ", name,
                                    ": its pod is gone")
                     : absl::StrCat("removing tenant ", name, ": ",
                                    removed.message()));
  }
  // A tenant that is no longer a candidate starts again from zero.
  candidate_passes_ = std::move(candidates);
}

}  // namespace hrx::deviceplugin
