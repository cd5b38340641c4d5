// Socket-bound tenants against a real hrxd: whoever connects through a
// bound tenant's socket is that tenant (whatever its uid, root included),
// held to its budget and never an admin; removal ends its connections and
// sessions and returns its budget while bystanders keep working; every
// limit is refused at its edge; directories outlive hrxd.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/internal/connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hrx/client.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "shared/status_macros.h"
#include "shared/status_matchers.h"
#include "tests/container.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::EndsWith;
using ::testing::HasSubstr;

class BoundTenantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "these tests switch uids: run as root";
    dir_ = MakeShortTempDir();
    StartDaemon();
  }

  void StartDaemon(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--socket_mode=0666",
                                      "--max_bound_tenants=3"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto daemon = TestDaemon::Start(flags, dir_);
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
  }

  std::unique_ptr<hrx::v1::Admin::Stub> Admin() const {
    return hrx::v1::Admin::NewStub(
        client::internal::MakeChannel(daemon_->socket_path()));
  }

  absl::StatusOr<hrx::v1::BoundTenant> Create(
      const std::string& name, uint64_t device_bytes,
      const std::map<std::string, std::string>& labels = {},
      bool load_kernels = false) {
    grpc::ClientContext context;
    hrx::v1::CreateBoundTenantRequest request;
    request.set_name(name);
    request.set_load_kernels(load_kernels);
    request.mutable_budget()->set_device_bytes(device_bytes);
    request.mutable_labels()->insert(labels.begin(), labels.end());
    hrx::v1::CreateBoundTenantResponse response;
    const grpc::Status status =
        Admin()->CreateBoundTenant(&context, request, &response);
    if (!status.ok()) return client::internal::CallStatus(status, "");
    return response.tenant();
  }

  absl::StatusOr<hrx::v1::RemoveBoundTenantResponse> Remove(
      const std::string& name) {
    grpc::ClientContext context;
    hrx::v1::RemoveBoundTenantRequest request;
    request.set_name(name);
    hrx::v1::RemoveBoundTenantResponse response;
    const grpc::Status status =
        Admin()->RemoveBoundTenant(&context, request, &response);
    if (!status.ok()) return client::internal::CallStatus(status, "");
    return response;
  }

  std::vector<hrx::v1::BoundTenant> Bound() {
    grpc::ClientContext context;
    hrx::v1::ListBoundTenantsResponse response;
    EXPECT_TRUE(Admin()
                    ->ListBoundTenants(
                        &context, hrx::v1::ListBoundTenantsRequest(), &response)
                    .ok());
    return {response.tenants().begin(), response.tenants().end()};
  }

  std::vector<std::string> ClientArgs(const std::string& socket, uid_t uid,
                                      const std::string& scenario,
                                      const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {
        RunfilePath("tests/tenant_client"), "--socket=" + socket,
        absl::StrCat("--uid=", uid), "--scenario=" + scenario};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  RunResult Run(const std::string& socket, uid_t uid,
                const std::string& scenario,
                const std::vector<std::string>& extra = {}) {
    return RunToCompletion(ClientArgs(socket, uid, scenario, extra), dir_);
  }

  // A client of `tenant` as a container runs one: the tenant's directory
  // mounted read-only in a mount namespace of its own (the tenant socket
  // directory is 0700: only a mount reaches a tenant's socket).
  std::vector<std::string> InTenant(const hrx::v1::BoundTenant& tenant,
                                    uid_t uid, const std::string& scenario,
                                    const std::vector<std::string>& extra) {
    const std::string& socket = tenant.socket_path();
    const std::string mount_point = dir_ + "/container";
    mkdir(mount_point.c_str(), 0755);
    return InContainer(
        {socket.substr(0, socket.rfind('/')), mount_point, true}, {},
        ClientArgs(mount_point + "/hrxd.sock", uid, scenario, extra));
  }

  RunResult RunIn(const hrx::v1::BoundTenant& tenant, uid_t uid,
                  const std::string& scenario,
                  const std::vector<std::string>& extra = {}) {
    return RunToCompletion(InTenant(tenant, uid, scenario, extra), dir_);
  }

  std::string dir_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(BoundTenantTest, ACallerThroughABoundSocketIsThatTenantEvenAsRoot) {
  auto pod = Create("pod-a", 65536);
  ASSERT_THAT(pod.status(), IsOk());
  EXPECT_EQ(pod->socket_path(), dir_ + "/tenants/pod-a/hrxd.sock");
  // Root is the admin tenant "local" (unlimited) on the main socket; through
  // the bound socket it is pod-a, held to 64 KiB to the byte.
  const RunResult held =
      Run(pod->socket_path(), 0, "budget_edge", {"--bytes=65536"});
  EXPECT_THAT(held.out, HasSubstr("exact: OK"));
  EXPECT_THAT(held.out,
              HasSubstr("one_more: RESOURCE_EXHAUSTED budget_exhausted"));
  EXPECT_THAT(held.out, HasSubstr("intact: yes"));
  // And it is no admin there: not for budgets, not for bound tenants.
  EXPECT_THAT(Run(pod->socket_path(), 0, "admin_set_budget").out,
              HasSubstr("set_budget: PERMISSION_DENIED role_required"));
  for (const char* action : {"create", "remove", "label"}) {
    EXPECT_THAT(Run(pod->socket_path(), 0, "admin_bound",
                    {absl::StrCat("--action=", action), "--name=pod-a"})
                    .out,
                HasSubstr("PERMISSION_DENIED role_required"))
        << action;
  }
  // A stranger on the main socket (tenant "default") may not either.
  EXPECT_THAT(Run(daemon_->socket_path(), 4242, "admin_bound",
                  {"--action=create", "--name=mine"})
                  .out,
              HasSubstr("PERMISSION_DENIED role_required"));
  EXPECT_EQ(Bound().size(), 1u);
}

TEST_F(BoundTenantTest,
       RemovalEndsConnectionsAndSessionsAndBystandersKeepGoing) {
  auto doomed = Create("doomed", 4 << 20);
  auto bystander = Create("bystander", 1 << 20);
  ASSERT_THAT(doomed.status(), IsOk());
  ASSERT_THAT(bystander.status(), IsOk());
  auto holder = Subprocess::Start(
      InTenant(*doomed, 1000, "hold", {"--bytes=3145728"}), dir_);
  auto steady = Subprocess::Start(
      InTenant(*bystander, 1000, "hold", {"--bytes=524288"}), dir_);
  ASSERT_TRUE(WaitForOutput(holder, "ready: yes")) << holder.Stderr();
  ASSERT_TRUE(WaitForOutput(steady, "ready: yes")) << steady.Stderr();
  const uint64_t in_use = QueryStatus(daemon_->socket_path()).bytes_in_use();

  auto removed = Remove("doomed");
  ASSERT_THAT(removed.status(), IsOk());
  EXPECT_EQ(removed->closed_sessions(), 1u);
  EXPECT_GE(removed->closed_connections(), 1u);
  ASSERT_EQ(Bound().size(), 1u);
  EXPECT_EQ(Bound()[0].name(), "bystander");
  EXPECT_EQ(Bound()[0].usage().device_bytes(), 524288u);
  EXPECT_EQ(Bound()[0].sessions(), 1u);
  EXPECT_LE(QueryStatus(daemon_->socket_path()).bytes_in_use(),
            in_use - 3145728);
  struct stat info {};
  EXPECT_NE(stat((dir_ + "/tenants/doomed").c_str(), &info), 0);
  // Nothing answers for the removed tenant any more.
  const RunResult late =
      Run(doomed->socket_path(), 0, "budget_edge", {"--bytes=1024"});
  EXPECT_THAT(late.out, HasSubstr("connect: UNAVAILABLE"));
  // The bystander's tenant still works, beside its held bytes.
  const RunResult next =
      RunIn(*bystander, 1000, "budget_edge", {"--bytes=524288"});
  EXPECT_THAT(next.out, HasSubstr("exact: OK"));
  EXPECT_THAT(next.out, HasSubstr("one_more: RESOURCE_EXHAUSTED"));
  EXPECT_THAT(next.out, HasSubstr("intact: yes"));
  EXPECT_FALSE(steady.Poll().has_value()) << "the bystander's holder died";
  // Removing it again names it and how to list them.
  auto again = Remove("doomed");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(again.status().message()), EndsWith("shows them."));
}

TEST_F(BoundTenantTest, EveryLimitIsRefusedAtItsEdge) {
  // --max_bound_tenants=3.
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_THAT(Create(name, 4096).status(), IsOk()) << name;
  }
  auto fourth = Create("d", 4096);
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(fourth.status().message()),
              HasSubstr("3 bound tenants exist; --max_bound_tenants is 3"));
  ASSERT_THAT(Remove("c").status(), IsOk());
  ASSERT_THAT(Create("d", 4096).status(), IsOk());
  ASSERT_THAT(Remove("d").status(), IsOk());

  // Names: DNS labels of at most 63 bytes, no other tenant's.
  EXPECT_THAT(Create(std::string(63, 'n'), 1).status(), IsOk());
  ASSERT_THAT(Remove(std::string(63, 'n')).status(), IsOk());
  for (const std::string& bad :
       {std::string(64, 'n'), std::string("Pod"), std::string("-a"),
        std::string("a-"), std::string("a/b"), std::string(".."),
        std::string(""), std::string("a\nb")}) {
    auto refused = Create(bad, 1);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("bad_tenant_name"));
  }
  for (const char* taken : {"local", "default", "a"}) {
    auto refused = Create(taken, 1);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists)
        << taken;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("Fix:"));
  }
  ASSERT_THAT(Remove("a").status(), IsOk());

  // Labels: 16, keys of 128 bytes, values of 1024 bytes.
  std::map<std::string, std::string> labels;
  for (int i = 0; i < 16; ++i) labels[absl::StrCat("k", i)] = "v";
  EXPECT_THAT(Create("labels", 1, labels).status(), IsOk());
  ASSERT_THAT(Remove("labels").status(), IsOk());
  labels["k16"] = "v";
  EXPECT_THAT(std::string(Create("labels", 1, labels).status().message()),
              HasSubstr("17 labels; a bound tenant takes at most 16"));
  EXPECT_THAT(Create("key", 1, {{std::string(128, 'k'), "v"}}).status(),
              IsOk());
  EXPECT_THAT(
      std::string(
          Create("key2", 1, {{std::string(129, 'k'), "v"}}).status().message()),
      HasSubstr("(129 bytes)"));
  EXPECT_THAT(Create("value", 1, {{"k", std::string(1024, 'v')}}).status(),
              IsOk());
  EXPECT_THAT(std::string(Create("value2", 1, {{"k", std::string(1025, 'v')}})
                              .status()
                              .message()),
              HasSubstr("(1025 bytes)"));
  EXPECT_EQ(Create("value3", 1, {{"k", "a\x1b[2J"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Only what was accepted is kept: b (from the start), key and value.
  std::vector<std::string> names;
  for (const auto& tenant : Bound()) names.push_back(tenant.name());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("b", "key", "value"));
}

TEST_F(BoundTenantTest, OnlyAMountOfItsDirectoryReachesATenantsSocket) {
  // A looser tenant socket directory left from before is refused, naming
  // it, and left as it was: hrxd sets modes only on what it creates.
  const std::string tenants = dir_ + "/tenants";
  ASSERT_EQ(mkdir(tenants.c_str(), 0755), 0);
  ASSERT_EQ(chmod(tenants.c_str(), 0755), 0);
  auto loose = Create("hidden", 1 << 20);
  EXPECT_EQ(loose.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(loose.status().message()),
              ::testing::AllOf(HasSubstr(tenants + " has mode 0755"),
                               HasSubstr("Fix: chmod 0700 " + tenants)));
  // Shared (world-writable or sticky) is refused as such.
  ASSERT_EQ(chmod(tenants.c_str(), 01777), 0);
  auto shared = Create("hidden", 1 << 20);
  EXPECT_THAT(std::string(shared.status().message()),
              HasSubstr("is shared with other users (sticky)"));
  struct stat root {};
  ASSERT_EQ(stat(tenants.c_str(), &root), 0);
  EXPECT_EQ(root.st_mode & 07777, 01777u);
  EXPECT_TRUE(Bound().empty()) << "a refused tenant was left registered";
  // One hrxd makes is 0700.
  ASSERT_EQ(rmdir(tenants.c_str()), 0);
  auto pod = Create("hidden", 1 << 20);
  ASSERT_THAT(pod.status(), IsOk());
  ASSERT_EQ(stat(tenants.c_str(), &root), 0);
  EXPECT_EQ(root.st_mode & 07777, 0700u);
  // Another local user who knows (or guesses) the name cannot connect.
  EXPECT_THAT(Run(pod->socket_path(), 1000, "budget_edge", {"--bytes=1"}).out,
              HasSubstr("connect: UNAVAILABLE"));
  EXPECT_THAT(RunIn(*pod, 1000, "budget_edge", {"--bytes=1048576"}).out,
              HasSubstr("exact: OK"));
}

TEST_F(BoundTenantTest, TheNameLimitAllowsForALongTenantSocketDirectory) {
  // ROOT/NAME/hrxd.sock.fds must fit 107 bytes: with a 60-byte root a name
  // may be 107 - 60 - 2 - 13 = 32 bytes, and hrxd says so at the edge.
  daemon_.reset();
  std::string root = dir_ + "/";
  root += std::string(60 - root.size(), 'r');
  ASSERT_EQ(root.size(), 60u);
  auto daemon = TestDaemon::Start(
      {"--socket_mode=0666", "--tenant_socket_dir=" + root}, dir_);
  ASSERT_THAT(daemon.status(), IsOk());
  daemon_ = *std::move(daemon);
  auto longest = Create(std::string(32, 'n'), 4096);
  ASSERT_THAT(longest.status(), IsOk());
  EXPECT_THAT(RunIn(*longest, 1000, "budget_edge", {"--bytes=4096"}).out,
              HasSubstr("exact: OK"));
  auto refused = Create(std::string(33, 'n'), 4096);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(refused.status().message()),
      ::testing::AllOf(HasSubstr("bad_tenant_name"), HasSubstr("is 33 bytes"),
                       HasSubstr("may be at most 32"), HasSubstr("Fix:")));
  EXPECT_THAT(daemon_->process().Stderr(),
              HasSubstr("bound tenant names may be at most 32 bytes"));
}

TEST_F(BoundTenantTest, GrantsToARemovedTenantDoNotPassToTheNextOfItsName) {
  auto pod = Create("grantee", 1 << 20);
  ASSERT_THAT(pod.status(), IsOk());
  const std::string go = dir_ + "/go";
  auto owner =
      Subprocess::Start(ClientArgs(daemon_->socket_path(), 0, "grant",
                                   {"--grantee=grantee", "--go=" + go}),
                        dir_);
  ASSERT_TRUE(WaitForOutput(owner, "grant: ")) << owner.Stdout();
  const std::string out = owner.Stdout();
  const std::string grant = out.substr(out.find("grant: ") + 7, 16);
  ASSERT_THAT(Remove("grantee").status(), IsOk());
  auto next = Create("grantee", 1 << 20);
  ASSERT_THAT(next.status(), IsOk());
  const RunResult imported =
      RunIn(*next, 1000, "import", {"--grant=" + grant, "--go=" + go});
  std::ofstream(go) << "go";
  EXPECT_THAT(imported.out, HasSubstr("import: NOT_FOUND unknown_grant"));
  EXPECT_EQ(owner.Wait(), 0);
}

TEST_F(BoundTenantTest, AnythingButItsOwnDirectoryAtTheTenantsPathIsRefused) {
  ASSERT_EQ(mkdir((dir_ + "/tenants").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir_ + "/elsewhere").c_str(), 0755), 0);
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(),
                    (dir_ + "/tenants/linked").c_str()),
            0);
  std::ofstream(dir_ + "/tenants/file") << "x";
  for (const char* name : {"linked", "file"}) {
    auto refused = Create(name, 1);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << name;
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("is not a directory"));
  }
  struct stat info {};
  EXPECT_NE(stat((dir_ + "/elsewhere/hrxd.sock").c_str(), &info), 0);
  EXPECT_TRUE(Bound().empty()) << "a refused tenant was left registered";
}

TEST_F(BoundTenantTest, ARemovedTenantsOwnExecutorStops) {
  // A tenant that may load kernels runs in an executor of its own; once the
  // tenant is removed nothing will use it again.
  const pid_t hrxd = daemon_->process().pid();
  const size_t fds_before = ProcEntriesSteady(hrxd, "fd");
  auto pod = Create("kernels", 1 << 20, {}, /*load_kernels=*/true);
  ASSERT_THAT(pod.status(), IsOk());
  EXPECT_TRUE(pod->load_kernels());
  ASSERT_THAT(RunIn(*pod, 1000, "budget_edge", {"--bytes=4096"}).out,
              HasSubstr("exact: OK"));
  const pid_t executor = ExecutorPid(daemon_->process().pid(), "kernels");
  ASSERT_GT(executor, 0) << "no executor of its own";
  ASSERT_THAT(Remove("kernels").status(), IsOk());
  bool gone = false;
  for (int i = 0; i < 3000 && !gone; ++i) {
    gone = ExecutorPid(daemon_->process().pid(), "kernels") == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the removed tenant's executor still runs";
  // hrxd reaps it and lists it as stopped, saying why.
  std::optional<hrx::v1::ExecutorInfo> info;
  for (int i = 0; i < 3000; ++i) {
    grpc::ClientContext context;
    hrx::v1::ListExecutorsResponse executors;
    ASSERT_TRUE(Admin()
                    ->ListExecutors(&context, hrx::v1::ListExecutorsRequest(),
                                    &executors)
                    .ok());
    info.reset();
    for (const auto& listed : executors.executors()) {
      if (listed.name() == "kernels") info = listed;
    }
    if (info && !info->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(info.has_value());
  EXPECT_FALSE(info->running());
  EXPECT_THAT(info->last_loss(), HasSubstr("its tenant was removed"));
  // Its sockets, its queue and its executor's connection are gone from
  // hrxd too (the queue by the next sweep).
  EXPECT_LE(ProcEntriesSettle(hrxd, "fd", fds_before), fds_before)
      << "hrxd held " << fds_before
      << " descriptors before the tenant was made";
}

TEST_F(BoundTenantTest, DirectoriesOutliveHrxdAndAreReusedAfterARestart) {
  auto pod = Create("keeper", 8192);
  ASSERT_THAT(pod.status(), IsOk());
  struct stat before {};
  ASSERT_EQ(stat((dir_ + "/tenants/keeper").c_str(), &before), 0);
  EXPECT_EQ(daemon_->Stop(), 0);
  daemon_.reset();
  struct stat kept {};
  EXPECT_EQ(stat((dir_ + "/tenants/keeper").c_str(), &kept), 0)
      << "a stop removed a directory containers may have mounted";
  EXPECT_NE(stat(pod->socket_path().c_str(), &kept), 0)
      << "a stop left the socket behind";
  StartDaemon();
  EXPECT_TRUE(Bound().empty()) << "bound tenants live in hrxd's memory";
  ASSERT_THAT(Create("keeper", 8192).status(), IsOk());
  struct stat after {};
  ASSERT_EQ(stat((dir_ + "/tenants/keeper").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_THAT(RunIn(*pod, 1000, "budget_edge", {"--bytes=8192"}).out,
              HasSubstr("exact: OK"));
}

TEST_F(BoundTenantTest, PodsSharingAUidDoNotShareThePerUidConnectionSlots) {
  // kMaxConnectionsPerUid (64) applies on the main socket only; through a
  // bound tenant's socket its own connections ceiling (default 128) does,
  // so two pods of uid 1000 hold 66 connections between them.
  auto first = Create("first", 1 << 20);
  auto second = Create("second", 1 << 20);
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(second.status(), IsOk());
  // Started a batch at a time, each batch connected before the next starts:
  // 66 processes starting at once (under ASan, on two cores) once kept one
  // from connecting within libhrx's connect deadline, which is not what
  // this test is about. All 66 are held at the end all the same.
  constexpr int kHolders = 66;
  constexpr int kBatch = 11;
  std::vector<Subprocess> holders;
  for (int i = 0; i < kHolders; ++i) {
    holders.push_back(Subprocess::Start(
        InTenant(i % 2 == 0 ? *first : *second, 1000, "hold", {"--bytes=4096"}),
        dir_));
    if (holders.size() % kBatch != 0) continue;
    for (size_t j = holders.size() - kBatch; j < holders.size(); ++j) {
      ASSERT_TRUE(WaitForOutput(holders[j], "ready: yes"))
          << "holder " << j << ": " << holders[j].Stdout();
    }
  }
  ASSERT_EQ(holders.size() % kBatch, 0u);
  // And uid 1000 still has all of its slots on the main socket.
  EXPECT_THAT(
      Run(daemon_->socket_path(), 1000, "budget_edge", {"--bytes=4096"}).out,
      HasSubstr("exact: OK"));
}

TEST_F(BoundTenantTest, AFrozenExecutorOfOnePodHoldsUpNoOtherPodOfItsUid) {
  // Pods of different tenants often run as the same uid (root here). Calls
  // that wait for an executor are served per caller identity; for a pod
  // that identity is its tenant, never its uid. Limits far beyond the test:
  // only the test lets the frozen executor go.
  daemon_.reset();
  StartDaemon({"--executor_watchdog_ms=600000", "--executor_hang_ms=600000"});
  auto frozen_pod = Create("frozen", 1 << 20, {}, /*load_kernels=*/true);
  auto other_pod = Create("other", 1 << 20);
  ASSERT_THAT(frozen_pod.status(), IsOk());
  ASSERT_THAT(other_pod.status(), IsOk());
  auto attacker = Client::Connect(frozen_pod->socket_path(), "attacker");
  ASSERT_THAT(attacker.status(), IsOk());
  auto device = (*attacker)->OpenDevice(0);
  ASSERT_THAT(device.status(), IsOk());
  ASSERT_THAT(device->CreateStream().status(), IsOk());
  const pid_t own = ExecutorPid(daemon_->process().pid(), "frozen");
  ASSERT_GT(own, 0) << "the pod has no executor of its own";
  ASSERT_EQ(kill(own, SIGSTOP), 0);
  // Each new stream needs a queue of the frozen executor: more waiting
  // calls than a caller's lane has threads, the rest queued behind them.
  constexpr int kWaiting = 16;
  std::atomic<int> answered{0};
  std::vector<std::thread> waiting;
  for (int i = 0; i < kWaiting; ++i) {
    waiting.emplace_back([&] {
      (void)device->CreateStream();
      answered.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The other pod, root too, connects and round-trips its bytes.
  std::future<absl::Status> bystander =
      std::async(std::launch::async, [&]() -> absl::Status {
        auto client = Client::Connect(other_pod->socket_path(), "bystander");
        if (!client.ok()) return client.status();
        auto other = (*client)->OpenDevice(0);
        if (!other.ok()) return other.status();
        auto stream = other->CreateStream();
        if (!stream.ok()) return stream.status();
        auto buffer = stream->Allocate(4096);
        if (!buffer.ok()) return buffer.status();
        std::vector<uint8_t> sent(4096);
        for (size_t i = 0; i < sent.size(); ++i) sent[i] = uint8_t(i * 7 + 1);
        HRX_RETURN_IF_ERROR(stream->UploadBlocking(buffer->Binding(), sent));
        std::vector<uint8_t> got(sent.size());
        HRX_RETURN_IF_ERROR(stream->ReadBlocking(buffer->Binding(), got));
        if (got != sent) return absl::DataLossError("bytes changed");
        return absl::OkStatus();
      });
  // A liveness bound, not a timing one: the frozen executor is let go
  // either way, so a held-up bystander ends (and fails) instead of hanging.
  const bool finished =
      bystander.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(finished) << "the other pod was held up by the frozen executor";
  EXPECT_EQ(answered.load(), 0)
      << "the frozen executor answered before it was let go";
  ASSERT_EQ(kill(own, SIGCONT), 0);
  EXPECT_THAT(bystander.get(), IsOk());
  for (std::thread& thread : waiting) thread.join();
  EXPECT_EQ(answered.load(), kWaiting);
}

}  // namespace
}  // namespace hrx::testing
