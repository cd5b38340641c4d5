// The kubelet-facing half of hrx-device-plugin: the v1beta1 DevicePlugin
// service. Allocate turns a container's devices into a socket-bound tenant
// in hrxd with a budget of (devices x unit) bytes, and hands the container
// the tenant's socket directory (read-only) and HRXD_SOCKET.
//
// Thread-safe.
#ifndef HRX_DEVICEPLUGIN_PLUGIN_SERVICE_H_
#define HRX_DEVICEPLUGIN_PLUGIN_SERVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "deviceplugin/hrxd_admin.h"
#include "deviceplugin/options.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace hrx::deviceplugin {

// Object ceilings of a pod's tenant below hrxd's defaults: a node holds up
// to --max_bound_tenants of them, and their sum must stay well inside what
// hrxd itself can hold (4096 local connections; reply bytes are hrxd's
// memory).
inline constexpr uint64_t kPodConnections = 32;
inline constexpr uint64_t kPodReplyBytes = uint64_t{64} << 20;

class PluginService final : public v1beta1::DevicePlugin::Service {
 public:
  PluginService(const PluginOptions& options, const HrxdAdmin& hrxd,
                uint64_t device_count);

  // Devices are Healthy while hrxd answers its health check; a change is
  // sent to every ListAndWatch stream.
  void SetHealthy(bool healthy);
  // Ends every ListAndWatch stream (the plugin stops or serves anew);
  // Restart lets new ones run.
  void Stop();
  void Restart();

  // Held while tenants are made or removed: Allocate, PreStartContainer and
  // a reconciliation pass never act on one name at once (a pass's plan is
  // made and carried out under it).
  absl::Mutex& tenants_lock() const { return tenants_mu_; }

  // Makes the tenant for `devices` (checked, sorted) with its labels, in
  // place of a tenant of that name this plugin made (`replace`: a new
  // allocation) or only when none exists (a restore). A tenant of that name
  // the plugin did not make is never replaced (ALREADY_EXISTS).
  absl::StatusOr<hrx::v1::BoundTenant> EnsureTenant(
      const std::vector<std::string>& devices, const std::string& pod,
      const std::string& container, bool replace) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(tenants_mu_);

  uint64_t device_count() const { return device_count_; }

  grpc::Status GetDevicePluginOptions(
      grpc::ServerContext* context, const v1beta1::Empty* request,
      v1beta1::DevicePluginOptions* response) override;
  grpc::Status ListAndWatch(
      grpc::ServerContext* context, const v1beta1::Empty* request,
      grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(
      grpc::ServerContext* context,
      const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext* context,
                        const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(
      grpc::ServerContext* context,
      const v1beta1::PreStartContainerRequest* request,
      v1beta1::PreStartContainerResponse* response) override;

 private:
  v1beta1::ListAndWatchResponse Devices(bool healthy) const;
  hrx::v1::Budget BudgetFor(size_t devices) const;

  const PluginOptions options_;
  const HrxdAdmin& hrxd_;
  const uint64_t device_count_;
  mutable absl::Mutex tenants_mu_;
  absl::Mutex mu_;
  bool healthy_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every change
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hrx::deviceplugin

#endif  // HRX_DEVICEPLUGIN_PLUGIN_SERVICE_H_
