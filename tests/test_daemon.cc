#include "tests/test_daemon.h"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/internal/connection.h"
#include "gtest/gtest.h"
#include "hrx/v1/status.grpc.pb.h"

namespace hrx::testing {

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

std::string TestBackend() {
  const char* backend = std::getenv("HRX_TEST_BACKEND");
  return backend != nullptr && backend[0] != '\0' ? backend : "cpu";
}

std::string DaemonPath() {
  const char* daemon = std::getenv("HRX_TEST_DAEMON");
  return RunfilePath(daemon != nullptr && daemon[0] != '\0' ? daemon
                                                            : "daemon/hrxd");
}

hrx::v1::GetStatusResponse QueryStatus(const std::string& socket_path) {
  auto stub = hrx::v1::DaemonStatus::NewStub(
      client::internal::MakeChannel(socket_path));
  grpc::ClientContext context;
  hrx::v1::GetStatusRequest request;
  hrx::v1::GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

bool WaitUntilServing(const std::string& socket_path, Subprocess* process) {
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    if (process != nullptr && process->Poll().has_value()) return false;
    // A fresh channel per attempt: a channel that failed to connect backs
    // off for seconds before it tries again.
    auto stub = hrx::v1::DaemonStatus::NewStub(
        client::internal::MakeChannel(socket_path));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(500));
    hrx::v1::GetStatusRequest request;
    hrx::v1::GetStatusResponse response;
    if (stub->GetStatus(&context, request, &response).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

absl::StatusOr<std::unique_ptr<TestDaemon>> TestDaemon::Start(
    const std::vector<std::string>& extra_flags, const std::string& dir,
    const std::vector<std::string>& wrapper) {
  const bool owns_dir = dir.empty();
  const std::string where = owns_dir ? MakeShortTempDir() : dir;
  const std::string socket_path = absl::StrCat(where, "/hrxd.sock");
  // The test's own directory: clients of other uids reach the socket
  // through it (hrxd keeps the mode of a directory it did not create).
  if (chmod(where.c_str(), 0711) != 0) {
    return absl::InternalError(absl::StrCat("chmod 0711 ", where));
  }
  std::vector<std::string> argv = {
      DaemonPath(), absl::StrCat("--socket=", socket_path),
      absl::StrCat("--backend=", TestBackend()), "--log-level=warn"};
  // $HRX_TEST_DAEMON_FLAG: one more flag for every daemon a suite starts
  // (e.g. --executor_rings, to run a suite against executor-served rings).
  if (const char* flag = std::getenv("HRX_TEST_DAEMON_FLAG");
      flag != nullptr && flag[0] != '\0') {
    argv.push_back(flag);
  }
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  argv.insert(argv.begin(), wrapper.begin(), wrapper.end());
  auto process = std::make_unique<Subprocess>(Subprocess::Start(argv, where));
  if (!WaitUntilServing(socket_path, process.get())) {
    process->Signal(SIGKILL);
    process->Wait();
    return absl::UnavailableError(
        absl::StrCat("hrxd did not start: ", process->Stderr()));
  }
  return std::unique_ptr<TestDaemon>(
      new TestDaemon(where, socket_path, std::move(process), owns_dir));
}

TestDaemon::~TestDaemon() {
  // HRX_TEST_DAEMON_STDERR=1 shows what hrxd said (the directory with its
  // log goes below).
  if (std::getenv("HRX_TEST_DAEMON_STDERR") != nullptr && process_ != nullptr) {
    std::fprintf(stderr, "hrxd stderr: %s\n", process_->Stderr().c_str());
  } else if (process_ != nullptr) {
    // A daemon that died of a fault, or served a test that failed, says
    // what it logged, so a failure seen once in CI can be diagnosed from
    // the test's log alone.
    const std::optional<int> code = process_->Poll();
    const ::testing::TestInfo* test =
        ::testing::UnitTest::GetInstance()->current_test_info();
    const bool failed = test != nullptr && test->result()->Failed();
    if (code && (*code == 128 + SIGABRT || *code == 128 + SIGSEGV ||
                 *code == 128 + SIGBUS || *code == 128 + SIGFPE ||
                 *code == 128 + SIGILL)) {
      std::fprintf(stderr, "hrxd died with signal %d; its stderr:\n%s\n",
                   *code - 128, process_->Stderr().c_str());
    } else if (failed) {
      constexpr size_t kTail = 6000;
      const std::string log = process_->Stderr();
      std::fprintf(
          stderr, "the test failed; hrxd's stderr%s:\n%s\n",
          log.size() > kTail ? " (its end)" : "",
          log.substr(log.size() > kTail ? log.size() - kTail : 0).c_str());
    }
  }
  process_.reset();  // SIGKILL + reap when still running
  if (owns_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

int TestDaemon::Stop() {
  process_->Signal(SIGTERM);
  return process_->Wait();
}

size_t ProcEntries(pid_t pid, const std::string& what) {
  std::error_code error;
  size_t count = 0;
  for (auto it = std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid, "/", what), error);
       !error && it != std::filesystem::directory_iterator(); ++it) {
    ++count;
  }
  return count;
}

size_t ProcEntriesSettle(pid_t pid, const std::string& what, size_t limit) {
  size_t now = ProcEntries(pid, what);
  for (int i = 0; i < 200 && now > limit; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    now = ProcEntries(pid, what);
  }
  return now;
}

size_t ProcEntriesSteady(pid_t pid, const std::string& what) {
  return Settled([&] { return ProcEntries(pid, what); });
}

pid_t ExecutorPid(pid_t daemon, const std::string& name) {
  const std::string needle = "--tenant=" + name + std::string(1, '\0');
  DIR* proc = opendir("/proc");
  pid_t found = 0;
  while (dirent* entry = proc != nullptr ? readdir(proc) : nullptr) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    const std::string text((std::istreambuf_iterator<char>(stat)),
                           std::istreambuf_iterator<char>());
    const size_t name_end = text.rfind(')');
    char state = 0;
    int parent = 0;
    if (name_end == std::string::npos ||
        std::sscanf(text.c_str() + name_end + 1, " %c %d", &state, &parent) !=
            2 ||
        parent != daemon) {
      continue;
    }
    std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"));
    const std::string args((std::istreambuf_iterator<char>(cmdline)),
                           std::istreambuf_iterator<char>());
    if (args.find(needle) != std::string::npos) found = pid;
  }
  if (proc != nullptr) closedir(proc);
  return found;
}

}  // namespace hrx::testing
