// Clients killed at random points: iteration after iteration, several
// kill_victim processes of one tenant start, reach their activity (a batch
// of thousands of commands, a large upload, a held Mapping, a wait on long
// work, an export or grant) and are SIGKILLed after a random delay inside
// it. A bystander load_worker of another tenant runs throughout and checks
// every byte it reads. After each iteration the victims' tenant must use
// exactly nothing and the daemon must hold exactly its baseline of
// descriptors other than buffer memfds again (both polled: the daemon
// reclaims a dead client's session asynchronously, after its queued work
// drained). Buffer memfds are checked too, exactly, once the bystander has
// finished: while it runs, their number moves with its own buffers,
// allocation pool and staging, so only the total at the end, with no client
// left, can be compared to the baseline taken before it started.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/reliability/reliability_fixture.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

// Work counts: kIterations x kVictimsPerIteration kills (about 30 s here).
constexpr int kIterations = 50;
constexpr int kVictimsPerIteration = 4;
// A victim is killed this long (uniformly drawn) after it said it is ready.
constexpr int kMaxKillDelayMs = 150;
// Reclaiming a dead client waits for its queued work (at most 256 MiB of
// fills or 32 MiB of upload per victim) to drain; far less than this.
constexpr absl::Duration kReclaimLimit = absl::Seconds(20);
constexpr uint64_t kSeed = 20240917;  // the kill schedule's PRNG

constexpr uid_t kVictimUid = 4301;
constexpr uid_t kBystanderUid = 4302;
constexpr const char* kModes[] = {"batch", "upload", "mapping", "sync",
                                  "export"};

constexpr char kConfig[] = R"(
tenants {
  name: "victim"
  uids: 4301
  budget { device_bytes: 2147483648 shared_bytes: 1073741824 }
}
tenants {
  name: "bystander"
  uids: 4302
  budget { device_bytes: 1073741824 shared_bytes: 536870912 }
}
tenants {
  name: "ops"
  uids: 0
  role: ROLE_ADMIN
}
default_tenant { budget { device_bytes: 0 shared_bytes: 0 } }
)";

TEST(KillLoopTest, KilledClientsLeaveNothingAndTheBystanderLosesNoByte) {
  ASSERT_EQ(geteuid(), 0u) << "the kill loop switches uids: run as root";
  const std::string dir = MakeShortTempDir();
  struct RemoveAtEnd {  // after the daemon and every child (declared first)
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_at_end{dir};
  std::ofstream(dir + "/hrxd.conf") << kConfig;
  auto started = TestDaemon::Start(
      {"--config=" + dir + "/hrxd.conf", "--socket_mode=0666"}, dir);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<TestDaemon> daemon = *std::move(started);
  const pid_t daemon_pid = daemon->process().pid();
  AdminConnection admin(daemon->socket_path());
  (void)admin.Tenant("ops");  // opens the admin connection

  // Warm-up: one victim of each mode, killed once ready, so that the
  // executor, the tenants' queues and the daemon's thread pools exist
  // before any baseline is taken.
  {
    std::vector<std::unique_ptr<Subprocess>> warmup;
    for (const char* mode : kModes) {
      warmup.push_back(std::make_unique<Subprocess>(
          Subprocess::Start({RunfilePath("tests/reliability/kill_victim"),
                             "--socket=" + daemon->socket_path(),
                             absl::StrCat("--uid=", kVictimUid),
                             absl::StrCat("--mode=", mode), "--tenant=victim"},
                            dir)));
    }
    for (auto& victim : warmup) {
      ASSERT_TRUE(WaitForOutput(*victim, "ready: yes"))
          << victim->Stdout() << victim->Stderr();
      victim->Signal(SIGKILL);
      victim->Wait();
    }
    ASSERT_TRUE(PollUntil(
        [&] { return AllZero(admin.Tenant("victim").usage()); }, kReclaimLimit))
        << admin.Tenant("victim").usage().DebugString();
  }
  // No client connected: every descriptor of the daemon is its own.
  const size_t idle_fds = SettledFds(daemon_pid);
  const std::string idle_targets = FdTargets(daemon_pid);

  // The bystander runs until the stop file appears.
  const std::string stop = dir + "/stop-bystander";
  Subprocess bystander =
      Subprocess::Start({RunfilePath("tests/reliability/load_worker"),
                         "--socket=" + daemon->socket_path(),
                         absl::StrCat("--uid=", kBystanderUid), "--seed=77",
                         "--until=" + stop, "--warm=300"},
                        dir);
  ASSERT_TRUE(WaitForOutput(bystander, "warm: yes"))
      << bystander.Stdout() << bystander.Stderr();
  // With the bystander connected; buffer memfds left out (above).
  const size_t baseline_fds =
      Settled([&] { return CountFds(daemon_pid).others(); });
  const std::string baseline_targets = FdTargets(daemon_pid);

  std::mt19937_64 rng(kSeed);
  std::map<std::string, int> kills_by_mode;
  int kills = 0;
  const absl::Time start = absl::Now();
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    SCOPED_TRACE(absl::StrCat("iteration ", iteration));
    // A daemon that died says why here, before its directory is removed.
    if (const std::optional<int> exited = daemon->process().Poll()) {
      FAIL() << "hrxd exited (" << *exited << ") before iteration " << iteration
             << "; its stderr:\n"
             << daemon->process().Stderr();
    }
    std::vector<std::unique_ptr<Subprocess>> victims;
    std::vector<std::string> modes;
    for (int v = 0; v < kVictimsPerIteration; ++v) {
      modes.push_back(kModes[rng() % std::size(kModes)]);
      victims.push_back(std::make_unique<Subprocess>(
          Subprocess::Start({RunfilePath("tests/reliability/kill_victim"),
                             "--socket=" + daemon->socket_path(),
                             absl::StrCat("--uid=", kVictimUid),
                             "--mode=" + modes.back(), "--tenant=victim"},
                            dir)));
    }
    for (int v = 0; v < kVictimsPerIteration; ++v) {
      ASSERT_TRUE(WaitForOutput(*victims[v], "ready: yes"))
          << modes[v] << " victim never got ready:\n"
          << victims[v]->Stdout() << victims[v]->Stderr();
    }
    for (int v = 0; v < kVictimsPerIteration; ++v) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(rng() % (kMaxKillDelayMs + 1)));
      ASSERT_FALSE(victims[v]->Poll().has_value())
          << modes[v] << " victim exited before it was killed:\n"
          << victims[v]->Stdout() << victims[v]->Stderr();
      victims[v]->Signal(SIGKILL);
      ASSERT_EQ(victims[v]->Wait(), 128 + SIGKILL);
      ++kills;
      ++kills_by_mode[modes[v]];
    }
    hrx::v1::Usage usage;
    size_t fds = 0;
    const bool reclaimed = PollUntil(
        [&] {
          usage = admin.Tenant("victim").usage();
          fds = CountFds(daemon_pid).others();
          return AllZero(usage) && fds == baseline_fds;
        },
        kReclaimLimit);
    ASSERT_TRUE(reclaimed) << "after killing " << absl::StrJoin(modes, ", ")
                           << ": the victim tenant uses {"
                           << usage.ShortDebugString()
                           << "} and the daemon holds " << fds
                           << " descriptors besides buffer memfds (baseline "
                           << baseline_fds
                           << ").\nbaseline: " << baseline_targets
                           << "\nnow: " << FdTargets(daemon_pid);
    ASSERT_FALSE(bystander.Poll().has_value())
        << "the bystander stopped:\n"
        << bystander.Stdout() << bystander.Stderr();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  std::ofstream(stop) << "stop";
  const std::optional<int> code =
      WaitUntil(bystander, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << "the bystander hung after the loop";
  EXPECT_EQ(*code, 0) << "the bystander saw an error or a wrong byte:\n"
                      << bystander.Stdout() << bystander.Stderr();
  const uint64_t commands =
      FieldOf(bystander.Stdout(), "load_worker", "commands");
  const uint64_t verified =
      FieldOf(bystander.Stdout(), "load_worker", "bytes_verified");
  EXPECT_GT(verified, 0u);
  EXPECT_TRUE(
      PollUntil([&] { return AllZero(admin.Tenant("bystander").usage()); },
                kReclaimLimit))
      << "the bystander's tenant still uses "
      << admin.Tenant("bystander").usage().DebugString();
  // Every client gone: exactly the daemon's own descriptors, buffer memfds
  // included.
  size_t final_fds = 0;
  EXPECT_TRUE(PollUntil(
      [&] {
        final_fds = ProcessFds(daemon_pid);
        return final_fds == idle_fds;
      },
      kReclaimLimit))
      << "with no client left the daemon holds " << final_fds
      << " descriptors, " << idle_fds
      << " before the loop.\nbefore: " << idle_targets
      << "\nnow: " << FdTargets(daemon_pid);

  std::vector<std::string> by_mode;
  for (const auto& [mode, count] : kills_by_mode)
    by_mode.push_back(absl::StrCat(mode, ":", count));
  std::printf(
      "figure: kills survived=%d iterations=%d victims_per_iteration=%d "
      "modes=%s seconds=%.1f daemon_fds_idle=%zu daemon_fds_after=%zu "
      "bystander_commands=%lu bystander_bytes_verified=%lu\n",
      kills, kIterations, kVictimsPerIteration,
      absl::StrJoin(by_mode, ",").c_str(), seconds, idle_fds, final_fds,
      static_cast<unsigned long>(commands),
      static_cast<unsigned long>(verified));
  std::fflush(stdout);
}

}  // namespace
}  // namespace hrx::testing
