// What the device plugin decides, apart from gRPC: the devices it
// advertises (one per unit of hrxd's device memory), the tenant a set of
// devices becomes, which devices it prefers, and how to bring hrxd's bound
// tenants in line with the pods the kubelet reports.
//
// A tenant's name is derived from its device IDs alone, so that the plugin
// keeps no state of its own: after a restart of the plugin or of hrxd, the
// kubelet's pod resources say which tenants must exist, with which names,
// budgets and socket directories (containers' mounts of those directories
// keep working).
#ifndef HRX_DEVICEPLUGIN_ALLOCATION_H_
#define HRX_DEVICEPLUGIN_ALLOCATION_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hrx::deviceplugin {

// Devices advertised at most: a ListAndWatch reply lists each one, and the
// kubelet checkpoints them. Past it, the operator raises --unit.
inline constexpr uint64_t kMaxDevices = 4096;

// Labels the plugin sets on its tenants in hrxd (hrxctl bound shows them).
inline constexpr char kManagedByLabel[] = "hrx.dev/managed-by";
inline constexpr char kManagedByValue[] = "hrx-device-plugin";
inline constexpr char kResourceLabel[] = "hrx.dev/resource";
inline constexpr char kDevicesLabel[] = "hrx.dev/device-ids";
inline constexpr char kPodLabel[] = "hrx.dev/pod";
inline constexpr char kContainerLabel[] = "hrx.dev/container";

// "hrx-mem-7".
std::string DeviceId(uint64_t index);
// How many devices `memory_bytes` makes in `unit_bytes`; FAILED_PRECONDITION
// for none or more than kMaxDevices, naming the numbers.
absl::StatusOr<uint64_t> DeviceCount(uint64_t memory_bytes,
                                     uint64_t unit_bytes);
// The devices of one container: checked against the `device_count` the
// plugin advertises (INVALID_ARGUMENT naming the ID), sorted, deduplicated.
absl::StatusOr<std::vector<std::string>> CheckDevices(
    const std::vector<std::string>& ids, uint64_t device_count);
// The bound tenant for these (checked) devices of `resource_name`: "k8s-" +
// the lowest index + "-" + 8 hex digits of a hash of the resource and the
// whole set. Two live allocations never share a device, so never a name.
std::string TenantNameFor(const std::string& resource_name,
                          const std::vector<std::string>& ids);
// The devices as the label shows them: runs of indices ("hrx-mem-0..3,7"),
// cut to fit a label value (hrxd takes at most 1024 bytes).
std::string DevicesLabel(const std::vector<std::string>& ids);

// GetPreferredAllocation: `size` devices from `available`, `must_include`
// first, then the lowest indices (contiguous runs make short names and
// tidy listings; units of memory are otherwise alike).
std::vector<std::string> PreferredDevices(
    const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, size_t size);

// A container the kubelet reports holding some of the plugin's devices.
struct PodContainer {
  std::string pod;        // namespace/name
  std::string container;  // its name
  std::vector<std::string> device_ids;
};

// A bound tenant hrxd reports.
struct ExistingTenant {
  std::string name;
  std::map<std::string, std::string> labels;
  absl::Time created;
};

// What to change so that hrxd's tenants match the pods.
struct ReconcilePlan {
  // Tenants a listed container needs that hrxd lacks (hrxd restarted):
  // made again with the same name, so the container's mount works.
  std::vector<PodContainer> create;
  // Tenants whose pod is now known, or changed: label them.
  std::vector<PodContainer> label;
  // Tenants of this plugin whose pod is gone (once seen with a pod), or
  // that no pod claimed within the grace period.
  std::vector<std::string> remove;
};

// Compares hrxd's tenants with the kubelet's `containers` (those holding
// devices of `resource_name`, unchecked IDs skipped) at `now`. Entries of
// one container are merged first: the kubelet reports a container's devices
// in several entries (one per device, or per NUMA node). Only tenants this
// plugin made for this resource are ever removed.
//
// `remove` lists candidates; the reconciler removes one only after it has
// been a candidate on kReclaimAfterPasses passes in a row, so that one
// incomplete answer (a kubelet just restarted) removes nothing.
inline constexpr int kReclaimAfterPasses = 3;
ReconcilePlan PlanReconcile(const std::vector<ExistingTenant>& tenants,
                            const std::vector<PodContainer>& containers,
                            const std::string& resource_name,
                            uint64_t device_count, absl::Time now,
                            absl::Duration grace);

// The labels of a tenant for `devices`, and once known, its pod.
std::map<std::string, std::string> TenantLabels(
    const std::string& resource_name, const std::vector<std::string>& devices,
    const std::string& pod, const std::string& container);

}  // namespace hrx::deviceplugin

#endif  // HRX_DEVICEPLUGIN_ALLOCATION_H_
