// Brings hrxd's socket-bound tenants in line with the pods the kubelet's
// pod resources API reports, once per pass (see PlanReconcile): tenants of
// listed containers that hrxd lacks are made again (hrxd restarted), newly
// seen pods are recorded on their tenants, and tenants whose pods are gone
// are removed, which closes their sessions and returns their memory.
// Nothing is removed on a pass where the kubelet does not answer, and a
// tenant only once it was a candidate kReclaimAfterPasses passes in a row.
#ifndef HRX_DEVICEPLUGIN_RECONCILER_H_
#define HRX_DEVICEPLUGIN_RECONCILER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/hrxd_admin.h"
#include "deviceplugin/options.h"
#include "deviceplugin/plugin_service.h"
#include "grpcpp/channel.h"

namespace hrx::deviceplugin {

class Reconciler {
 public:
  Reconciler(const PluginOptions& options, const HrxdAdmin& hrxd,
             const PluginService& service);

  // One pass at `now`. Failures are logged and retried on the next pass.
  void Pass(absl::Time now);

 private:
  // Containers holding devices of the plugin's resource.
  absl::StatusOr<std::vector<PodContainer>> ListContainers() const;

  const PluginOptions& options_;
  const HrxdAdmin& hrxd_;
  const PluginService& service_;
  std::shared_ptr<grpc::Channel> pod_resources_;
  // Passes in a row on which each tenant was a removal candidate.
  std::map<std::string, int> candidate_passes_;
};

}  // namespace hrx::deviceplugin

#endif  // HRX_DEVICEPLUGIN_RECONCILER_H_
