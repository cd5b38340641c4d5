// Executors: a tenant's kernels run in a sandboxed process of its own, so a
// kernel that crashes, spins or snoops ends or reaches only that process.
// Each defence is shown while a bystander tenant (tests/client_worker, as
// another uid, on the shared executor) keeps checking every byte it reads.
#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hrx/client.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "shared/status_matchers.h"
#include "tests/client_fixture.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

constexpr uid_t kBystander = 4101;

constexpr char kConfig[] = R"(
tenants { name: "bystander" uids: 4101 }
tenants { name: "ops" uids: 0 role: ROLE_ADMIN load_kernels: true }
)";

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the suite switches uids and must run as root";
    dir_ = MakeShortTempDir();
    std::ofstream(dir_ + "/hrxd.conf") << kConfig;
    auto daemon =
        TestDaemon::Start({"--config=" + dir_ + "/hrxd.conf",
                           "--socket_mode=0666", "--executor_watchdog_ms=1500"},
                          dir_);
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
    admin_ = hrx::v1::Admin::NewStub(grpc::CreateChannel(
        "unix:" + daemon_->socket_path(), grpc::InsecureChannelCredentials()));
  }

  // A bystander that allocates, uploads, copies and reads back for as long
  // as `rounds` take, checking every byte.
  Subprocess StartBystander(int rounds) {
    return Subprocess::Start(
        {RunfilePath("tests/client_worker"),
         "--socket=" + daemon_->socket_path(),
         absl::StrCat("--uid=", kBystander), "--seed=5", "--bytes=262147",
         absl::StrCat("--rounds=", rounds)},
        dir_);
  }
  void ExpectBystanderUnharmed(Subprocess& bystander) {
    EXPECT_EQ(bystander.Wait(), 0)
        << "the bystander saw an error or a wrong byte: " << bystander.Stdout()
        << bystander.Stderr();
  }

  // A stream of the admin tenant, retried while its executor restarts.
  struct Attacker {
    std::unique_ptr<Client> client;
    std::optional<Device> device;
    std::unique_ptr<Stream> stream;
  };
  absl::StatusOr<Attacker> Connect() {
    absl::Status last;
    for (int attempt = 0; attempt < 200; ++attempt) {
      Attacker attacker;
      auto client = Client::Connect(daemon_->socket_path(), "attacker");
      if (!client.ok()) return client.status();
      attacker.client = *std::move(client);
      auto device = attacker.client->OpenDevice(0);
      if (!device.ok()) return device.status();
      attacker.device.emplace(*std::move(device));
      auto stream = attacker.device->CreateStream();
      if (stream.ok()) {
        attacker.stream = std::make_unique<Stream>(*std::move(stream));
        return attacker;
      }
      last = stream.status();  // executor_restarting, for a moment
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return last;
  }

  // Loads `kernel` and dispatches it once on one workgroup.
  absl::Status Run(Attacker& attacker, const std::string& kernel,
                   Constants constants, Buffer& out) {
    auto loaded = attacker.stream->LoadKernelFile(KernelPath(kernel), kernel);
    if (!loaded.ok()) return loaded.status();
    const View binding = out.Binding();
    absl::Status dispatched = attacker.stream->Dispatch(
        *loaded, {1, 1, 1}, {1, 1, 1}, constants, {&binding, 1});
    if (!dispatched.ok()) return dispatched;
    return attacker.stream->Synchronize();
  }

  hrx::v1::TenantInfo Tenant(const std::string& name) {
    grpc::ClientContext context;
    hrx::v1::ListTenantsResponse response;
    EXPECT_TRUE(
        admin_->ListTenants(&context, hrx::v1::ListTenantsRequest(), &response)
            .ok());
    for (const auto& tenant : response.tenants()) {
      if (tenant.name() == name) return tenant;
    }
    return {};
  }
  // Polls until `tenant` holds no bytes, streams, buffers or in-flight work.
  bool ChargesBackToZero(const std::string& tenant) {
    for (int i = 0; i < 250; ++i) {
      const hrx::v1::Usage usage = Tenant(tenant).usage();
      if (usage.device_bytes() == 0 && usage.shared_bytes() == 0 &&
          usage.streams() == 0 && usage.buffers() == 0 &&
          usage.kernels() == 0 && usage.inflight_commands() == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << tenant << ": " << Tenant(tenant).usage().DebugString();
    return false;
  }

  std::string dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<hrx::v1::Admin::Stub> admin_;
};

TEST_F(IsolationTest, CrashingKernelsEndOnlyTheirOwnExecutor) {
  Subprocess bystander = StartBystander(/*rounds=*/40);
  constexpr int kCrashes = 100;
  for (int i = 0; i < kCrashes; ++i) {
    auto attacker = Connect();
    ASSERT_THAT(attacker.status(), IsOk()) << "round " << i;
    auto out = attacker->stream->Allocate(4096);
    ASSERT_THAT(out.status(), IsOk());
    Constants mode;
    ASSERT_THAT(mode.Push(static_cast<uint32_t>(i % 3)), IsOk());
    const absl::Status crashed = Run(*attacker, "crash", mode, *out);
    EXPECT_EQ(crashed.code(), absl::StatusCode::kUnavailable) << crashed;
    EXPECT_THAT(crashed.message(), HasSubstr("executor_lost")) << i;
    EXPECT_THAT(crashed.message(), HasSubstr("Fix:"));
  }
  ExpectBystanderUnharmed(bystander);
  EXPECT_TRUE(ChargesBackToZero("ops"));
  // The attacker recovers with a new session on a new executor.
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  Constants pattern;
  ASSERT_THAT(pattern.Push(uint64_t{64}), IsOk());
  ASSERT_THAT(pattern.Push(uint32_t{3}), IsOk());
  auto loaded = attacker->stream->LoadKernelFile(KernelPath("write_pattern"),
                                                 "write_pattern");
  ASSERT_THAT(loaded.status(), IsOk());
  const View binding = out->Binding();
  ASSERT_THAT(attacker->stream->Dispatch(*loaded, {1, 1, 1}, {64, 1, 1},
                                         pattern, {&binding, 1}),
              IsOk());
  std::vector<uint8_t> bytes(64);
  ASSERT_THAT(attacker->stream->ReadBlocking(binding, bytes), IsOk());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(bytes[i], (uint8_t)(i * 31 + 3));
}

TEST_F(IsolationTest, AKernelThatNeverFinishesIsKilledByTheWatchdog) {
  Subprocess bystander = StartBystander(/*rounds=*/10);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  const absl::Status spun = Run(*attacker, "spin", Constants(), *out);
  EXPECT_EQ(spun.code(), absl::StatusCode::kUnavailable) << spun;
  EXPECT_THAT(spun.message(), HasSubstr("made no progress"));
  ExpectBystanderUnharmed(bystander);
  EXPECT_TRUE(ChargesBackToZero("ops"));
}

TEST_F(IsolationTest, AKernelCannotReachTheDaemonOrAnotherExecutor) {
  // The bystander's work runs on the shared executor: start it first.
  Subprocess bystander = StartBystander(/*rounds=*/2);
  ExpectBystanderUnharmed(bystander);
  const pid_t daemon = daemon_->process().pid();
  const pid_t shared = ExecutorPid(daemon, "shared");
  ASSERT_GT(shared, 0);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  Constants pids;
  ASSERT_THAT(pids.Push(static_cast<uint32_t>(daemon)), IsOk());
  ASSERT_THAT(pids.Push(static_cast<uint32_t>(shared)), IsOk());
  ASSERT_THAT(Run(*attacker, "snoop", pids, *out), IsOk());
  std::vector<uint8_t> bytes(64);
  ASSERT_THAT(attacker->stream->ReadBlocking(out->Binding(), bytes), IsOk());
  const char* attempts[] = {"hrxd's memory",
                            "hrxd's environment",
                            "hrxd's descriptors",
                            "the shared executor's memory",
                            "ptrace of the shared executor",
                            "a TCP socket"};
  for (int i = 0; i < 6; ++i) {
    uint32_t error = 0;
    std::memcpy(&error, bytes.data() + 4 * i, 4);
    EXPECT_TRUE(error == EACCES || error == EPERM)
        << attempts[i] << ": the kernel got errno " << error
        << " (0: it succeeded)";
  }
  // The kernel ran as an unprivileged user, not as hrxd's root.
  const pid_t own = ExecutorPid(daemon, "ops");
  ASSERT_GT(own, 0);
  std::ifstream status(absl::StrCat("/proc/", own, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      EXPECT_THAT(line, ::testing::Not(HasSubstr("	0	")));
    }
  }
}

}  // namespace
}  // namespace hrx::testing
