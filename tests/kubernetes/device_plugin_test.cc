// hrx-device-plugin driven exactly as a kubelet drives it: a fake kubelet
// serves registration and pod resources over gRPC on Unix sockets, the
// plugin and hrxd run as real processes, and "containers" are client
// processes in a mount namespace of their own that see only what the
// plugin's Allocate told the kubelet to give them (the tenant's socket
// directory, mounted read-only where HRXD_SOCKET points).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/internal/connection.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "shared/status_matchers.h"
#include "tests/container.h"
#include "tests/kubernetes/fake_kubelet.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

constexpr char kResource[] = "hrx.dev/gpu-memory";
constexpr uint64_t kUnit = uint64_t{1} << 20;   // --unit=1MiB
constexpr uint64_t kDeviceMemory = 64 * kUnit;  // hrxd's cpu backend
constexpr int kReconcileMs = 100;
constexpr int kGraceMs = 3000;
// Long enough for a loaded 2-core machine; tests wait on conditions, never
// on the clock.
constexpr absl::Duration kPatience = absl::Seconds(30);

// Polls `done` until it holds or kPatience passes.
template <typename Condition>
bool Eventually(Condition done) {
  const absl::Time give_up = absl::Now() + kPatience;
  while (absl::Now() < give_up) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return done();
}

std::vector<std::string> Devices(int first, int count) {
  std::vector<std::string> ids;
  for (int i = first; i < first + count; ++i) {
    ids.push_back(absl::StrCat("hrx-mem-", i));
  }
  return ids;
}

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "containers are mount namespaces: run as root";
    dir_ = MakeShortTempDir();
    for (const char* sub : {"/kubelet", "/pod-resources", "/container"}) {
      ASSERT_EQ(mkdir((dir_ + sub).c_str(), 0755), 0) << sub;
    }
    kubelet_ =
        std::make_unique<FakeKubelet>(dir_ + "/kubelet", PodResourcesSocket());
    StartDaemon();
    plugin_ = std::make_unique<Subprocess>(Subprocess::Start(
        {RunfilePath("deviceplugin/hrx-device-plugin"),
         "--hrxd_socket=" + daemon_->socket_path(),
         "--kubelet_socket=" + kubelet_->registration_socket(),
         "--plugin_socket=" + dir_ + "/kubelet/hrx.sock",
         "--pod_resources_socket=" + PodResourcesSocket(),
         "--resource_name=" + std::string(kResource), "--unit=1MiB",
         "--shared_bytes=4MiB", "--container_socket_dir=" + ContainerDir(),
         absl::StrCat("--reconcile_ms=", kReconcileMs),
         absl::StrCat("--allocation_grace_ms=", kGraceMs)},
        dir_));
    auto registered = kubelet_->WaitForRegistration(1, kPatience);
    ASSERT_TRUE(registered.has_value()) << plugin_->Stderr();
    registration_ = *registered;
  }

  void TearDown() override {
    if (plugin_) plugin_->Signal(SIGTERM);
    if (plugin_) plugin_->Wait();
  }

  void StartDaemon() {
    auto daemon =
        TestDaemon::Start({absl::StrCat("--cpu_memory_bytes=", kDeviceMemory),
                           "--socket_mode=0666"},
                          dir_);
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
  }

  std::string PodResourcesSocket() const {
    return dir_ + "/pod-resources/kubelet.sock";
  }
  std::string ContainerDir() const { return dir_ + "/container"; }

  // The plugin, at the endpoint it registered (as the kubelet dials it).
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Plugin(
      const v1beta1::RegisterRequest& registration) const {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel(absl::StrCat("unix:", kubelet_->directory(), "/",
                                         registration.endpoint()),
                            grpc::InsecureChannelCredentials()));
  }

  absl::StatusOr<v1beta1::ContainerAllocateResponse> Allocate(
      const std::vector<std::string>& ids) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const std::string& id : ids) container->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    const grpc::Status status =
        Plugin(registration_)->Allocate(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    if (response.container_responses_size() != 1) {
      return absl::InternalError("not one container response");
    }
    return response.container_responses(0);
  }

  // A container as the runtime makes it from an Allocate response: its
  // mount (read-only as asked), its environment, and a process of `uid`
  // running tenant_client `scenario`.
  std::vector<std::string> ContainerCommand(
      const v1beta1::ContainerAllocateResponse& allocated, uid_t uid,
      const std::string& scenario, const std::vector<std::string>& extra,
      const std::string& go_file = "") {
    EXPECT_EQ(allocated.mounts_size(), 1);
    const v1beta1::Mount& mount = allocated.mounts(0);
    std::vector<std::string> env;
    for (const auto& [name, value] : allocated.envs()) {
      env.push_back(absl::StrCat(name, "=", value));
    }
    std::vector<std::string> argv = {RunfilePath("tests/tenant_client"),
                                     absl::StrCat("--uid=", uid),
                                     "--scenario=" + scenario};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return InContainer(
        {mount.host_path(), mount.container_path(), mount.read_only()}, env,
        argv, go_file);
  }

  RunResult RunInContainer(const v1beta1::ContainerAllocateResponse& allocated,
                           uid_t uid, const std::string& scenario,
                           const std::vector<std::string>& extra = {}) {
    return RunToCompletion(ContainerCommand(allocated, uid, scenario, extra),
                           dir_);
  }

  std::unique_ptr<Subprocess> StartInContainer(
      const v1beta1::ContainerAllocateResponse& allocated, uid_t uid,
      const std::string& scenario, const std::vector<std::string>& extra,
      const std::string& go_file = "") {
    return std::make_unique<Subprocess>(Subprocess::Start(
        ContainerCommand(allocated, uid, scenario, extra, go_file), dir_));
  }

  std::unique_ptr<hrx::v1::Admin::Stub> Admin() const {
    return hrx::v1::Admin::NewStub(
        client::internal::MakeChannel(daemon_->socket_path()));
  }

  std::vector<hrx::v1::BoundTenant> BoundTenants() const {
    grpc::ClientContext context;
    hrx::v1::ListBoundTenantsResponse response;
    const grpc::Status status = Admin()->ListBoundTenants(
        &context, hrx::v1::ListBoundTenantsRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.tenants().begin(), response.tenants().end()};
  }

  std::optional<hrx::v1::BoundTenant> BoundTenant(
      const std::string& name) const {
    for (const auto& tenant : BoundTenants()) {
      if (tenant.name() == name) return tenant;
    }
    return std::nullopt;
  }

  std::vector<hrx::v1::SessionInfo> SessionsOf(const std::string& tenant) {
    grpc::ClientContext context;
    hrx::v1::ListSessionsRequest request;
    request.set_tenant(tenant);
    hrx::v1::ListSessionsResponse response;
    EXPECT_TRUE(Admin()->ListSessions(&context, request, &response).ok());
    return {response.sessions().begin(), response.sessions().end()};
  }

  static std::string TenantOf(
      const v1beta1::ContainerAllocateResponse& allocated) {
    auto it = allocated.annotations().find("hrx.dev/tenant");
    return it == allocated.annotations().end() ? "" : it->second;
  }

  std::string dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Subprocess> plugin_;
  v1beta1::RegisterRequest registration_;
};

TEST_F(DevicePluginTest, RegistersAndListsOneHealthyDevicePerUnit) {
  EXPECT_EQ(registration_.version(), "v1beta1");
  EXPECT_EQ(registration_.resource_name(), kResource);
  EXPECT_EQ(registration_.endpoint(), "hrx.sock");
  EXPECT_TRUE(registration_.options().pre_start_required());
  EXPECT_TRUE(registration_.options().get_preferred_allocation_available());

  auto plugin = Plugin(registration_);
  {
    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    ASSERT_TRUE(
        plugin->GetDevicePluginOptions(&context, v1beta1::Empty(), &options)
            .ok());
    EXPECT_TRUE(options.pre_start_required());
    EXPECT_TRUE(options.get_preferred_allocation_available());
  }
  grpc::ClientContext context;
  auto stream = plugin->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  ASSERT_EQ(listed.devices_size(), static_cast<int>(kDeviceMemory / kUnit));
  for (int i = 0; i < listed.devices_size(); ++i) {
    EXPECT_EQ(listed.devices(i).id(), absl::StrCat("hrx-mem-", i));
    EXPECT_EQ(listed.devices(i).health(), "Healthy");
  }
  context.TryCancel();

  grpc::ClientContext preferred_context;
  v1beta1::PreferredAllocationRequest preferred;
  auto* wanted = preferred.add_container_requests();
  for (const char* id : {"hrx-mem-9", "hrx-mem-3", "hrx-mem-7", "hrx-mem-4"}) {
    wanted->add_available_deviceids(id);
  }
  wanted->add_must_include_deviceids("hrx-mem-9");
  wanted->set_allocation_size(3);
  v1beta1::PreferredAllocationResponse chosen;
  ASSERT_TRUE(
      plugin->GetPreferredAllocation(&preferred_context, preferred, &chosen)
          .ok());
  ASSERT_EQ(chosen.container_responses_size(), 1);
  EXPECT_THAT(chosen.container_responses(0).deviceids(),
              ::testing::ElementsAre("hrx-mem-9", "hrx-mem-3", "hrx-mem-4"));
}

TEST_F(DevicePluginTest, AContainerIsHeldToItsPodsBudgetToTheByte) {
  auto allocated = Allocate(Devices(0, 4));
  ASSERT_THAT(allocated.status(), IsOk());
  kubelet_->SetPods({{"ns/edge", "main", kResource, Devices(0, 4)}});
  EXPECT_EQ(allocated->envs().at("HRXD_SOCKET"), ContainerDir() + "/hrxd.sock");
  ASSERT_EQ(allocated->mounts_size(), 1);
  EXPECT_EQ(allocated->mounts(0).container_path(), ContainerDir());
  EXPECT_TRUE(allocated->mounts(0).read_only());
  const std::string tenant = TenantOf(*allocated);
  EXPECT_EQ(allocated->mounts(0).host_path(),
            absl::StrCat(dir_, "/tenants/", tenant));
  auto bound = BoundTenant(tenant);
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(bound->budget().device_bytes(), 4 * kUnit);
  EXPECT_EQ(bound->budget().shared_bytes(), 4 * kUnit);  // --shared_bytes
  EXPECT_EQ(bound->budget().connections(), 32u);
  EXPECT_EQ(bound->labels().at("hrx.dev/device-ids"), "hrx-mem-0..3");

  const RunResult run = RunInContainer(*allocated, 1000, "budget_edge",
                                       {absl::StrCat("--bytes=", 4 * kUnit)});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("exact: OK"));
  EXPECT_THAT(run.out,
              HasSubstr("one_more: RESOURCE_EXHAUSTED budget_exhausted"));
  EXPECT_THAT(run.out, HasSubstr("intact: yes"));
  // The container's uid 1000 is nobody to hrxd; its socket made it the
  // pod's tenant.
  EXPECT_THAT(run.out, HasSubstr("4194304"));

  // IDs the plugin never advertised are refused, naming the ID.
  auto forged = Allocate({"hrx-mem-64"});
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(forged.status().message()),
              HasSubstr("\"hrx-mem-64\""));
}

TEST_F(DevicePluginTest, TwoPodsWithTheSameUidAreDifferentTenants) {
  auto pod_a = Allocate(Devices(0, 2));
  auto pod_b = Allocate(Devices(2, 3));
  ASSERT_THAT(pod_a.status(), IsOk());
  ASSERT_THAT(pod_b.status(), IsOk());
  ASSERT_NE(TenantOf(*pod_a), TenantOf(*pod_b));
  // The kubelet lists both pods, as it does once their containers start:
  // an allocation no pod claims is reclaimed after --allocation_grace_ms,
  // which a slow machine (a sanitizer build) can reach before the holders
  // are ready.
  kubelet_->SetPods({{"ns/pod-a", "main", kResource, Devices(0, 2)},
                     {"ns/pod-b", "main", kResource, Devices(2, 3)}});
  auto holder_a =
      StartInContainer(*pod_a, 1000, "hold", {absl::StrCat("--bytes=", kUnit)});
  auto holder_b = StartInContainer(*pod_b, 1000, "hold",
                                   {absl::StrCat("--bytes=", 2 * kUnit)});
  ASSERT_TRUE(WaitForOutput(*holder_a, "ready: yes")) << holder_a->Stderr();
  ASSERT_TRUE(WaitForOutput(*holder_b, "ready: yes")) << holder_b->Stderr();
  const auto a = BoundTenant(TenantOf(*pod_a));
  const auto b = BoundTenant(TenantOf(*pod_b));
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->usage().device_bytes(), kUnit);
  EXPECT_EQ(b->usage().device_bytes(), 2 * kUnit);
  ASSERT_EQ(SessionsOf(a->name()).size(), 1u);
  ASSERT_EQ(SessionsOf(b->name()).size(), 1u);
  EXPECT_EQ(SessionsOf(a->name())[0].uid(), 1000u);
  EXPECT_EQ(SessionsOf(b->name())[0].uid(), 1000u);
  // Each is held to its own budget while the other holds memory: A has
  // 1 MiB left, B 1 MiB.
  const RunResult more_a = RunInContainer(*pod_a, 1000, "budget_edge",
                                          {absl::StrCat("--bytes=", kUnit)});
  EXPECT_THAT(more_a.out, HasSubstr("exact: OK"));
  EXPECT_THAT(more_a.out, HasSubstr("one_more: RESOURCE_EXHAUSTED"));
  EXPECT_THAT(more_a.out, HasSubstr("intact: yes"));
}

TEST_F(DevicePluginTest, APodGoneFromPodResourcesTakesItsTenantAndMemory) {
  auto allocated = Allocate(Devices(4, 4));
  ASSERT_THAT(allocated.status(), IsOk());
  const std::string tenant = TenantOf(*allocated);
  kubelet_->SetPods({{"team/trainer", "main", kResource, Devices(4, 4)}});
  auto holder = StartInContainer(*allocated, 1000, "hold",
                                 {absl::StrCat("--bytes=", 3 * kUnit)});
  ASSERT_TRUE(WaitForOutput(*holder, "ready: yes")) << holder->Stderr();
  // The plugin records the pod once the kubelet lists it.
  ASSERT_TRUE(Eventually([&] {
    auto bound = BoundTenant(tenant);
    return bound && bound->labels().count("hrx.dev/pod") &&
           bound->labels().at("hrx.dev/pod") == "team/trainer";
  }));
  const uint64_t in_use = QueryStatus(daemon_->socket_path()).bytes_in_use();
  EXPECT_GE(in_use, 3 * kUnit);
  ASSERT_EQ(SessionsOf(tenant).size(), 1u);

  kubelet_->SetPods({});  // the pod is deleted
  ASSERT_TRUE(Eventually([&] { return !BoundTenant(tenant).has_value(); }))
      << plugin_->Stderr();
  EXPECT_TRUE(SessionsOf(tenant).empty());
  EXPECT_TRUE(Eventually([&] {
    return QueryStatus(daemon_->socket_path()).bytes_in_use() <=
           in_use - 3 * kUnit;
  }));
  struct stat info {};
  EXPECT_NE(stat(allocated->mounts(0).host_path().c_str(), &info), 0)
      << "the tenant's socket directory outlived it";
  EXPECT_THAT(plugin_->Stderr(), HasSubstr("removed tenant " + tenant));
}

TEST_F(DevicePluginTest, AnAllocationNoPodClaimsIsReclaimedAfterTheGrace) {
  auto allocated = Allocate(Devices(8, 1));
  ASSERT_THAT(allocated.status(), IsOk());
  const std::string tenant = TenantOf(*allocated);
  ASSERT_TRUE(BoundTenant(tenant).has_value());
  // Never listed: gone once --allocation_grace_ms has passed.
  ASSERT_TRUE(Eventually([&] { return !BoundTenant(tenant).has_value(); }));
  EXPECT_THAT(plugin_->Stderr(), HasSubstr("removed tenant " + tenant));
}

TEST_F(DevicePluginTest, SurvivesAKubeletRestart) {
  auto before = Allocate(Devices(0, 2));
  ASSERT_THAT(before.status(), IsOk());
  kubelet_->SetPods({{"ns/kept", "main", kResource, Devices(0, 2)}});
  kubelet_->Restart();
  auto again = kubelet_->WaitForRegistration(2, kPatience);
  ASSERT_TRUE(again.has_value()) << plugin_->Stderr();
  registration_ = *again;
  EXPECT_EQ(registration_.resource_name(), kResource);
  // The plugin serves on a new socket, and the kubelet's next calls work.
  grpc::ClientContext context;
  auto stream = Plugin(registration_)->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  EXPECT_EQ(listed.devices_size(), static_cast<int>(kDeviceMemory / kUnit));
  context.TryCancel();
  auto after = Allocate(Devices(2, 2));
  ASSERT_THAT(after.status(), IsOk());
  // The pod allocated before the restart keeps its tenant.
  EXPECT_TRUE(BoundTenant(TenantOf(*before)).has_value());
  const RunResult run = RunInContainer(*before, 1000, "budget_edge",
                                       {absl::StrCat("--bytes=", 2 * kUnit)});
  EXPECT_THAT(run.out, HasSubstr("exact: OK"));
}

TEST_F(DevicePluginTest, SurvivesAnHrxdRestartWithTheSameTenantsAndMounts) {
  auto allocated = Allocate(Devices(10, 2));
  ASSERT_THAT(allocated.status(), IsOk());
  const std::string tenant = TenantOf(*allocated);
  kubelet_->SetPods({{"ns/survivor", "main", kResource, Devices(10, 2)}});

  // The kubelet's watch: devices go Unhealthy while hrxd is down, and
  // Healthy again once it is back.
  grpc::ClientContext watch_context;
  auto watch =
      Plugin(registration_)->ListAndWatch(&watch_context, v1beta1::Empty());
  absl::Mutex mu;
  std::vector<std::string> healths;
  std::thread watcher([&] {
    v1beta1::ListAndWatchResponse listed;
    while (watch->Read(&listed)) {
      absl::MutexLock lock(&mu);
      healths.push_back(listed.devices_size() > 0 ? listed.devices(0).health()
                                                  : "none");
    }
  });

  // A container started before the restart: its mount of the tenant's
  // directory is made now, and its client connects after hrxd is back.
  struct stat before {};
  ASSERT_EQ(stat(allocated->mounts(0).host_path().c_str(), &before), 0);
  const std::string go = dir_ + "/go";
  auto container = StartInContainer(*allocated, 1000, "budget_edge",
                                    {absl::StrCat("--bytes=", 2 * kUnit)}, go);
  ASSERT_TRUE(WaitForOutput(*container, "mounted: yes")) << container->Stderr();

  EXPECT_EQ(daemon_->Stop(), 0);
  daemon_.reset();
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return !healths.empty() && healths.back() == "Unhealthy";
  })) << plugin_->Stderr();
  StartDaemon();
  // The plugin makes the tenant again, same name and budget, pod recorded.
  ASSERT_TRUE(Eventually([&] { return BoundTenant(tenant).has_value(); }))
      << plugin_->Stderr();
  const auto restored = BoundTenant(tenant);
  EXPECT_EQ(restored->budget().device_bytes(), 2 * kUnit);
  EXPECT_EQ(restored->labels().at("hrx.dev/pod"), "ns/survivor");
  EXPECT_EQ(restored->socket_path(),
            allocated->mounts(0).host_path() + "/hrxd.sock");
  EXPECT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return healths.back() == "Healthy";
  }));
  // The same directory (a mount holds the inode, not the path), which the
  // mount made before the restart reaches: the new hrxd, same budget.
  struct stat after {};
  ASSERT_EQ(stat(allocated->mounts(0).host_path().c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  ASSERT_TRUE(std::ofstream(go).good());
  EXPECT_EQ(container->Wait(), 0) << container->Stdout() << container->Stderr();
  EXPECT_THAT(container->Stdout(), HasSubstr("exact: OK"));
  EXPECT_THAT(container->Stdout(),
              HasSubstr("one_more: RESOURCE_EXHAUSTED budget_exhausted"));
  EXPECT_THAT(container->Stdout(), HasSubstr("intact: yes"));
  watch_context.TryCancel();
  watcher.join();
}

}  // namespace
}  // namespace hrx::testing
