#include "deviceplugin/allocation.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hrx::deviceplugin {
namespace {

constexpr char kDevicePrefix[] = "hrx-mem-";

std::optional<uint64_t> IndexOf(const std::string& id) {
  if (!absl::StartsWith(id, kDevicePrefix)) return std::nullopt;
  const std::string digits = id.substr(sizeof(kDevicePrefix) - 1);
  uint64_t index = 0;
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0') ||
      !absl::SimpleAtoi(digits, &index)) {
    return std::nullopt;
  }
  return index;
}

bool ByIndex(const std::string& a, const std::string& b) {
  return IndexOf(a).value_or(UINT64_MAX) < IndexOf(b).value_or(UINT64_MAX);
}

}  // namespace

std::string DeviceId(uint64_t index) {
  return absl::StrCat(kDevicePrefix, index);
}

absl::StatusOr<uint64_t> DeviceCount(uint64_t memory_bytes,
                                     uint64_t unit_bytes) {
  const uint64_t count = memory_bytes / unit_bytes;
  if (count == 0 || count > kMaxDevices) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "hrxd's %u bytes of device memory make %u devices of %u bytes; the "
        "plugin advertises 1 to %u. Fix: set --unit to between %u and %u "
        "bytes.",
        memory_bytes, count, unit_bytes, kMaxDevices,
        (memory_bytes + kMaxDevices - 1) / kMaxDevices, memory_bytes));
  }
  return count;
}

absl::StatusOr<std::vector<std::string>> CheckDevices(
    const std::vector<std::string>& ids, uint64_t device_count) {
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        "no device IDs. Fix: request at least one unit of the resource.");
  }
  std::set<std::string> unique;
  for (const std::string& id : ids) {
    const std::optional<uint64_t> index = IndexOf(id);
    if (!index || *index >= device_count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device ID \"%s\" is not one this plugin advertises (%s0 to "
          "%s%u). Fix: allocate only IDs from ListAndWatch.",
          id.substr(0, 64), kDevicePrefix, kDevicePrefix, device_count - 1));
    }
    unique.insert(id);
  }
  std::vector<std::string> sorted(unique.begin(), unique.end());
  std::sort(sorted.begin(), sorted.end(), ByIndex);
  return sorted;
}

std::string TenantNameFor(const std::string& resource_name,
                          const std::vector<std::string>& ids) {
  // FNV-1a over the resource and the sorted IDs: stable across runs and
  // builds.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](const std::string& text) {
    for (const char c : text + ",") {
      hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
  };
  mix(resource_name);
  for (const std::string& id : ids) mix(id);
  return absl::StrFormat("k8s-%u-%08x", IndexOf(ids.front()).value_or(0),
                         static_cast<uint32_t>(hash ^ (hash >> 32)));
}

std::string DevicesLabel(const std::vector<std::string>& ids) {
  constexpr size_t kMaxBytes = 1000;  // under hrxd's 1024-byte label values
  std::vector<std::string> runs;
  for (size_t i = 0; i < ids.size();) {
    const uint64_t first = IndexOf(ids[i]).value_or(0);
    size_t j = i;
    while (j + 1 < ids.size() &&
           IndexOf(ids[j + 1]).value_or(0) == IndexOf(ids[j]).value_or(0) + 1) {
      ++j;
    }
    const uint64_t last = IndexOf(ids[j]).value_or(0);
    runs.push_back(first == last ? absl::StrCat(first)
                                 : absl::StrCat(first, "..", last));
    i = j + 1;
  }
  std::string label = absl::StrCat(kDevicePrefix, absl::StrJoin(runs, ","));
  if (label.size() > kMaxBytes) {
    label = absl::StrCat(label.substr(0, kMaxBytes), "... (",
                         ids.size(), " devices)");
  }
  return label;
}

std::vector<std::string> PreferredDevices(
    const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, size_t size) {
  std::vector<std::string> chosen;
  absl::flat_hash_set<std::string> taken;
  for (const std::string& id : must_include) {
    if (chosen.size() < size && taken.insert(id).second) chosen.push_back(id);
  }
  std::vector<std::string> rest = available;
  std::sort(rest.begin(), rest.end(), ByIndex);
  for (const std::string& id : rest) {
    if (chosen.size() >= size) break;
    if (taken.insert(id).second) chosen.push_back(id);
  }
  return chosen;
}

std::map<std::string, std::string> TenantLabels(
    const std::string& resource_name, const std::vector<std::string>& devices,
    const std::string& pod, const std::string& container) {
  std::map<std::string, std::string> labels = {
      {kManagedByLabel, kManagedByValue},
      {kResourceLabel, resource_name},
      {kDevicesLabel, DevicesLabel(devices)},
  };
  if (!pod.empty()) labels[kPodLabel] = pod;
  if (!container.empty()) labels[kContainerLabel] = container;
  return labels;
}

ReconcilePlan PlanReconcile(const std::vector<ExistingTenant>& tenants,
                            const std::vector<PodContainer>& containers,
                            const std::string& resource_name,
                            uint64_t device_count, absl::Time now,
                            absl::Duration grace) {
  ReconcilePlan plan;
  // One entry per container, its devices merged from all of its entries.
  std::map<std::pair<std::string, std::string>, PodContainer> merged;
  for (const PodContainer& container : containers) {
    PodContainer& entry = merged[{container.pod, container.container}];
    entry.pod = container.pod;
    entry.container = container.container;
    entry.device_ids.insert(entry.device_ids.end(),
                            container.device_ids.begin(),
                            container.device_ids.end());
  }
  std::map<std::string, PodContainer> wanted;
  for (auto& [key, container] : merged) {
    auto devices = CheckDevices(container.device_ids, device_count);
    if (!devices.ok()) continue;  // not ours (another plugin's resource)
    container.device_ids = *devices;
    wanted[TenantNameFor(resource_name, *devices)] = std::move(container);
  }
  std::map<std::string, const ExistingTenant*> existing;
  for (const ExistingTenant& tenant : tenants) existing[tenant.name] = &tenant;
  for (const auto& [name, container] : wanted) {
    auto it = existing.find(name);
    if (it == existing.end()) {
      plan.create.push_back(container);
      continue;
    }
    const auto& labels = it->second->labels;
    auto pod = labels.find(kPodLabel);
    auto name_label = labels.find(kContainerLabel);
    if (pod == labels.end() || pod->second != container.pod ||
        name_label == labels.end() ||
        name_label->second != container.container) {
      plan.label.push_back(container);
    }
  }
  for (const ExistingTenant& tenant : tenants) {
    auto managed = tenant.labels.find(kManagedByLabel);
    auto resource = tenant.labels.find(kResourceLabel);
    if (managed == tenant.labels.end() ||
        managed->second != kManagedByValue ||
        resource == tenant.labels.end() || resource->second != resource_name ||
        wanted.count(tenant.name) != 0) {
      continue;
    }
    const bool seen = tenant.labels.count(kPodLabel) != 0;
    if (seen || now - tenant.created > grace) {
      plan.remove.push_back(tenant.name);
    }
  }
  return plan;
}

}  // namespace hrx::deviceplugin
