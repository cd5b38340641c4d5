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
  for (absl::string_view procs : absl::StrSplit(
           Flag(argc, argv, "cgroup_procs"), ',', absl::SkipEmpty())) {
    sandbox.cgroup_procs.emplace_back(procs);
  }
  const std::string tenant = Flag(argc, argv, "tenant");
  auto entered = EnterSandbox(sandbox);
  if (!entered.ok()) {
    std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                 std::string(entered.status().message()).c_str());
    return 3;
  }
  (void)daemon::InitLogging(Flag(argc, argv, "log_level", "info"));
  auto log = daemon::Logger("executor");
  if (*entered == TaskCount::kUncapped && sandbox.cgroup_procs.empty()) {
    log->warn(
        "no task limit of its own: it shares its uid with other executors "
        "and has neither a control group nor a user namespace of its own "
        "(Linux 5.14 or later with unprivileged user namespaces)");
  }
  backend::BackendOptions options;
  options.choice = Flag(argc, argv, "backend", "cpu");
  options.cpu_memory_bytes = Number(argc, argv, "cpu_memory_bytes");
  options.gpu_device = static_cast<int>(Number(argc, argv, "gpu_device"));
  // Landlock binds the calling thread and those it makes later, never
  // threads already running. On the CPU backend tenant code runs on the
  // backend's worker threads, so the files are confined before it starts
  // them; a GPU runtime runs no tenant code on the host but needs files
  // Landlock would refuse as it starts (CUDA fails with
  // cudaErrorOperatingSystem), so there it comes after the runtime opened.
  bool confined = false;
  auto confine = [&]() -> bool {
    auto applied = RestrictFilesystem();
    if (!applied.ok()) {
      std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                   std::string(applied.status().message()).c_str());
      return false;
    }
    if (*applied == 0) {
      log->warn(
          "no Landlock in this kernel: the executor's files are guarded by "
          "its uid only");
    }
    confined = true;
    return true;
  };
  if (options.choice == "cpu" && !confine()) return 3;
  auto opened = backend::OpenBackend(options, *log);
  if (opened.ok() && !confined && (*opened)->properties().backend == "cpu") {
    // --backend=auto fell back to the CPU: its workers started unconfined.
    opened->reset();
    if (!confine()) return 3;
    options.choice = "cpu";
    opened = backend::OpenBackend(options, *log);
  }
  if (!opened.ok()) {
    std::fprintf(stderr, "hrxd executor (%s): %s\n", tenant.c_str(),
                 std::string(opened.status().message()).c_str());
    return 3;
  }
  if (!confined && !confine()) return 3;
  // System calls last (its ruleset calls are outside the allowlist), on
  // every thread the backend has started.
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
