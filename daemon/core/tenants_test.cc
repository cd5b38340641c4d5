#include "daemon/core/tenants.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kConfig[] = R"(
tenants {
  name: "ml"
  uids: 4001
  budget { device_bytes: 1048576 streams: 2 }
}
tenants {
  name: "ops"
  gids: 50
  role: ROLE_ADMIN
}
default_tenant { budget { device_bytes: 0 } }
)";

PeerIdentity Local(uid_t uid, gid_t gid) {
  PeerIdentity local;
  local.uid = uid;
  local.gid = gid;
  local.pid = 1;
  return local;
}

PeerIdentity Remote(const std::string& subject) {
  PeerIdentity remote;
  remote.remote = true;
  remote.certificate_subject = subject;
  return remote;
}

TEST(TenantRegistryTest, ResolvesByUidThenGidElseDefault) {
  auto registry = TenantRegistry::Parse(kConfig, "test.conf");
  ASSERT_THAT(registry.status(), IsOk());
  EXPECT_EQ((*registry)->Resolve(Local(4001, 50))->name(), "ml");
  EXPECT_EQ((*registry)->Resolve(Local(4002, 50))->name(), "ops");
  EXPECT_EQ((*registry)->Resolve(Local(4002, 51))->name(), "default");
  EXPECT_EQ((*registry)->Resolve(Remote("CN=nobody")), nullptr);
}

TEST(TenantRegistryTest, ARemoteCallerIsItsSubjectOrNobodyNeverAUid) {
  auto registry = TenantRegistry::Parse(R"(
tenants { name: "ops" uids: 0 role: ROLE_ADMIN certificate_subjects: "CN=ops" }
)",
                                        "test.conf");
  ASSERT_THAT(registry.status(), IsOk());
  EXPECT_EQ((*registry)->Resolve(Remote("CN=ops"))->name(), "ops");
  // Its uid field is 0, like root's, but it is remote: never matched by uid.
  EXPECT_EQ((*registry)->Resolve(Remote("")), nullptr);
  EXPECT_EQ((*registry)->Resolve(Remote("CN=other")), nullptr);
}

TEST(TenantRegistryTest,
     ObjectCeilingsDefaultWhenLeftOutAndBytesStayUnlimited) {
  auto registry = TenantRegistry::Parse(kConfig, "test.conf");
  ASSERT_THAT(registry.status(), IsOk());
  const Limits ml = (*registry)->Find("ml")->limits();
  EXPECT_EQ(ml[static_cast<size_t>(Resource::kStreams)], 2u);  // set
  EXPECT_EQ(ml[static_cast<size_t>(Resource::kSessions)],
            kDefaultSessionsPerTenant);
  EXPECT_EQ(ml[static_cast<size_t>(Resource::kBuffers)],
            kDefaultBuffersPerTenant);
  EXPECT_EQ(ml[static_cast<size_t>(Resource::kExports)],
            kDefaultExportsPerTenant);
  EXPECT_EQ(ml[static_cast<size_t>(Resource::kConnections)],
            kDefaultConnectionsPerTenant);
  EXPECT_EQ(ml[static_cast<size_t>(Resource::kSharedBytes)], std::nullopt);
  // The sessions ceiling is exact: the last one fits, one more is refused.
  std::shared_ptr<Tenant> tenant = (*registry)->Find("default");
  std::vector<ChargeRef> held;
  for (uint64_t i = 0; i < kDefaultSessionsPerTenant; ++i) {
    auto one = tenant->Reserve(Resource::kSessions, 1, "open session", "u");
    ASSERT_THAT(one.status(), IsOk()) << i;
    held.push_back(*one);
  }
  EXPECT_THAT(tenant->Reserve(Resource::kSessions, 1, "open session", "u"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("sessions budget of 64")));
}

TEST(TenantRegistryTest, TheShippedSampleConfigLoadsAndIsLeastPrivilege) {
  const char* root = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  ASSERT_NE(root, nullptr);
  auto registry = TenantRegistry::Load(std::string(root) + "/" + workspace +
                                       "/deploy/hrxd.conf");
  ASSERT_THAT(registry.status(), IsOk());
  std::shared_ptr<Tenant> stranger = (*registry)->Find("default");
  EXPECT_FALSE(stranger->load_kernels());
  EXPECT_EQ(stranger->limits()[static_cast<size_t>(Resource::kDeviceBytes)],
            0u);
  EXPECT_EQ(stranger->limits()[static_cast<size_t>(Resource::kSessions)],
            kDefaultSessionsPerTenant);
  EXPECT_FALSE((*registry)->Find("inference")->load_kernels());
}

TEST(TenantRegistryTest, KernelLoadingIsOffUnlessGrantedAndNeverForStrangers) {
  auto registry = TenantRegistry::Parse(R"(
tenants { name: "trusted" uids: 10 load_kernels: true }
tenants { name: "plain" uids: 11 }
)",
                                        "test.conf");
  ASSERT_THAT(registry.status(), IsOk());
  EXPECT_TRUE((*registry)->Find("trusted")->load_kernels());
  EXPECT_FALSE((*registry)->Find("plain")->load_kernels());
  EXPECT_FALSE((*registry)->Find("default")->load_kernels());
  EXPECT_THAT(TenantRegistry::Parse("default_tenant { load_kernels: true }",
                                    "bad.conf"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("default_tenant.load_kernels")));
}

TEST(TenantRegistryTest, ReservesUpToTheCeilingAndReleasesOnDrop) {
  auto registry = TenantRegistry::Parse(kConfig, "test.conf");
  ASSERT_THAT(registry.status(), IsOk());
  std::shared_ptr<Tenant> ml = (*registry)->Find("ml");
  auto first =
      ml->Reserve(Resource::kDeviceBytes, 1 << 19, "allocate", "uid 4001");
  auto second =
      ml->Reserve(Resource::kDeviceBytes, 1 << 19, "allocate", "uid 4001");
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_THAT(
      ml->Reserve(Resource::kDeviceBytes, 1, "allocate 1 B", "uid 4001"),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("budget_exhausted: allocate 1 B"),
                     HasSubstr("tenant \"ml\" (uid 4001)"),
                     HasSubstr("in use 1.00 MiB (1048576 bytes)"),
                     HasSubstr("asked 1 B (1 bytes)"), HasSubstr("Fix:"))));
  first->reset();
  EXPECT_EQ(ml->usage()[0], 1u << 19);
  EXPECT_THAT(ml->Reserve(Resource::kDeviceBytes, 1, "t", "u").status(),
              IsOk());
  // An ask near 2^64 is refused, and its message does not wrap.
  EXPECT_THAT(ml->Reserve(Resource::kDeviceBytes, ~uint64_t{0}, "huge", "u"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("(18446744073709551615 bytes) of its")));
  // Unlimited resources never refuse.
  EXPECT_THAT(
      ml->Reserve(Resource::kInflightCommands, 1 << 30, "t", "u").status(),
      IsOk());
}

TEST(TenantRegistryTest, LoweringABudgetRefusesNewUseAndFreesNothing) {
  auto registry = TenantRegistry::Parse(kConfig, "test.conf");
  std::shared_ptr<Tenant> ml = (*registry)->Find("ml");
  auto held = ml->Reserve(Resource::kStreams, 2, "t", "u");
  ASSERT_THAT(held.status(), IsOk());
  Limits lower = ml->limits();
  lower[static_cast<size_t>(Resource::kStreams)] = 1;
  ml->SetLimits(lower);
  EXPECT_EQ(ml->usage()[2], 2u);
  EXPECT_THAT(ml->Reserve(Resource::kStreams, 1, "t", "u"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("budget_exhausted")));
}

TEST(TenantRegistryTest, ConfigErrorsNameTheFileLineAndField) {
  EXPECT_THAT(
      TenantRegistry::Parse("tenants { name: \"a\" uids: x }", "bad.conf"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("config_invalid: bad.conf: line 1"),
                     HasSubstr("Fix:"))));
  EXPECT_THAT(
      TenantRegistry::Parse("tenants { name: \"a\" uids: 7 }\n"
                            "tenants {\n  name: \"b\"\n  uids: 7\n}\n",
                            "dup.conf"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("dup.conf:4: field tenants.uids"),
                     HasSubstr("uid 7 is in tenants \"a\" and \"b\""))));
  EXPECT_THAT(TenantRegistry::Parse("tenants {\n  name: \"a\"\n}\n"
                                    "tenants {\n  name: \"a\"\n}\n",
                                    "twice.conf"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("twice.conf:5: field tenants.name")));
  EXPECT_THAT(TenantRegistry::Parse("default_tenant { role: ROLE_ADMIN }",
                                    "admin.conf"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("default_tenant.role")));
}

TEST(TenantRegistryTest, ReloadKeepsTenantsThatKeepTheirNameAndTheirUse) {
  auto registry = TenantRegistry::Parse(kConfig, "test.conf");
  std::shared_ptr<Tenant> ml = (*registry)->Find("ml");
  auto held = ml->Reserve(Resource::kDeviceBytes, 1000, "t", "u");
  ASSERT_THAT(held.status(), IsOk());
  auto fresh = TenantRegistry::Parse(
      "tenants { name: \"ml\" uids: 4001 role: ROLE_OBSERVER "
      "budget { device_bytes: 2048 } }\n"
      "tenants { name: \"new\" uids: 4005 }\n",
      "fresh.conf");
  ASSERT_THAT(fresh.status(), IsOk());
  ASSERT_THAT((*registry)->Reload(std::move(**fresh)), IsOk());
  EXPECT_EQ((*registry)->Find("ml"), ml);  // the same object, use kept
  EXPECT_EQ(ml->usage()[0], 1000u);
  EXPECT_EQ(ml->limits()[0], 2048u);
  EXPECT_EQ(ml->role(), Role::kObserver);
  EXPECT_EQ((*registry)->Resolve(Local(4005, 1))->name(), "new");
  EXPECT_EQ((*registry)->Find("ops"), nullptr);
  EXPECT_EQ((*registry)->Resolve(Local(4002, 50))->name(), "default");
}

}  // namespace
}  // namespace hrx::daemon

namespace hrx::daemon {
namespace {

TEST(BoundTenantsTest, ACallerOfABoundSocketIsThatTenantUntilItIsRemoved) {
  auto registry = TenantRegistry::Parse(kConfig, "test");
  ASSERT_TRUE(registry.ok());
  const absl::Time now = absl::FromUnixSeconds(100);
  Limits limits = LimitsFromBudget(hrx::v1::Budget());
  limits[static_cast<size_t>(Resource::kDeviceBytes)] = 4096;
  auto pod = (*registry)->AddBound("pod-a", limits, false, {{"k", "v"}},
                                   "/run/hrxd/tenants/pod-a/hrxd.sock", 2, now);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ((*pod)->role(), Role::kClient);

  // uid 4001 is "ml" on the main socket, pod-a through pod-a's socket.
  PeerIdentity through = Local(4001, 50);
  through.bound_tenant = "pod-a";
  EXPECT_EQ((*registry)->Resolve(Local(4001, 50))->name(), "ml");
  EXPECT_EQ((*registry)->Resolve(through), *pod);
  EXPECT_EQ((*registry)->Find("pod-a"), *pod);
  ASSERT_EQ((*registry)->Bound().size(), 1u);
  EXPECT_EQ((*registry)->Bound()[0].labels.at("k"), "v");
  EXPECT_EQ((*registry)->Bound()[0].created, now);

  // A config reload leaves bound tenants alone, and may not take a bound
  // tenant's name.
  auto fresh = TenantRegistry::Parse(kConfig, "reload");
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*registry)->Reload(std::move(**fresh)).ok());
  EXPECT_EQ((*registry)->Resolve(through), *pod);
  auto clash =
      TenantRegistry::Parse(R"(tenants { name: "pod-a" uids: 4001 })", "clash");
  ASSERT_TRUE(clash.ok());
  const absl::Status refused = (*registry)->Reload(std::move(**clash));
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("Fix:"));
  EXPECT_EQ((*registry)->Resolve(Local(4001, 50))->name(), "ml");

  ASSERT_TRUE((*registry)->RemoveBound("pod-a").ok());
  // Never falls through to the uid's tenant.
  EXPECT_EQ((*registry)->Resolve(through), nullptr);
  EXPECT_EQ((*registry)->RemoveBound("pod-a").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(BoundTenantsTest, NamesCountsAndLabelsAreChecked) {
  auto registry = TenantRegistry::Parse(kConfig, "test");
  ASSERT_TRUE(registry.ok());
  const Limits limits = LimitsFromBudget(hrx::v1::Budget());
  const absl::Time now = absl::FromUnixSeconds(1);
  EXPECT_EQ((*registry)
                ->AddBound("ml", limits, false, {}, "", 4, now)
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*registry)
                ->AddBound("UPPER", limits, false, {}, "", 4, now)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*registry)->AddBound("one", limits, false, {}, "", 1, now).ok());
  EXPECT_EQ((*registry)
                ->AddBound("two", limits, false, {}, "", 1, now)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*registry)->SetBoundLabels("one", {{"", "x"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*registry)->SetBoundLabels("one", {{"a/b.c_d-e", "x y"}}).ok());
  EXPECT_EQ((*registry)->SetBoundLabels("nobody", {}).code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hrx::daemon
