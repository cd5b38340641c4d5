// hrx-device-plugin's configuration: its flags, checked, and the --describe
// view of them that deploy/kubernetes/manifest_test.py compares with the
// manifests.
#ifndef HRX_DEVICEPLUGIN_OPTIONS_H_
#define HRX_DEVICEPLUGIN_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hrx::deviceplugin {

// The device plugin API version the kubelet is told.
inline constexpr char kApiVersion[] = "v1beta1";
// The environment variable libhrx reads for its socket.
inline constexpr char kSocketEnv[] = "HRXD_SOCKET";

struct PluginOptions {
  std::string hrxd_socket = "/run/hrxd/hrxd.sock";
  std::string kubelet_socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
  std::string plugin_socket = "/var/lib/kubelet/device-plugins/hrx.sock";
  std::string pod_resources_socket =
      "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string resource_name = "hrx.dev/gpu-memory";
  uint64_t unit_bytes = uint64_t{1} << 30;
  // Host-mapped (allocate_shared) bytes each pod's tenant may use; command
  // rings are charged there too.
  uint64_t shared_bytes = uint64_t{64} << 20;
  std::string container_socket_dir = "/run/hrxd";
  bool load_kernels = false;
  absl::Duration reconcile_interval = absl::Seconds(2);
  absl::Duration allocation_grace = absl::Seconds(60);

  // Where HRXD_SOCKET points inside a container.
  std::string container_socket() const {
    return container_socket_dir + "/hrxd.sock";
  }
};

// "1GiB", "512MiB", "4096": bytes. INVALID_ARGUMENT naming the text.
absl::StatusOr<uint64_t> ParseBytes(const std::string& text);

// INVALID_ARGUMENT unless the options can work: the plugin's socket beside
// the kubelet's, an extended resource name (DOMAIN/NAME, not in
// kubernetes.io), a positive unit, absolute paths.
absl::Status CheckOptions(const PluginOptions& options);

// What --describe prints: one JSON object.
std::string DescribeJson(const PluginOptions& options);

}  // namespace hrx::deviceplugin

#endif  // HRX_DEVICEPLUGIN_OPTIONS_H_
