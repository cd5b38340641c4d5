// The device plugin's calls to hrxd, as an admin on hrxd's main socket:
// the device's memory, health, and socket-bound tenants.
#ifndef HRX_DEVICEPLUGIN_HRXD_ADMIN_H_
#define HRX_DEVICEPLUGIN_HRXD_ADMIN_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "hrx/v1/admin.pb.h"

namespace hrx::deviceplugin {

class HrxdAdmin {
 public:
  explicit HrxdAdmin(const std::string& socket_path);

  // The device's memory, as hrxd's status reports it.
  absl::StatusOr<uint64_t> DeviceMemory() const;
  // OK when hrxd's health service says SERVING.
  absl::Status Healthy() const;

  absl::StatusOr<hrx::v1::BoundTenant> Create(
      const std::string& name, const hrx::v1::Budget& budget,
      bool load_kernels, const std::map<std::string, std::string>& labels) const;
  // Closing a tenant's sessions waits for their queued work.
  absl::Status Remove(const std::string& name) const;
  absl::StatusOr<std::vector<hrx::v1::BoundTenant>> List() const;
  absl::Status SetLabels(const std::string& name,
                         const std::map<std::string, std::string>& labels) const;

 private:
  std::string socket_path_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace hrx::deviceplugin

#endif  // HRX_DEVICEPLUGIN_HRXD_ADMIN_H_
