// Executors: a tenant's kernels run in a sandboxed process of its own, so a
// kernel that crashes or spins ends only that process. Each defence is shown
// while a bystander tenant keeps checking every byte it reads. Runs on the
// CPU backend here and on the HIP backend on the GPU machine.
#include <string>
#include <vector>

#include "tests/isolation_fixture.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

TEST_F(IsolationTest, CrashingKernelsEndOnlyTheirOwnExecutor) {
  Subprocess bystander = StartBystander(/*rounds=*/40);
  // What hrxd holds with the attacker's executor up and the bystander
  // connected: every crash below must give back what its executor took
  // (its connection's socket and threads), or a tenant that crashes in a
  // loop would exhaust hrxd's descriptors.
  const pid_t hrxd = daemon_->process().pid();
  const size_t fds_before = ProcEntriesSteady(hrxd, "fd");
  const size_t threads_before = ProcEntries(hrxd, "task");
  // A new GPU context per restart costs far more than a CPU process: the
  // GPU run does fewer rounds of the same test.
  const int kCrashes = TestBackend() == "hip" ? 30 : 100;
  for (int i = 0; i < kCrashes; ++i) {
    auto attacker = Connect();
    ASSERT_THAT(attacker.status(), IsOk()) << "round " << i;
    auto out = attacker->stream->Allocate(4096);
    ASSERT_THAT(out.status(), IsOk());
    Constants mode;
    ASSERT_THAT(mode.Push(static_cast<uint32_t>(i % 3)), IsOk());
    // On the CPU the fault kills the executor (executor_lost); on a GPU it
    // loses the executor's own context, reported as the fault it was, and
    // the executor is replaced.
    const absl::Status crashed = Run(*attacker, "crash", mode, *out);
    EXPECT_FALSE(crashed.ok()) << i;
    EXPECT_THAT(crashed.message(), ::testing::AnyOf(HasSubstr("executor_lost"),
                                                    HasSubstr("device_fault"),
                                                    HasSubstr("kernel_failed")))
        << crashed;
    EXPECT_THAT(crashed.message(), HasSubstr("Fix:"));
  }
  ExpectBystanderUnharmed(bystander);
  EXPECT_TRUE(ChargesBackToZero("ops"));
  // Slack for gRPC's own threads, which come and go with load.
  EXPECT_LE(ProcEntriesSettle(hrxd, "fd", fds_before + 4), fds_before + 4)
      << "hrxd held " << fds_before << " descriptors before " << kCrashes
      << " executor crashes";
  EXPECT_LE(ProcEntriesSettle(hrxd, "task", threads_before + 8),
            threads_before + 8)
      << "hrxd ran " << threads_before << " threads before " << kCrashes
      << " executor crashes";
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
  // Admins see each executor's life: the attacker's restarted once per
  // crash, the shared one (the bystander's) never.
  grpc::ClientContext context;
  hrx::v1::ListExecutorsResponse executors;
  ASSERT_TRUE(
      admin_
          ->ListExecutors(&context, hrx::v1::ListExecutorsRequest(), &executors)
          .ok());
  bool saw_ops = false, saw_shared = false;
  for (const hrx::v1::ExecutorInfo& executor : executors.executors()) {
    if (executor.name() == "ops") {
      saw_ops = true;
      EXPECT_TRUE(executor.running());
      EXPECT_GT(executor.pid(), 0u);
      EXPECT_EQ(executor.restarts(), static_cast<uint64_t>(kCrashes));
      EXPECT_THAT(executor.last_loss(), HasSubstr("executor_lost"));
    }
    if (executor.name() == "shared") {
      saw_shared = true;
      EXPECT_EQ(executor.restarts(), 0u);
      EXPECT_THAT(executor.tenants(), ::testing::Contains("bystander"));
    }
  }
  EXPECT_TRUE(saw_ops && saw_shared) << executors.DebugString();
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

}  // namespace
}  // namespace hrx::testing
