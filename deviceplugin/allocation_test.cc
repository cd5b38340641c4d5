// The plugin's decisions without gRPC: devices, tenant names, preferences,
// and reconciliation against the kubelet's pods.
#include "deviceplugin/allocation.h"

#include "deviceplugin/options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kResource[] = "hrx.dev/gpu-memory";

TEST(DeviceCountTest, OneDevicePerWholeUnitWithinTheCeiling) {
  EXPECT_EQ(*DeviceCount(uint64_t{10} << 30, uint64_t{1} << 30), 10u);
  EXPECT_EQ(*DeviceCount((uint64_t{10} << 30) + 5, uint64_t{1} << 30), 10u);
  EXPECT_EQ(*DeviceCount(kMaxDevices * 4096, 4096), kMaxDevices);
  const absl::StatusOr<uint64_t> too_many =
      DeviceCount((kMaxDevices + 1) * 4096, 4096);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(too_many.status().message()),
              ::testing::HasSubstr("Fix: set --unit"));
  EXPECT_FALSE(DeviceCount(1 << 20, 1 << 30).ok());  // less than one unit
}

TEST(CheckDevicesTest, AcceptsOnlyAdvertisedIdsAndSortsByIndex) {
  EXPECT_THAT(*CheckDevices({"hrx-mem-10", "hrx-mem-2", "hrx-mem-2"}, 11),
              ElementsAre("hrx-mem-2", "hrx-mem-10"));
  for (const char* bad : {"hrx-mem-11", "hrx-mem-01", "hrx-mem-", "gpu-0",
                          "hrx-mem--1", "hrx-mem-1x"}) {
    EXPECT_EQ(CheckDevices({bad}, 11).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_FALSE(CheckDevices({}, 11).ok());
}

TEST(TenantNameTest, StableForASetAndDistinctAcrossSets) {
  const std::string a = TenantNameFor(kResource, {"hrx-mem-3", "hrx-mem-4"});
  EXPECT_EQ(a, TenantNameFor(kResource, {"hrx-mem-3", "hrx-mem-4"}));
  EXPECT_NE(a, TenantNameFor(kResource, {"hrx-mem-3", "hrx-mem-5"}));
  EXPECT_NE(a, TenantNameFor(kResource, {"hrx-mem-3"}));
  EXPECT_THAT(a, ::testing::StartsWith("k8s-3-"));
  EXPECT_LE(TenantNameFor(kResource, {DeviceId(kMaxDevices - 1)}).size(), 63u);
  // Another resource's plugin never makes the same name.
  EXPECT_NE(a, TenantNameFor("example.com/other", {"hrx-mem-3", "hrx-mem-4"}));
}

TEST(DevicesLabelTest, RunsOfIndicesCutToFitALabel) {
  EXPECT_EQ(DevicesLabel({"hrx-mem-0", "hrx-mem-1", "hrx-mem-2", "hrx-mem-7",
                          "hrx-mem-9", "hrx-mem-10"}),
            "hrx-mem-0..2,7,9..10");
  std::vector<std::string> every_other;
  for (uint64_t i = 0; i < kMaxDevices; i += 2) every_other.push_back(DeviceId(i));
  const std::string cut = DevicesLabel(every_other);
  EXPECT_LE(cut.size(), 1024u);
  EXPECT_THAT(cut, ::testing::EndsWith("... (2048 devices)"));
}

TEST(PreferredDevicesTest, MustIncludeFirstThenLowestIndices) {
  EXPECT_THAT(PreferredDevices({"hrx-mem-9", "hrx-mem-1", "hrx-mem-5",
                                "hrx-mem-10"},
                               {"hrx-mem-9"}, 3),
              ElementsAre("hrx-mem-9", "hrx-mem-1", "hrx-mem-5"));
  EXPECT_THAT(PreferredDevices({"hrx-mem-1"}, {}, 0), IsEmpty());
}

ExistingTenant Existing(const std::vector<std::string>& devices,
                        const std::string& pod, absl::Time created) {
  return ExistingTenant{TenantNameFor(kResource, devices),
                        TenantLabels(kResource, devices, pod, "main"),
                        created};
}

TEST(PlanReconcileTest, RestoresLabelsAndReclaims) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  const absl::Duration grace = absl::Seconds(60);
  const std::vector<std::string> listed = {"hrx-mem-0", "hrx-mem-1"};
  const std::vector<std::string> unlabelled = {"hrx-mem-2"};
  const std::vector<std::string> gone = {"hrx-mem-3"};
  const std::vector<std::string> fresh = {"hrx-mem-4"};
  const std::vector<std::string> stale = {"hrx-mem-5"};
  const std::vector<std::string> missing = {"hrx-mem-6"};
  std::vector<ExistingTenant> tenants = {
      Existing(listed, "ns/a", now - absl::Hours(1)),
      Existing(unlabelled, "", now - absl::Hours(1)),
      Existing(gone, "ns/gone", now - absl::Seconds(1)),
      Existing(fresh, "", now - absl::Seconds(10)),
      Existing(stale, "", now - absl::Seconds(61)),
      // Not the plugin's: never touched.
      ExistingTenant{"ops", {{"team", "ops"}}, now - absl::Hours(9)},
  };
  const std::vector<PodContainer> pods = {
      {"ns/a", "main", {"hrx-mem-1", "hrx-mem-0"}},
      {"ns/b", "main", unlabelled},
      {"ns/c", "main", missing},
      {"ns/d", "main", {"other-vendor-0"}},
  };
  const ReconcilePlan plan =
      PlanReconcile(tenants, pods, kResource, 16, now, grace);
  ASSERT_EQ(plan.create.size(), 1u);
  EXPECT_EQ(plan.create[0].pod, "ns/c");
  ASSERT_EQ(plan.label.size(), 1u);
  EXPECT_EQ(plan.label[0].pod, "ns/b");
  EXPECT_THAT(plan.remove,
              ::testing::UnorderedElementsAre(TenantNameFor(kResource, gone),
                                              TenantNameFor(kResource, stale)));
}

TEST(PlanReconcileTest, AContainersDevicesInSeveralEntriesAreOneTenant) {
  // The kubelet lists a container's devices one entry per device (or per
  // NUMA node): they still make the one tenant Allocate made.
  const absl::Time now = absl::FromUnixSeconds(1000);
  const std::vector<std::string> devices = {"hrx-mem-0", "hrx-mem-1",
                                            "hrx-mem-2"};
  const ExistingTenant tenant = Existing(devices, "ns/a", now);
  const ReconcilePlan plan = PlanReconcile(
      {tenant},
      {{"ns/a", "main", {"hrx-mem-2"}},
       {"ns/a", "main", {"hrx-mem-0"}},
       {"ns/a", "main", {"hrx-mem-1"}}},
      kResource, 4, now, absl::ZeroDuration());
  EXPECT_THAT(plan.remove, IsEmpty());
  EXPECT_THAT(plan.create, IsEmpty());
  EXPECT_THAT(plan.label, IsEmpty());
}

TEST(PlanReconcileTest, AnotherResourcesTenantsAreLeftAlone) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  ExistingTenant other = Existing({"hrx-mem-1"}, "ns/x", now);
  other.labels[kResourceLabel] = "example.com/other";
  EXPECT_THAT(PlanReconcile({other}, {}, kResource, 4, now, absl::ZeroDuration())
                  .remove,
              IsEmpty());
}

TEST(OptionsTest, BytesAndChecks) {
  EXPECT_EQ(*ParseBytes("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseBytes("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  for (const char* bad : {"", "0", "1GB", "-1", "GiB", "99999999999999TiB"}) {
    EXPECT_FALSE(ParseBytes(bad).ok()) << bad;
  }
  PluginOptions options;
  EXPECT_THAT(CheckOptions(options), hrx::shared::IsOk());
  options.resource_name = "kubernetes.io/gpu-memory";
  EXPECT_FALSE(CheckOptions(options).ok());
  options.resource_name = "gpu-memory";
  EXPECT_FALSE(CheckOptions(options).ok());
  options = PluginOptions();
  options.plugin_socket = "/tmp/elsewhere/hrx.sock";
  EXPECT_THAT(std::string(CheckOptions(options).message()),
              ::testing::HasSubstr("beside --kubelet_socket"));
}

}  // namespace
}  // namespace hrx::deviceplugin
