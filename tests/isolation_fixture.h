// The fixture of the executor isolation tests: a daemon whose admin tenant
// (uid 0, this test) may load kernels in its own executor, a bystander
// tenant (tests/client_worker as uid 4101) on the shared executor, and
// helpers to run a hostile kernel and to see charges come back to zero.
#ifndef HRX_TESTS_ISOLATION_FIXTURE_H_
#define HRX_TESTS_ISOLATION_FIXTURE_H_

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
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

inline constexpr uid_t kBystander = 4101;

inline constexpr char kIsolationConfig[] = R"(
tenants { name: "bystander" uids: 4101 }
tenants { name: "ops" uids: 0 role: ROLE_ADMIN load_kernels: true }
)";

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the suite switches uids and must run as root";
    dir_ = MakeShortTempDir();
    std::ofstream(dir_ + "/hrxd.conf") << Config();
    auto daemon =
        TestDaemon::Start({"--config=" + dir_ + "/hrxd.conf",
                           "--socket_mode=0666", "--executor_watchdog_ms=1500"},
                          dir_);
    ASSERT_THAT(daemon.status(), shared::IsOk());
    daemon_ = *std::move(daemon);
    admin_ = hrx::v1::Admin::NewStub(grpc::CreateChannel(
        "unix:" + daemon_->socket_path(), grpc::InsecureChannelCredentials()));
  }

  // The daemon's tenants: kIsolationConfig unless a suite says otherwise.
  virtual std::string Config() const { return kIsolationConfig; }

  // The same daemon again, with `flags` instead of the default watchdog.
  void RestartDaemon(const std::vector<std::string>& flags) {
    daemon_.reset();
    std::vector<std::string> all = {"--config=" + dir_ + "/hrxd.conf",
                                    "--socket_mode=0666"};
    all.insert(all.end(), flags.begin(), flags.end());
    auto daemon = TestDaemon::Start(all, dir_);
    ASSERT_THAT(daemon.status(), shared::IsOk());
    daemon_ = *std::move(daemon);
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
  // The id of the session a client called `client_name` opened (0: none).
  uint64_t SessionOf(const std::string& client_name) {
    grpc::ClientContext context;
    hrx::v1::ListSessionsResponse sessions;
    EXPECT_TRUE(
        admin_
            ->ListSessions(&context, hrx::v1::ListSessionsRequest(), &sessions)
            .ok());
    for (const auto& info : sessions.sessions()) {
      if (info.client_name() == client_name) return info.id();
    }
    return 0;
  }
  // Why `executor` last went down, once it has (polled: the loss is
  // recorded by the watchdog's round), or "" after ~5 s.
  std::string LastLoss(const std::string& executor) {
    for (int i = 0; i < 250; ++i) {
      grpc::ClientContext context;
      hrx::v1::ListExecutorsResponse executors;
      EXPECT_TRUE(admin_
                      ->ListExecutors(&context, hrx::v1::ListExecutorsRequest(),
                                      &executors)
                      .ok());
      for (const hrx::v1::ExecutorInfo& info : executors.executors()) {
        if (info.name() == executor && !info.last_loss().empty()) {
          return info.last_loss();
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
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

}  // namespace hrx::testing

#endif  // HRX_TESTS_ISOLATION_FIXTURE_H_
