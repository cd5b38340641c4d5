// The executor sandbox: a kernel (CPU code, so this runs on the CPU
// backend) tries to reach hrxd's memory, descriptors and environment,
// another executor's memory, a ptrace hold and the network; every attempt
// is refused, and it runs as an unprivileged user.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/isolation_fixture.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

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
                            "a TCP socket",
                            "signalling hrxd",
                            "signalling the shared executor",
                            "hrxd's command line",
                            "listing every process in /proc"};
  for (int i = 0; i < 10; ++i) {
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
      EXPECT_THAT(line, Not(HasSubstr("	0	")));
    }
  }
}

TEST_F(IsolationTest, TheSystemCallAllowlistRefusesWhatTheDocsSay) {
  Subprocess bystander = StartBystander(/*rounds=*/4);
  const pid_t daemon = daemon_->process().pid();
  const pid_t shared = ExecutorPid(daemon, "shared");
  ASSERT_GT(shared, 0);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  constexpr int kCalls = 29;
  // Many workgroups: most run on the backend's worker threads, which
  // existed before the filter was installed.
  constexpr uint32_t kGroups = 16;
  auto out = attacker->stream->Allocate(4 * kCalls * kGroups);
  ASSERT_THAT(out.status(), IsOk());
  Constants pids;
  ASSERT_THAT(pids.Push(static_cast<uint32_t>(daemon)), IsOk());
  ASSERT_THAT(pids.Push(static_cast<uint32_t>(shared)), IsOk());
  auto loaded =
      attacker->stream->LoadKernelFile(KernelPath("syscalls"), "syscalls");
  ASSERT_THAT(loaded.status(), IsOk());
  const View binding = out->Binding();
  ASSERT_THAT(attacker->stream->Dispatch(*loaded, {kGroups, 1, 1}, {1, 1, 1},
                                         pids, {&binding, 1}),
              IsOk());
  std::vector<uint8_t> bytes(4 * kCalls * kGroups);
  ASSERT_THAT(attacker->stream->ReadBlocking(out->Binding(), bytes), IsOk());
  // As tests/kernels/syscalls.c makes them.
  const char* kNames[kCalls] = {"tkill(other executor)",
                                "rt_sigqueueinfo(other)",
                                "rt_tgsigqueueinfo(other)",
                                "pidfd_open(other)",
                                "fork",
                                "clone3",
                                "socket(AF_UNIX)",
                                "socket(AF_INET)",
                                "io_uring_setup",
                                "open_tree",
                                "fsopen",
                                "mount",
                                "unshare(CLONE_NEWUSER)",
                                "ptrace(other)",
                                "bpf",
                                "execve",
                                "kill(0): its process group",
                                "kill(hrxd)",
                                "ioctl(2, TIOCSTI)",
                                "prctl(PR_SET_DUMPABLE)",
                                "shmget",
                                "userfaultfd",
                                "perf_event_open",
                                "pidfd_send_signal",
                                "socketpair",
                                "setns",
                                "fcntl(F_SETOWN hrxd)",
                                "fcntl(F_SETSIG)",
                                "ioctl(FIOSETOWN hrxd)"};
  for (uint32_t group = 0; group < kGroups; ++group) {
    for (int i = 0; i < kCalls; ++i) {
      uint32_t error = 0;
      std::memcpy(&error, bytes.data() + 4 * (kCalls * group + i), 4);
      // clone3 is refused with ENOSYS, so the C library falls back to clone.
      const uint32_t expected = i == 5 ? ENOSYS : EPERM;
      EXPECT_EQ(error, expected)
          << kNames[i] << " in workgroup " << group << ": the kernel got errno "
          << error << " (0: it succeeded)";
    }
  }
  // Still serving (the refusals are errors, not kills), and nobody else
  // noticed.
  ASSERT_THAT(Run(*attacker, "syscalls", pids, *out), IsOk());
  ExpectBystanderUnharmed(bystander);
}

// The shared executor is chosen by hrxd, never by a name: a tenant called
// "shared" that may load kernels, even one whose config asks for the shared
// executor, runs in an executor of its own.
TEST(ExecutorChoiceTest, ATenantNamedSharedWithKernelsGetsItsOwnExecutor) {
  ASSERT_EQ(geteuid(), 0u) << "the bystander switches uid";
  const std::string dir = MakeShortTempDir();
  std::ofstream(dir + "/hrxd.conf") << R"(
tenants { name: "bystander" uids: 4101 }
tenants { name: "shared" uids: 0 role: ROLE_ADMIN load_kernels: true
          isolation: ISOLATION_SHARED_EXECUTOR }
)";
  auto daemon = TestDaemon::Start(
      {"--config=" + dir + "/hrxd.conf", "--socket_mode=0666"}, dir);
  ASSERT_THAT(daemon.status(), IsOk());
  Subprocess bystander =
      Subprocess::Start({RunfilePath("tests/client_worker"),
                         "--socket=" + (*daemon)->socket_path(),
                         absl::StrCat("--uid=", kBystander), "--seed=3",
                         "--bytes=4099", "--rounds=2"},
                        dir);
  EXPECT_EQ(bystander.Wait(), 0) << bystander.Stdout() << bystander.Stderr();
  auto admin = hrx::v1::Admin::NewStub(grpc::CreateChannel(
      "unix:" + (*daemon)->socket_path(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  hrx::v1::ListExecutorsResponse executors;
  ASSERT_TRUE(
      admin
          ->ListExecutors(&context, hrx::v1::ListExecutorsRequest(), &executors)
          .ok());
  uint32_t bystanders = 0, kernels = 0;
  for (const hrx::v1::ExecutorInfo& executor : executors.executors()) {
    for (const std::string& tenant : executor.tenants()) {
      if (tenant == "bystander") bystanders = executor.pid();
      if (tenant == "shared") kernels = executor.pid();
    }
  }
  EXPECT_GT(bystanders, 0u) << executors.DebugString();
  EXPECT_GT(kernels, 0u) << executors.DebugString();
  EXPECT_NE(bystanders, kernels) << executors.DebugString();
}

// The isolation suite with its kernel-loading tenant called "shared", as
// the shared executor is in logs and listings.
class TenantNamedSharedTest : public IsolationTest {
 protected:
  std::string Config() const override {
    return R"(
tenants { name: "bystander" uids: 4101 }
tenants { name: "shared" uids: 0 role: ROLE_ADMIN load_kernels: true }
)";
  }
};

// Its executor is a tenant's own in every way, the memory limit included
// (the limit once went by the name, and a tenant called "shared" had none).
TEST_F(TenantNamedSharedTest, ItsKernelsHeapIsCappedAsAnyTenantsIs) {
  RestartDaemon({"--executor_memory_mb=256"});
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  Constants mib;
  ASSERT_THAT(mib.Push(uint32_t{1024}), IsOk());
  const absl::Status hogged = Run(*attacker, "hog", mib, *out);
  EXPECT_FALSE(hogged.ok()) << "1024 MiB taken past a 256 MiB limit";
  EXPECT_THAT(hogged.message(), HasSubstr("Fix:"));
  // The shared executor (listed as "shared" too) never loses anything:
  // the loss found is the tenant's executor's.
  EXPECT_THAT(LastLoss("shared"), HasSubstr("signal 9"));
  EXPECT_EQ(kill(daemon_->process().pid(), 0), 0) << "hrxd is gone";
  ExpectBystanderUnharmed(bystander);
}

TEST_F(IsolationTest, TenantOutputReachesTheLogEscapedBoundedAndNamed) {
  // Info level: executors' lines are logged at info.
  RestartDaemon({"--log-level=info"});
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(4);
  ASSERT_THAT(out.status(), IsOk());
  Constants megabytes;
  ASSERT_THAT(megabytes.Push(uint32_t{64}), IsOk());
  ASSERT_THAT(Run(*attacker, "chatty", megabytes, *out), IsOk());
  std::vector<uint8_t> failed(4);
  ASSERT_THAT(attacker->stream->ReadBlocking(out->Binding(), failed), IsOk());
  EXPECT_EQ(failed, std::vector<uint8_t>(4, 0)) << "the kernel's writes failed";
  ExpectBystanderUnharmed(bystander);
  // The forged line is there, named and escaped; no raw escape byte, and
  // not 64 MiB: the rest was dropped and counted.
  std::string log;
  for (int i = 0; i < 100; ++i) {
    log = daemon_->process().Stderr();
    if (log.find("lines dropped") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // (Found, not matched: the log itself is too long to print.)
  auto has = [&log](const std::string& text) {
    return log.find(text) != std::string::npos;
  };
  EXPECT_TRUE(
      has("ops: 2026-12-04T00:00:00.000 critical [daemon] "
          "hrxd: forged by a tenant"));
  EXPECT_TRUE(has("ops: \\x1b]0;owned\\x07\\x1b[2Jscreen cleared"));
  EXPECT_FALSE(has("\x1b"));
  EXPECT_TRUE(has("lines dropped: at most 10 a second"));
  EXPECT_LT(log.size(), size_t{1} << 20);
}

TEST_F(IsolationTest, AKernelReachesNoFileOfHrxdsOrAnyoneElses) {
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  // hrxd's config (world-readable here) and its socket, by path.
  const std::string paths = dir_ + "/hrxd.conf" + std::string(1, '\0') +
                            daemon_->socket_path() + std::string(1, '\0');
  auto in = attacker->stream->Allocate(paths.size());
  ASSERT_THAT(in.status(), IsOk());
  ASSERT_THAT(
      attacker->stream->UploadBlocking(
          in->Binding(),
          {reinterpret_cast<const uint8_t*>(paths.data()), paths.size()}),
      IsOk());
  auto out = attacker->stream->Allocate(24);
  ASSERT_THAT(out.status(), IsOk());
  auto loaded = attacker->stream->LoadKernelFile(KernelPath("files"), "files");
  ASSERT_THAT(loaded.status(), IsOk());
  const View bindings[] = {in->Binding(), out->Binding()};
  ASSERT_THAT(attacker->stream->Dispatch(*loaded, {1, 1, 1}, {1, 1, 1},
                                         Constants(), bindings),
              IsOk());
  std::vector<uint8_t> bytes(24);
  ASSERT_THAT(attacker->stream->ReadBlocking(out->Binding(), bytes), IsOk());
  const char* kNames[] = {"open /etc/passwd", "open hrxd's config",
                          "create a file in /tmp", "unlink hrxd's socket",
                          "open /dev/shm"};
  for (int i = 0; i < 5; ++i) {
    uint32_t error = 0;
    std::memcpy(&error, bytes.data() + 4 * i, 4);
    EXPECT_TRUE(error == EACCES || error == EPERM)
        << kNames[i] << ": the kernel got errno " << error
        << " (0: it succeeded)";
  }
  uint32_t library = 1;
  std::memcpy(&library, bytes.data() + 20, 4);
  EXPECT_EQ(library, 0u) << "reading under /usr should work: errno " << library;
  struct stat info {};
  EXPECT_EQ(stat(daemon_->socket_path().c_str(), &info), 0)
      << "hrxd's socket is gone";
  ExpectBystanderUnharmed(bystander);
}

// The uid and its limits in /proc/PID/status.
std::string StatusLine(pid_t pid, const std::string& key) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return line;
  }
  return "";
}

uid_t RealUid(pid_t pid) {
  // "Uid:\treal\teffective\tsaved\tfs"
  const std::string line = StatusLine(pid, "Uid");
  return static_cast<uid_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
}

TEST_F(IsolationTest, EachExecutorRunsAsAUidOfItsOwn) {
  Subprocess bystander = StartBystander(/*rounds=*/2);
  ExpectBystanderUnharmed(bystander);
  const pid_t daemon = daemon_->process().pid();
  const pid_t shared = ExecutorPid(daemon, "shared");
  const pid_t own = ExecutorPid(daemon, "ops");
  ASSERT_GT(shared, 0);
  ASSERT_GT(own, 0);
  const uid_t shared_uid = RealUid(shared), own_uid = RealUid(own);
  constexpr uid_t kBase = 2147352576;  // --executor_uid_base's default
  EXPECT_GE(shared_uid, kBase);
  EXPECT_GE(own_uid, kBase);
  EXPECT_NE(shared_uid, own_uid) << "two executors share a uid";
  // Its process limit is its own: threads only (it cannot fork).
  std::ifstream limits(absl::StrCat("/proc/", own, "/limits"));
  std::string text((std::istreambuf_iterator<char>(limits)),
                   std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::ContainsRegex("Max processes +1024 +1024"));
  // A restarted executor keeps its tenant's uid; another tenant never gets
  // it (checked above: distinct).
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(4096);
  ASSERT_THAT(out.status(), IsOk());
  Constants mode;
  ASSERT_THAT(mode.Push(uint32_t{0}), IsOk());
  EXPECT_FALSE(Run(*attacker, "crash", mode, *out).ok());
  auto again = Connect();
  ASSERT_THAT(again.status(), IsOk());
  const pid_t restarted = ExecutorPid(daemon, "ops");
  ASSERT_GT(restarted, 0);
  EXPECT_EQ(RealUid(restarted), own_uid);
}

TEST_F(IsolationTest, TwoRootDaemonsNeverGiveOneUidToBothsExecutors) {
  // A second root hrxd with the same --executor_uid_base, as for a second
  // device (or tests side by side): its executors lease other uids, so a
  // thread bomb in one daemon's executor never fills the process limit of
  // an executor of the other's.
  const std::string other_dir = MakeShortTempDir();
  std::ofstream(other_dir + "/hrxd.conf") << Config();
  auto other = TestDaemon::Start(
      {"--config=" + other_dir + "/hrxd.conf", "--socket_mode=0666"},
      other_dir);
  ASSERT_THAT(other.status(), IsOk());
  auto mine = Connect();
  ASSERT_THAT(mine.status(), IsOk());
  auto theirs = Client::Connect((*other)->socket_path(), "attacker");
  ASSERT_THAT(theirs.status(), IsOk());
  auto device = (*theirs)->OpenDevice(0);
  ASSERT_THAT(device.status(), IsOk());
  auto stream = device->CreateStream();
  ASSERT_THAT(stream.status(), IsOk());
  ASSERT_THAT(mine->stream->Allocate(4096).status(), IsOk());
  ASSERT_THAT(stream->Allocate(4096).status(), IsOk());
  std::set<uid_t> uids;
  for (pid_t daemon : {daemon_->process().pid(), (*other)->process().pid()}) {
    for (const char* name : {"shared", "ops"}) {
      const pid_t executor = ExecutorPid(daemon, name);
      ASSERT_GT(executor, 0) << name << " of hrxd " << daemon;
      uids.insert(RealUid(executor));
    }
  }
  EXPECT_EQ(uids.size(), 4u) << "two executors share a uid";
}

// The control groups `pid` is in (its /proc/PID/cgroup).
std::string CgroupOf(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/cgroup"));
  return std::string((std::istreambuf_iterator<char>(file)),
                     std::istreambuf_iterator<char>());
}

// The user namespace `pid` is in ("user:[INODE]").
std::string UserNamespaceOf(pid_t pid) {
  char target[64] = {};
  const std::string link = absl::StrCat("/proc/", pid, "/ns/user");
  const ssize_t length = readlink(link.c_str(), target, sizeof(target) - 1);
  return length > 0 ? std::string(target, length) : "unreadable " + link;
}

TEST_F(IsolationTest,
       AThreadBombIsCappedByItsExecutorsOwnGroupUnderASharedUid) {
  // Every executor as one user (`nobody`), as under a non-root hrxd where
  // all keep hrxd's uid: a uid's process limit would be everyone's.
  RestartDaemon({"--executor_uid_base=0"});
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t daemon = daemon_->process().pid();
  const pid_t own = ExecutorPid(daemon, "ops");
  ASSERT_GT(own, 0);
  EXPECT_EQ(RealUid(own), RealUid(ExecutorPid(daemon, "shared")));
  EXPECT_THAT(CgroupOf(own), HasSubstr("/executor-"));
  auto out = attacker->stream->Allocate(4096);
  ASSERT_THAT(out.status(), IsOk());
  Constants cap;
  ASSERT_THAT(cap.Push(uint32_t{8192}), IsOk());  // a bound for a failure
  ASSERT_THAT(Run(*attacker, "threads", cap, *out), IsOk());
  auto read = attacker->stream->Read(out->Binding());
  ASSERT_THAT(read.status(), IsOk());
  auto bytes = read->Wait(*attacker->stream);
  ASSERT_THAT(bytes.status(), IsOk());
  uint32_t started = 0;
  std::memcpy(&started, bytes->data(), 4);
  // The executor's own threads count too: fewer than its limit are left.
  EXPECT_GT(started, 0u);
  EXPECT_LT(started, 1024u) << "the executor's task limit did not hold";
  // Its tenant still works at the limit, and so does everyone else.
  EXPECT_THAT(attacker->stream->Allocate(64).status(), IsOk());
  ExpectBystanderUnharmed(bystander);
  Subprocess after = StartBystander(/*rounds=*/2);
  ExpectBystanderUnharmed(after);
}

// The uid hrxd runs as when a test runs it without root.
constexpr uid_t kDaemonUser = 4300;

// Whether a process of kDaemonUser may make a user namespace and map its
// ids in it (the kernel may refuse unprivileged user namespaces outright, or
// allow the namespace but not its maps, as Ubuntu's AppArmor does).
bool UnprivilegedUserNamespacesWork() {
  // Made before the fork: the child of a threaded process only makes calls.
  const std::string map = absl::StrCat(kDaemonUser, " ", kDaemonUser, " 1");
  const pid_t child = fork();
  if (child == 0) {
    bool works = setgroups(0, nullptr) == 0 &&
                 setresgid(kDaemonUser, kDaemonUser, kDaemonUser) == 0 &&
                 setresuid(kDaemonUser, kDaemonUser, kDaemonUser) == 0 &&
                 prctl(PR_SET_DUMPABLE, 1) == 0 && unshare(CLONE_NEWUSER) == 0;
    const int fd = works ? open("/proc/self/uid_map", O_WRONLY) : -1;
    works = fd >= 0 && write(fd, map.data(), map.size()) ==
                           static_cast<ssize_t>(map.size());
    _exit(works ? 0 : 1);
  }
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child &&
         WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// hrxd without root and without control groups (run by hand, with no
// delegated group): every executor keeps hrxd's uid, and each counts its
// tasks in a user namespace of its own, so a thread bomb stops at its own
// limit and leaves the uid's other executors room.
TEST_F(IsolationTest,
       AThreadBombIsCappedByItsOwnUserNamespaceUnderANonRootHrxd) {
  // HRX_SANITIZER names the build's sanitizer (.bazelrc), as the load
  // test reads it.
  const char* sanitizer = std::getenv("HRX_SANITIZER");
  if (sanitizer != nullptr && std::string(sanitizer) == "tsan") {
    GTEST_SKIP() << "under ThreadSanitizer an executor always has the "
                    "runtime's thread, and unshare(CLONE_NEWUSER) refuses a "
                    "threaded caller (EINVAL): it falls back to no task limit "
                    "of its own, as docs/security.md says";
  }
  if (!UnprivilegedUserNamespacesWork()) {
    GTEST_SKIP() << "this kernel gives uid " << kDaemonUser
                 << " no user namespace with maps: hrxd's executors then "
                    "have no task limit of their own (docs/security.md)";
  }
  daemon_.reset();
  // The directory becomes its user's, without the root daemon's files.
  ASSERT_EQ(chown(dir_.c_str(), kDaemonUser, kDaemonUser), 0);
  for (const char* file : {"/hrxd.sock", "/hrxd.sock.lock"}) {
    ASSERT_TRUE(unlink((dir_ + file).c_str()) == 0 || errno == ENOENT) << file;
  }
  auto daemon = TestDaemon::Start(
      {"--config=" + dir_ + "/hrxd.conf", "--socket_mode=0666",
       "--executor_cgroups=false"},
      dir_,
      {"/usr/bin/setpriv", absl::StrCat("--reuid=", kDaemonUser),
       absl::StrCat("--regid=", kDaemonUser), "--clear-groups", "--"});
  ASSERT_THAT(daemon.status(), IsOk());
  daemon_ = *std::move(daemon);
  // Clients trust a socket only where root, they or the user "hrxd" own it
  // and its directory (kDaemonUser is none of these): handed to root now
  // that hrxd listens, as though root had made them for it.
  ASSERT_EQ(chown(daemon_->socket_path().c_str(), 0, 0), 0);
  ASSERT_EQ(chown(dir_.c_str(), 0, 0), 0);
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t hrxd = daemon_->process().pid();
  ASSERT_EQ(RealUid(hrxd), kDaemonUser);
  const pid_t own = ExecutorPid(hrxd, "ops");
  ASSERT_GT(own, 0);
  const pid_t shared = ExecutorPid(hrxd, "shared");
  EXPECT_EQ(RealUid(own), kDaemonUser);
  EXPECT_EQ(RealUid(shared), kDaemonUser);
  EXPECT_NE(UserNamespaceOf(own), UserNamespaceOf(hrxd));
  EXPECT_NE(UserNamespaceOf(own), UserNamespaceOf(shared));
  auto out = attacker->stream->Allocate(4096);
  ASSERT_THAT(out.status(), IsOk());
  Constants cap;
  ASSERT_THAT(cap.Push(uint32_t{8192}), IsOk());  // a bound for a failure
  ASSERT_THAT(Run(*attacker, "threads", cap, *out), IsOk());
  auto read = attacker->stream->Read(out->Binding());
  ASSERT_THAT(read.status(), IsOk());
  auto bytes = read->Wait(*attacker->stream);
  ASSERT_THAT(bytes.status(), IsOk());
  uint32_t started = 0;
  std::memcpy(&started, bytes->data(), 4);
  EXPECT_GT(started, 0u);
  EXPECT_LT(started, 1024u) << "the executor's task limit did not hold";
  EXPECT_THAT(attacker->stream->Allocate(64).status(), IsOk());
  ExpectBystanderUnharmed(bystander);
  Subprocess after = StartBystander(/*rounds=*/2);
  ExpectBystanderUnharmed(after);
}

TEST_F(IsolationTest, AKernelsHeapIsCappedByItsExecutorsMemoryLimit) {
  RestartDaemon({"--executor_memory_mb=256"});
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t daemon = daemon_->process().pid();
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  Constants mib;
  ASSERT_THAT(mib.Push(uint32_t{1024}), IsOk());
  // The memory a kernel takes outside its budget ends its executor when it
  // passes the limit; nothing else goes.
  const absl::Status hogged = Run(*attacker, "hog", mib, *out);
  EXPECT_FALSE(hogged.ok());
  EXPECT_THAT(hogged.message(), HasSubstr("Fix:"));
  EXPECT_THAT(LastLoss("ops"), HasSubstr("signal 9"));
  EXPECT_EQ(kill(daemon, 0), 0) << "hrxd is gone";
  ExpectBystanderUnharmed(bystander);
  // Its tenant starts again on a fresh executor.
  auto again = Connect();
  EXPECT_THAT(again.status(), IsOk());
}

// Tenants' own executors share a group whose limit bounds them together:
// a kernel within its own executor's limit is still ended at the total,
// and the shared executor (outside that group) keeps every other tenant's
// bytes.
TEST_F(IsolationTest, TenantsOwnExecutorsAreCappedTogether) {
  RestartDaemon(
      {"--executor_memory_mb=2048", "--tenant_executors_memory_mb=256"});
  Subprocess bystander = StartBystander(/*rounds=*/4);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  const pid_t daemon = daemon_->process().pid();
  EXPECT_THAT(CgroupOf(ExecutorPid(daemon, "ops")),
              HasSubstr("/tenants/executor-"));
  EXPECT_THAT(CgroupOf(ExecutorPid(daemon, "shared")),
              Not(HasSubstr("/tenants/")));
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  Constants mib;
  ASSERT_THAT(mib.Push(uint32_t{512}), IsOk());
  const absl::Status hogged = Run(*attacker, "hog", mib, *out);
  EXPECT_FALSE(hogged.ok()) << "512 MiB taken past a 256 MiB total";
  EXPECT_THAT(hogged.message(), HasSubstr("Fix:"));
  EXPECT_THAT(LastLoss("ops"), HasSubstr("signal 9"));
  EXPECT_EQ(kill(daemon, 0), 0) << "hrxd is gone";
  ExpectBystanderUnharmed(bystander);
}

}  // namespace
}  // namespace hrx::testing
