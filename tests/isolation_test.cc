// Executors: a tenant's kernels run in a sandboxed process of its own, so a
// kernel that crashes or spins ends only that process. Each defence is shown
// while a bystander tenant keeps checking every byte it reads. Runs on the
// CPU backend here and on the HIP backend on the GPU machine.
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "hrx/executor/v1/executor.pb.h"
#include "tests/isolation_fixture.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

// HRX_EXECUTOR_CRASHES, else `fallback`.
int CrashRounds(int fallback) {
  const char* asked = std::getenv("HRX_EXECUTOR_CRASHES");
  int rounds = 0;
  return asked != nullptr && absl::SimpleAtoi(asked, &rounds) && rounds > 0
             ? rounds
             : fallback;
}

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
  // GPU run does fewer rounds of the same test. `make soak` runs 1,000
  // (HRX_EXECUTOR_CRASHES).
  const int kCrashes = CrashRounds(TestBackend() == "hip" ? 30 : 100);
  const absl::Time crashes_began = absl::Now();
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
  const absl::Duration crashing = absl::Now() - crashes_began;
  ExpectBystanderUnharmed(bystander);
  EXPECT_TRUE(ChargesBackToZero("ops"));
  // hrxd's log names each loss, at most one line a second per executor (a
  // crash loop cannot flood it).
  const std::string log = daemon_->process().Stderr();
  const std::vector<std::string> lines = absl::StrSplit(log, '\n');
  const int64_t loss_lines =
      std::count_if(lines.begin(), lines.end(), [](const std::string& line) {
        return absl::StrContains(line, "executor of \"ops\"") &&
               absl::StrContains(line, " lost: ");
      });
  EXPECT_GE(loss_lines, 1) << log;
  EXPECT_LE(loss_lines, absl::ToInt64Seconds(crashing) + 2) << log;
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

TEST_F(IsolationTest, AFrozenExecutorHoldsUpOnlyItsOwnTenant) {
  // Limits far beyond the test: the frozen executor's call can only end
  // when the test lets it go, so the order below is certain.
  RestartDaemon({"--executor_watchdog_ms=600000", "--executor_hang_ms=600000"});
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t own = ExecutorPid(daemon_->process().pid(), "ops");
  ASSERT_GT(own, 0);
  // Frozen as a kernel could freeze it (SIGSTOP): nothing it runs answers.
  ASSERT_EQ(kill(own, SIGSTOP), 0);
  // The attacker's next streams need new queues of its own executor: far
  // more calls waiting on it than hrxd has threads serving calls...
  constexpr int kWaiting = 64;
  std::atomic<int> answered{0};
  std::vector<absl::Status> created(kWaiting);
  std::vector<std::thread> waiting;
  for (int i = 0; i < kWaiting; ++i) {
    waiting.emplace_back([&, i] {
      created[i] = attacker->device->CreateStream().status();
      answered.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // ...while a bystander connects, opens a stream (a queue of its own
  // tenant's pool: nothing of the attacker's pool holds it up) and does
  // its rounds.
  Subprocess bystander = StartBystander(/*rounds=*/3);
  ExpectBystanderUnharmed(bystander);
  EXPECT_EQ(answered.load(), 0)
      << "the frozen executor answered before it was let go";
  ASSERT_EQ(kill(own, SIGCONT), 0);
  for (std::thread& thread : waiting) thread.join();
  for (const absl::Status& status : created) EXPECT_THAT(status, IsOk());
}

// The isolation suite with the kernel-loading tenant spread over many uids.
constexpr int kFloodUids = 24;
class ManyUidsOfOneTenantTest : public IsolationTest {
 protected:
  std::string Config() const override {
    std::string config =
        "tenants { name: \"bystander\" uids: 4101 }\n"
        "tenants { name: \"ops\" uids: 0";
    for (int i = 0; i < kFloodUids; ++i) {
      absl::StrAppend(&config, " uids: ", 4200 + i);
    }
    return config + " role: ROLE_ADMIN load_kernels: true }\n";
  }
};

// Call lanes are a tenant's, not a uid's: a tenant whose many uids all wait
// on its frozen executor holds only its own lane's threads of hrxd, and
// another tenant works on.
TEST_F(ManyUidsOfOneTenantTest, AllItsUidsShareOneLane) {
  RestartDaemon({"--executor_watchdog_ms=600000", "--executor_hang_ms=600000"});
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t hrxd = daemon_->process().pid();
  const pid_t own = ExecutorPid(hrxd, "ops");
  ASSERT_GT(own, 0);
  const size_t threads_before = ProcEntriesSteady(hrxd, "task");
  // The attacker's, and this test's admin channel.
  const uint64_t connections = Tenant("ops").usage().connections() + kFloodUids;
  ASSERT_EQ(kill(own, SIGSTOP), 0);
  std::vector<Subprocess> waiting;
  for (int i = 0; i < kFloodUids; ++i) {
    waiting.push_back(Subprocess::Start(
        {RunfilePath("tests/client_worker"),
         "--socket=" + daemon_->socket_path(), absl::StrCat("--uid=", 4200 + i),
         absl::StrCat("--seed=", 10 + i), "--bytes=4099", "--rounds=1"},
        dir_));
  }
  // Each worker connects, then its calls (a session, a stream's queue from
  // the frozen executor) wait on its tenant's lane, whose threads wait for
  // the executor. (Admin calls, as Tenant() makes, take a lane of their
  // own.)
  // Waits for readiness, not a bound on speed: 24 client processes start
  // slowly under a sanitizer on two cores (one ASan run had 3 of them in
  // after 10 s). A connection that waited for the frozen executor would
  // never be admitted at all.
  for (int i = 0; i < 3000 && Tenant("ops").usage().connections() < connections;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(Tenant("ops").usage().connections(), connections);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (Subprocess& worker : waiting) {
    ASSERT_FALSE(worker.Poll().has_value())
        << "a worker ended while its executor was frozen: " << worker.Stdout()
        << worker.Stderr();
  }
  // Every worker's call now waits on the frozen executor: one lane of
  // kLaneThreads threads holds them all (slack for gRPC's own threads).
  const size_t threads_waiting = ProcEntries(hrxd, "task");
  EXPECT_LE(threads_waiting, threads_before + 4 + 8)
      << kFloodUids << " uids of one tenant waiting took "
      << threads_waiting - threads_before << " threads of hrxd";
  // Another tenant works meanwhile.
  Subprocess bystander = StartBystander(/*rounds=*/3);
  ExpectBystanderUnharmed(bystander);
  ASSERT_EQ(kill(own, SIGCONT), 0);
  for (Subprocess& worker : waiting) {
    EXPECT_EQ(worker.Wait(), 0) << worker.Stdout() << worker.Stderr();
  }
}

TEST_F(IsolationTest, AFrozenExecutorIsFoundByItsPingAndKilled) {
  RestartDaemon({"--executor_watchdog_ms=60000", "--executor_hang_ms=1000"});
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t hrxd = daemon_->process().pid();
  const pid_t own = ExecutorPid(hrxd, "ops");
  ASSERT_GT(own, 0);
  ASSERT_EQ(kill(own, SIGSTOP), 0);
  // The call fails (executor_lost, or stale_handle when the loss closed its
  // session first) once the ping goes unanswered, long before the watchdog.
  const absl::Status frozen = attacker->device->CreateStream().status();
  EXPECT_FALSE(frozen.ok());
  EXPECT_THAT(frozen.message(), HasSubstr("Fix:"));
  EXPECT_TRUE(ChargesBackToZero("ops"));
  EXPECT_THAT(LastLoss("ops"), HasSubstr("did not answer hrxd's ping"));
  // Its tenant starts again on a new executor.
  auto again = Connect();
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_NE(ExecutorPid(hrxd, "ops"), own);
}

TEST_F(IsolationTest, EvictingASessionWhoseKernelNeverEndsKillsItsExecutor) {
  // A watchdog that would take far longer than the eviction's own limit.
  daemon_.reset();
  auto daemon =
      TestDaemon::Start({"--config=" + dir_ + "/hrxd.conf",
                         "--socket_mode=0666", "--executor_watchdog_ms=60000"},
                        dir_);
  ASSERT_THAT(daemon.status(), IsOk());
  daemon_ = *std::move(daemon);
  Subprocess bystander = StartBystander(/*rounds=*/6);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  auto spin = attacker->stream->LoadKernelFile(KernelPath("spin"), "spin");
  ASSERT_THAT(spin.status(), IsOk());
  const View binding = out->Binding();
  ASSERT_THAT(attacker->stream->Dispatch(*spin, {1, 1, 1}, {1, 1, 1},
                                         Constants(), {&binding, 1}),
              IsOk());
  ASSERT_THAT(attacker->stream->Flush(), IsOk());
  // Evicted only once hrxd holds the kernel's dispatch (an eviction that
  // came first would have nothing to wait for).
  bool running = false;
  for (int i = 0; i < 500 && !running; ++i) {
    running = Tenant("ops").usage().inflight_commands() > 0;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(running) << "the spinning kernel never reached hrxd";
  const uint64_t session = SessionOf("attacker");
  ASSERT_NE(session, 0u);
  // The admin's call returns (within its deadline, far inside the
  // watchdog's minute): the session is gone, its spinning kernel with it.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  hrx::v1::EvictSessionRequest request;
  request.set_id(session);
  hrx::v1::EvictSessionResponse evicted;
  const grpc::Status status = admin_->EvictSession(&context, request, &evicted);
  EXPECT_TRUE(status.ok()) << status.error_code() << " "
                           << status.error_message();
  EXPECT_EQ(evicted.freed_streams(), 1u);
  ExpectBystanderUnharmed(bystander);
  EXPECT_TRUE(ChargesBackToZero("ops"));
  EXPECT_THAT(LastLoss("ops"), HasSubstr("an admin evicted a session"));
}

TEST_F(IsolationTest, AKernelForgingItsExecutorsFramesReachesNoOtherTenant) {
  // Executors serve their tenants' rings: the attacker's kernel runs in the
  // process that holds copies of its session's tables and hrxd's link.
  if (TestBackend() == "hip") {
    GTEST_SKIP() << "a GPU kernel makes no system calls: tenant code that "
                    "can write the link is the CPU backend's (host code)";
  }
  // (The kernel's search of its process takes a while: the watchdog's
  // default.)
  RestartDaemon({"--executor_rings"});
  Subprocess bystander = StartBystander(/*rounds=*/40);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  // The bystander's session, as an attacker could guess it (ids are small).
  uint64_t victim = 0;
  for (int i = 0; i < 250 && victim == 0; ++i) {
    victim = SessionOf("client_worker 5");
    if (victim == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(victim, 0u);

  // Everything the executor may say to hrxd, about the bystander's session:
  // an ask for its objects, their release, its rings' end, its end, and
  // answers to calls hrxd never put.
  std::string frames;
  auto add = [&frames](const hrx::executor::v1::Event& event) {
    const std::string bytes = event.SerializeAsString();
    const uint32_t length = static_cast<uint32_t>(bytes.size());
    frames.append(reinterpret_cast<const char*>(&length), sizeof(length));
    frames += bytes;
  };
  for (uint64_t object = 1; object <= 16; ++object) {
    hrx::executor::v1::Event ask;
    ask.mutable_ask()->set_ask(1000 + object);
    ask.mutable_ask()->set_session(victim);
    ask.mutable_ask()->set_kind(1);
    hrx::executor::v1::SealedHandle* handle =
        ask.mutable_ask()->mutable_handle();
    handle->set_session(victim);
    handle->set_object(object);
    handle->set_tag(0x5eed0000 + object);
    add(ask);
    hrx::executor::v1::Event ended;
    ended.mutable_ring_ended()->set_session(victim);
    ended.mutable_ring_ended()->set_stream(object);
    add(ended);
    hrx::executor::v1::Event answer;
    answer.mutable_event_answer()->set_call(object);
    answer.mutable_event_answer()->set_complete(true);
    add(answer);
  }
  hrx::executor::v1::Event released;
  released.mutable_released()->set_session(victim);
  for (uint64_t object = 1; object <= 64; ++object) {
    released.mutable_released()->add_objects(object);
  }
  released.mutable_released()->set_session_ended(true);
  add(released);

  // The bystander's upload pattern (client_worker, seed 5, round 0), which
  // lives only in the shared executor and hrxd; and the attacker's own.
  std::array<uint8_t, 16> theirs;
  for (size_t i = 0; i < theirs.size(); ++i) {
    theirs[i] = static_cast<uint8_t>(((4096 + i) * 131 + 5 * 7) >> 3);
  }
  std::array<uint8_t, 16> mine;
  for (size_t i = 0; i < mine.size(); ++i) {
    mine[i] = static_cast<uint8_t>(0xa5 ^ (i * 29));
  }
  auto own = attacker->stream->Allocate(4096);
  ASSERT_THAT(own.status(), IsOk());
  ASSERT_THAT(attacker->stream->Upload(own->Binding(), mine), IsOk());
  auto forged = attacker->stream->Allocate(frames.size());
  ASSERT_THAT(forged.status(), IsOk());
  ASSERT_THAT(
      attacker->stream->Upload(
          forged->Binding(),
          {reinterpret_cast<const uint8_t*>(frames.data()), frames.size()}),
      IsOk());
  auto out = attacker->stream->Allocate(20);
  ASSERT_THAT(out.status(), IsOk());
  auto kernel = attacker->stream->LoadKernelFile(KernelPath("forge"), "forge");
  ASSERT_THAT(kernel.status(), IsOk());
  std::array<uint8_t, 32> inverted;
  for (size_t i = 0; i < 16; ++i) {
    inverted[i] = static_cast<uint8_t>(~mine[i]);
    inverted[16 + i] = static_cast<uint8_t>(~theirs[i]);
  }
  auto constants = Constants::FromBytes(inverted);
  ASSERT_THAT(constants.status(), IsOk());
  const View bindings[] = {forged->Binding(), out->Binding()};
  ASSERT_THAT(attacker->stream->Dispatch(*kernel, {1, 1, 1}, {1, 1, 1},
                                         *constants, bindings),
              IsOk());
  std::vector<uint8_t> result(20);
  ASSERT_THAT(attacker->stream->ReadBlocking(out->Binding(), result), IsOk());
  uint32_t words[5];
  std::memcpy(words, result.data(), sizeof(words));
  // The frames went out, whole, on the link.
  EXPECT_EQ(words[0], frames.size()) << "errno " << words[1];
  EXPECT_EQ(words[4], 0u) << "the kernel could not read its own memory";
  // Its own bytes are there to find (the search works); the bystander's
  // are not.
  EXPECT_GE(words[2], 1u);
  EXPECT_EQ(words[3], 0u);

  // hrxd took none of it for the bystander: its rings, buffers and bytes
  // are intact through every round (a buffer released early would have
  // been reused under it), and its charges come back to exactly zero once
  // it is done (none given back twice).
  ExpectBystanderUnharmed(bystander);
  EXPECT_TRUE(ChargesBackToZero("bystander"));
}

}  // namespace
}  // namespace hrx::testing
