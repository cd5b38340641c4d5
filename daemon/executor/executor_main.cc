#include "daemon/executor/executor_main.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/backend/factory.h"
#include "daemon/executor/executor_service.h"
#include "daemon/executor/filesystem_policy.h"
#include "daemon/executor/sandbox.h"
#include "daemon/logging.h"

namespace hrx::executor {
namespace {

// "--name=value" from argv, or `fallback`.
std::string Flag(int argc, char** argv, const std::string& name,
                 const std::string& fallback = "") {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return fallback;
}

uint64_t Number(int argc, char** argv, const std::string& name) {
  uint64_t value = 0;
  (void)absl::SimpleAtoi(Flag(argc, argv, name, "0"), &value);
  return value;
}

}  // namespace

int RunExecutor(int argc, char** argv) {
  SandboxOptions sandbox;
  sandbox.keep_fd = kExecutorSocketFd;
  sandbox.parent = static_cast<pid_t>(Number(argc, argv, "parent"));
  sandbox.uid = static_cast<uid_t>(Number(argc, argv, "uid"));
  sandbox.gid = static_cast<gid_t>(Number(argc, argv, "gid"));
  sandbox.own_uid = Number(argc, argv, "own_uid") != 0;
  for (absl::string_view group :
       absl::StrSplit(Flag(argc, argv, "groups"), ',', absl::SkipEmpty())) {
    gid_t gid = 0;
    if (absl::SimpleAtoi(group, &gid)) sandbox.groups.push_back(gid);
  }
  const std::string tenant = Flag(argc, argv, "tenant");
  if (absl::Status entered = EnterSandbox(sandbox); !entered.ok()) {
    std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                 std::string(entered.message()).c_str());
    return 3;
  }
  (void)daemon::InitLogging(Flag(argc, argv, "log_level", "info"));
  auto log = daemon::Logger("executor");
  backend::BackendOptions options;
  options.choice = Flag(argc, argv, "backend", "cpu");
  options.cpu_memory_bytes = Number(argc, argv, "cpu_memory_bytes");
  options.gpu_device = static_cast<int>(Number(argc, argv, "gpu_device"));
  auto opened = backend::OpenBackend(options, *log);
  if (!opened.ok()) {
    std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                 std::string(opened.status().message()).c_str());
    return 3;
  }
  // Files next (the ruleset's calls are not in the system call allowlist),
  // after the backend has opened what it needs.
  auto confined = RestrictFilesystem();
  if (!confined.ok()) {
    std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                 std::string(confined.status().message()).c_str());
    return 3;
  }
  if (*confined == 0) {
    log->warn(
        "no Landlock in this kernel: the executor's files are guarded by its "
        "uid only");
  }
  if (absl::Status restricted = RestrictSystemCalls(); !restricted.ok()) {
    std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                 std::string(restricted.message()).c_str());
    return 3;
  }
  {
    ExecutorService service(**opened, kExecutorSocketFd);
    service.Serve();
  }
  return 0;
}

}  // namespace hrx::executor
