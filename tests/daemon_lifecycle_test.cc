// hrxd as a process: its socket, its flags, its refusal to share a socket
// with a live daemon, and its clean, draining stop.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hrx/client.h"
#include "shared/status_matchers.h"
#include "tests/client_fixture.h"
#include "tests/raw_session.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

mode_t ModeOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

std::vector<std::string> HrxdArgs(const std::string& socket_path,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {DaemonPath(),
                                   absl::StrCat("--socket=", socket_path),
                                   absl::StrCat("--backend=", TestBackend())};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST(DaemonLifecycleTest, SocketDirectoryIs0700AndSocketIs0660) {
  const std::string parent = MakeShortTempDir();
  const std::string dir = parent + "/run";  // hrxd creates it
  const std::string socket_path = dir + "/hrxd.sock";
  Subprocess daemon = Subprocess::Start(HrxdArgs(socket_path), parent);
  ASSERT_TRUE(WaitUntilServing(socket_path, &daemon)) << daemon.Stderr();
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(socket_path), 0660u);
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  std::filesystem::remove_all(parent);
}

TEST(DaemonLifecycleTest, ADirectoryHrxdDidNotCreateKeepsItsMode) {
  ASSERT_EQ(geteuid(), 0u) << "hrxd as root is what this is about";
  const std::string parent = MakeShortTempDir();
  // A shared directory, as /tmp is: sticky and world-writable, root's.
  const std::string shared = parent + "/tmp";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  const RunResult refused =
      RunToCompletion(HrxdArgs(shared + "/x.sock"), parent);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err,
              AllOf(HasSubstr("socket_dir_shared"),
                    HasSubstr(shared + " (mode 1777)"), HasSubstr("Fix:")));
  EXPECT_EQ(ModeOf(shared), 01777u);
  // World-writable without the sticky bit too.
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  EXPECT_THAT(RunToCompletion(HrxdArgs(shared + "/x.sock"), parent).err,
              HasSubstr("world-writable"));
  EXPECT_EQ(ModeOf(shared), 0777u);
  // A directory of hrxd's user that others may read is served from as it
  // is (the socket's own mode decides who connects), never tightened.
  const std::string own = parent + "/own";
  ASSERT_EQ(mkdir(own.c_str(), 0755), 0);
  ASSERT_EQ(chmod(own.c_str(), 0755), 0);
  Subprocess daemon = Subprocess::Start(HrxdArgs(own + "/hrxd.sock"), parent);
  ASSERT_TRUE(WaitUntilServing(own + "/hrxd.sock", &daemon)) << daemon.Stderr();
  EXPECT_EQ(ModeOf(own), 0755u);
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  // One that its group may write into is refused, and kept as it was.
  ASSERT_EQ(chmod(own.c_str(), 0775), 0);
  EXPECT_THAT(RunToCompletion(HrxdArgs(own + "/hrxd.sock"), parent).err,
              AllOf(HasSubstr("has mode 0775"), HasSubstr("Fix: chmod 0755")));
  EXPECT_EQ(ModeOf(own), 0775u);
  std::filesystem::remove_all(parent);
}

TEST(DaemonLifecycleTest, SecondDaemonOnALiveSocketIsRefused) {
  auto first = TestDaemon::Start();
  ASSERT_THAT(first.status(), IsOk());
  const RunResult second =
      RunToCompletion(HrxdArgs((*first)->socket_path()), (*first)->dir());
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err,
              AllOf(HasSubstr("socket_in_use"),
                    HasSubstr(absl::StrCat("pid ", (*first)->process().pid())),
                    HasSubstr("Fix:")));
  // The first daemon is untouched.
  EXPECT_TRUE(WaitUntilServing((*first)->socket_path(), nullptr));
}

TEST(DaemonLifecycleTest, StaleSocketFromADeadDaemonIsReplaced) {
  const std::string dir = MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  // A socket file nobody listens on, as a killed daemon leaves behind.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(),
               sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  close(fd);
  ASSERT_TRUE(std::filesystem::exists(socket_path));
  auto daemon = TestDaemon::Start({}, dir);
  ASSERT_THAT(daemon.status(), IsOk());
  EXPECT_EQ((*daemon)->Stop(), 0);
  std::filesystem::remove_all(dir);
}

TEST(DaemonLifecycleTest, SigtermDrainsQueuedWorkExitsZeroAndRemovesSocket) {
  auto daemon = TestDaemon::Start();
  ASSERT_THAT(daemon.status(), IsOk());
  RawSession raw((*daemon)->socket_path());
  ASSERT_THAT(raw.open_status, IsOk());
  const hrx::v1::Handle buffer = *raw.Allocate(64 << 20);
  const hrx::v1::Handle stream = *raw.CreateStream();
  // About 4 GiB of fills: long enough that the stop arrives while queued.
  hrx::v1::SubmitRequest batch;
  *batch.mutable_stream() = stream;
  for (int i = 0; i < 64; ++i) {
    *batch.add_commands() =
        FillRequest(stream, buffer, 0, 64 << 20, i & 0xff).commands(0);
  }
  ASSERT_THAT(raw.Submit(batch), IsOk());
  absl::Status synchronized = absl::UnknownError("not run");
  std::thread waiter([&] { synchronized = raw.Synchronize(stream); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*daemon)->process().Signal(SIGTERM);
  waiter.join();
  // The waiting call completed successfully: the queue was drained, not cut.
  EXPECT_THAT(synchronized, IsOk());
  EXPECT_EQ((*daemon)->process().Wait(), 0);
  EXPECT_FALSE(std::filesystem::exists((*daemon)->socket_path()));
  EXPECT_FALSE(std::filesystem::exists((*daemon)->socket_path() + ".lock"));
}

TEST(DaemonLifecycleTest, BadFlagsAreRefusedWithAFix) {
  const std::string dir = MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  const RunResult backend =
      RunToCompletion(HrxdArgs(socket_path, {"--backend=quantum"}), dir);
  EXPECT_EQ(backend.exit_code, 1);
  EXPECT_THAT(backend.err, AllOf(HasSubstr("unknown_backend"),
                                 HasSubstr("quantum"), HasSubstr("Fix:")));
  const RunResult level =
      RunToCompletion(HrxdArgs(socket_path, {"--log-level=chatty"}), dir);
  EXPECT_EQ(level.exit_code, 1);
  EXPECT_THAT(level.err,
              AllOf(HasSubstr("bad_log_level"), HasSubstr("chatty")));
  const std::string long_path = dir + "/" + std::string(120, 'x') + ".sock";
  const RunResult too_long = RunToCompletion(HrxdArgs(long_path), dir);
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.err, HasSubstr("socket_path_too_long"));
  std::filesystem::remove_all(dir);
}

// Starts `binary` with --backend=auto, stops it, and checks what it chose:
// the GPU ("backend hip") when `gpu` is true, otherwise cpu with the
// fallback's reason, which names the HIP platform (`platform`, or any when
// empty).
void ExpectAutoChoice(const std::string& binary, bool gpu,
                      const std::string& platform) {
  const std::string dir = MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  Subprocess daemon = Subprocess::Start(
      {binary, absl::StrCat("--socket=", socket_path), "--backend=auto"}, dir);
  ASSERT_TRUE(WaitUntilServing(socket_path, &daemon)) << daemon.Stderr();
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  if (gpu) {
    EXPECT_THAT(daemon.Stderr(), AllOf(HasSubstr("(backend hip, device"),
                                       Not(HasSubstr("falling back"))));
  } else {
    EXPECT_THAT(daemon.Stderr(),
                AllOf(HasSubstr("falling back to the cpu backend"),
                      HasSubstr("hip_unavailable: backend hip" + platform),
                      HasSubstr("(backend cpu, device")));
  }
  EXPECT_THAT(daemon.Stdout(), HasSubstr("hrxctl --socket=" + socket_path));
  std::filesystem::remove_all(dir);
}

TEST(DaemonLifecycleTest, AutoPicksTheGpuWhereUsableElseFallsBackSayingWhy) {
  // The default build carries no GPU backend; a HIP variant under test on a
  // GPU machine (HRX_TEST_BACKEND=hip) must pick the GPU.
  ExpectAutoChoice(DaemonPath(), TestBackend() == "hip", "");
}

TEST(DaemonLifecycleTest, TheNvidiaVariantRunsWithoutAGpuByFallingBack) {
  // Linked with CUDA's static runtime: it starts without a driver.
  ExpectAutoChoice(RunfilePath("daemon/hrxd_hip_nvidia"),
                   TestBackend() == "hip", " (nvidia): no usable GPU");
}

TEST(DaemonLifecycleTest, TheAmdVariantRunsWithoutAnAmdGpuByFallingBack) {
  // No AMD GPU where this runs (CI has no GPU; the GPU runs are on NVIDIA,
  // and skip this test: the AMD runtime is not carried there).
  ExpectAutoChoice(RunfilePath("daemon/hrxd_hip_amd"), false,
                   " (amd): no usable GPU");
}

// Runs a kernel that fails (it writes past its binding) on the daemon at
// `socket_path`; the sync that ran it reports the failure.
void RunFaultingKernel(const std::string& socket_path) {
  auto client = Client::Connect(socket_path, "fault");
  ASSERT_THAT(client.status(), IsOk());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  ASSERT_THAT(stream.status(), IsOk());
  auto add = stream->LoadKernelFile(KernelPath("add_f32"), "add_f32");
  ASSERT_THAT(add.status(), IsOk());
  auto small = stream->Allocate(16);
  ASSERT_THAT(small.status(), IsOk());
  Constants too_many;  // 1000 floats into a 4-float binding: the kernel fails
  ASSERT_THAT(too_many.Push(uint32_t{1000}), IsOk());
  ASSERT_THAT(too_many.Push(1.0f), IsOk());
  const View binding = small->Binding();
  ASSERT_THAT(
      stream->Dispatch(*add, {1, 1, 1}, {64, 1, 1}, too_many, {&binding, 1}),
      IsOk());
  EXPECT_THAT(stream->Synchronize(),
              shared::StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("kernel_failed")));
}

// The daemon at `socket_path` still serves: a new client's bytes round-trip.
void ExpectStillServing(const std::string& socket_path) {
  absl::Status last;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto other = Client::Connect(socket_path, "after");
    ASSERT_THAT(other.status(), IsOk());
    auto stream = (*other)->OpenDevice(0)->CreateStream();
    if (!stream.ok()) {  // the faulted executor is being replaced
      last = stream.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    auto buffer = stream->Allocate(64);
    ASSERT_THAT(buffer.status(), IsOk());
    ASSERT_THAT(stream->Fill(buffer->Binding(), 7), IsOk());
    std::vector<uint8_t> bytes(64);
    ASSERT_THAT(stream->ReadBlocking(buffer->Binding(), bytes), IsOk());
    EXPECT_EQ(bytes[63], 7);
    return;
  }
  ADD_FAILURE() << "the daemon stopped serving: " << last;
}

TEST(DaemonLifecycleTest, AGpuFaultStopsAnInProcessDaemonWhenAsked) {
  const std::string dir = MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  Subprocess daemon =
      Subprocess::Start({DaemonPath(), absl::StrCat("--socket=", socket_path),
                         absl::StrCat("--backend=", TestBackend()),
                         "--exit_on_device_loss", "--executors=false"},
                        dir);
  ASSERT_TRUE(WaitUntilServing(socket_path, &daemon)) << daemon.Stderr();
  RunFaultingKernel(socket_path);
  if (TestBackend() == "hip") {
    // The context is lost: the daemon notices on its next round (at most
    // 5 s) and exits 1, for systemd to restart it.
    std::optional<int> exit_code;
    for (int i = 0; i < 300 && !exit_code; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      exit_code = daemon.Poll();
    }
    ASSERT_TRUE(exit_code.has_value()) << daemon.Stderr();
    EXPECT_EQ(*exit_code, 1);
    EXPECT_THAT(daemon.Stderr(),
                AllOf(HasSubstr("the device is lost: kernel_failed"),
                      HasSubstr("device_lost:"), HasSubstr("Fix:")));
  } else {
    // A CPU kernel failure poisons its queue, not the device: the daemon
    // keeps serving other clients.
    ExpectStillServing(socket_path);
    EXPECT_FALSE(daemon.Poll().has_value());
    daemon.Signal(SIGTERM);
    EXPECT_EQ(daemon.Wait(), 0);
  }
  std::filesystem::remove_all(dir);
}

// With executors, a fault loses only the faulting tenant's executor (on a
// GPU, its own context): the daemon keeps serving, and
// --exit_on_device_loss does not fire, since the device itself is fine.
TEST(DaemonLifecycleTest, AGpuFaultEndsOnlyItsExecutor) {
  const std::string dir = MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  Subprocess daemon = Subprocess::Start(
      {DaemonPath(), absl::StrCat("--socket=", socket_path),
       absl::StrCat("--backend=", TestBackend()), "--exit_on_device_loss"},
      dir);
  ASSERT_TRUE(WaitUntilServing(socket_path, &daemon)) << daemon.Stderr();
  RunFaultingKernel(socket_path);
  ExpectStillServing(socket_path);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_FALSE(daemon.Poll().has_value()) << daemon.Stderr();
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hrx::testing
