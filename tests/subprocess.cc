#include "tests/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace hrx::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

namespace {

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string RunfilePath(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return relative;
  return absl::StrCat(srcdir, "/", workspace, "/", relative);
}

std::string MakeShortTempDir() {
  char pattern[] = "/tmp/hrxt-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (dir == nullptr) std::abort();
  return dir;
}

Subprocess Subprocess::Start(const std::vector<std::string>& argv,
                             const std::string& dir,
                             const std::vector<std::string>& extra_env,
                             int inherit_fd) {
  static std::atomic<int> counter{0};
  const int id = counter.fetch_add(1);
  const std::string out = absl::StrCat(dir, "/proc", id, ".out");
  const std::string err = absl::StrCat(dir, "/proc", id, ".err");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (inherit_fd >= 0)
    posix_spawn_file_actions_adddup2(&actions, inherit_fd, 3);
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.push_back(*e);
  for (const std::string& e : extra_env) env_storage.push_back(e);
  std::vector<char*> env;
  for (std::string& e : env_storage) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data()) !=
      0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return Subprocess(pid, out, err);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exit_code_(other.exit_code_),
      stdout_path_(std::move(other.stdout_path_)),
      stderr_path_(std::move(other.stderr_path_)) {}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    Wait();
  }
}

void Subprocess::Signal(int signal_number) const {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal_number);
}

int Subprocess::Wait() {
  if (exit_code_) return *exit_code_;
  if (pid_ <= 0) return -1;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_code_ = DecodeWaitStatus(status);
  return *exit_code_;
}

std::optional<int> Subprocess::Poll() {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = DecodeWaitStatus(status);
  }
  return exit_code_;
}

std::string Subprocess::Stdout() const { return ReadFile(stdout_path_); }
std::string Subprocess::Stderr() const { return ReadFile(stderr_path_); }

RunResult RunToCompletion(const std::vector<std::string>& argv,
                          const std::string& dir) {
  Subprocess child = Subprocess::Start(argv, dir);
  const int code = child.Wait();
  return RunResult{code, child.Stdout(), child.Stderr()};
}

bool WaitForOutput(Subprocess& child, const std::string& text,
                   absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (child.Stdout().find(text) == std::string::npos) {
    if (child.Poll().has_value()) {
      return child.Stdout().find(text) != std::string::npos;
    }
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace hrx::testing
