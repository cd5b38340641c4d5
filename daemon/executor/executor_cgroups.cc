#include "daemon/executor/executor_cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hrx::executor {
namespace {

constexpr char kFix[] =
    " Fix: run hrxd as root, or under its unit with Delegate=pids memory "
    "(deploy/hrxd.service); --executor_cgroups=false runs without them.";

absl::Status Unavailable(const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat("no control groups for executors: ", why, ".", kFix));
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrFormat("open %s: %s", path, std::strerror(errno)));
  }
  const ssize_t written = write(fd, text.data(), text.size());
  const int error = errno;
  close(fd);
  if (written != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(
        absl::StrFormat("write \"%s\" to %s: %s", text, path,
                        written < 0 ? std::strerror(error) : "short write"));
  }
  return absl::OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

absl::Status MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    return absl::OkStatus();
  }
  return absl::InternalError(
      absl::StrFormat("mkdir %s: %s", path, std::strerror(errno)));
}

bool HasWord(const std::string& text, const std::string& word) {
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar(" \n"))) {
    if (part == word) return true;
  }
  return false;
}

// Removes the (empty) `executor-N` groups in `group`.
void RemoveExecutorGroups(const std::string& group) {
  DIR* children = opendir(group.c_str());
  if (children == nullptr) return;
  std::vector<std::string> executors;
  while (dirent* entry = readdir(children)) {
    if (absl::StartsWith(entry->d_name, "executor-")) {
      executors.push_back(absl::StrCat(group, "/", entry->d_name));
    }
  }
  closedir(children);
  for (const std::string& executor : executors) rmdir(executor.c_str());
}

// Whether this process is in the initial PID namespace (whose inode number
// the kernel fixes, PROC_PID_INIT_INO): only there does kill(pid, 0) tell
// whether the hrxd a group is named after lives.
bool InInitialPidNamespace() {
  struct stat own {};
  return stat("/proc/self/ns/pid", &own) == 0 && own.st_ino == 0xEFFFFFFCu;
}

// Groups `hrxd-PID` that a previous hrxd left (it was killed before it could
// remove them) go: rmdir refuses any group still holding a process. Not
// from inside a PID namespace, where every other hrxd looks dead: its
// sweep removed a live hrxd's empty groups as it was about to use them.
void SweepStale(const std::string& dir) {
  if (!InInitialPidNamespace()) return;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* entry = readdir(listing)) {
    absl::string_view name = entry->d_name;
    int pid = 0;
    if (absl::ConsumePrefix(&name, "hrxd-") && absl::SimpleAtoi(name, &pid) &&
        pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      stale.push_back(absl::StrCat(dir, "/", entry->d_name));
    }
  }
  closedir(listing);
  for (const std::string& group : stale) {
    RemoveExecutorGroups(group + "/tenants");
    rmdir((group + "/tenants").c_str());
    RemoveExecutorGroups(group);
    rmdir(group.c_str());
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutorCgroups>> ExecutorCgroups::Open(
    uint64_t tenants_memory_bytes, const std::string& root) {
  const std::string membership = ReadFile("/proc/self/cgroup");
  std::vector<std::string> lines =
      absl::StrSplit(membership, '\n', absl::SkipEmpty());
  absl::StatusOr<std::unique_ptr<ExecutorCgroups>> opened =
      Unavailable("/proc/self/cgroup names no cgroup v2 group");
  if (Exists(root + "/cgroup.controllers")) {
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, "0::")) {
        opened = OpenV2(root, line.substr(3));
        break;
      }
    }
  } else {
    opened = OpenV1(root, lines);
  }
  if (!opened.ok()) return opened;
  (*opened)->tenants_memory_bytes_ = tenants_memory_bytes;
  // Destroyed on failure: what it made so far goes.
  for (size_t i = 0; i < (*opened)->parents_.size(); ++i) {
    if (absl::Status made = (*opened)->MakeTenantsGroup(i); !made.ok()) {
      return Unavailable(std::string(made.message()));
    }
  }
  return opened;
}

absl::Status ExecutorCgroups::MakeTenantsGroup(size_t i) {
  const uint64_t memory_bytes = tenants_memory_bytes_;
  {
    const std::string group = parents_[i] + "/tenants";
    if (absl::Status made = MakeDirectory(group); !made.ok()) return made;
    {
      absl::MutexLock lock(&mu_);
      if (std::find(tenants_groups_.begin(), tenants_groups_.end(), group) ==
          tenants_groups_.end()) {
        tenants_groups_.push_back(group);
      }
    }
    if (version_ == Version::kV2) {
      const std::string offered = ReadFile(group + "/cgroup.controllers");
      const std::string enable =
          HasWord(offered, "memory") ? "+pids +memory" : "+pids";
      if (absl::Status enabled =
              WriteFile(group + "/cgroup.subtree_control", enable);
          !enabled.ok()) {
        return enabled;
      }
    }
    // v1 before 5.11 counts a child's memory in its parent's only where
    // the parent says so (later kernels always do, and accept the 1).
    if (version_ == Version::kV1 && MemoryHere(i) &&
        Exists(group + "/memory.use_hierarchy")) {
      (void)WriteFile(group + "/memory.use_hierarchy", "1");
    }
    const std::string limit_file =
        group +
        (version_ == Version::kV2 ? "/memory.max" : "/memory.limit_in_bytes");
    if (MemoryHere(i) && Exists(limit_file)) {
      const std::string limit = memory_bytes == 0
                                    ? (version_ == Version::kV2 ? "max" : "-1")
                                    : absl::StrCat(memory_bytes);
      if (absl::Status set = WriteFile(limit_file, limit); !set.ok()) {
        return set;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExecutorCgroups>> ExecutorCgroups::OpenV2(
    const std::string& root, const std::string& own) {
  const std::string dir = own == "/" ? root : root + own;
  const std::string controllers = ReadFile(dir + "/cgroup.controllers");
  if (!HasWord(controllers, "pids")) {
    return Unavailable(absl::StrFormat(
        "hrxd's group %s offers no pids controller (it offers \"%s\")", dir,
        std::string(absl::StripAsciiWhitespace(controllers))));
  }
  const bool memory = HasWord(controllers, "memory");
  const std::string enable = memory ? "+pids +memory" : "+pids";
  if (own == "/") {
    // The root group may hold processes and children alike.
    const std::string parent = absl::StrCat(dir, "/hrxd-", getpid());
    SweepStale(dir);
    if (absl::Status made = MakeDirectory(parent); !made.ok()) {
      return Unavailable(std::string(made.message()));
    }
    if (absl::Status enabled =
            WriteFile(parent + "/cgroup.subtree_control", enable);
        !enabled.ok()) {
      rmdir(parent.c_str());
      return Unavailable(std::string(enabled.message()));
    }
    auto made = std::unique_ptr<ExecutorCgroups>(
        new ExecutorCgroups(Version::kV2, {parent}, ""));
    made->caps_memory_ = memory;
    return made;
  }
  // A delegated group: processes only in leaves, so hrxd moves into one.
  const std::string leaf = dir + "/daemon";
  if (absl::Status made = MakeDirectory(leaf); !made.ok()) {
    return Unavailable(absl::StrCat(std::string(made.message()),
                                    " (hrxd's group is not delegated to it)"));
  }
  if (absl::Status moved =
          WriteFile(leaf + "/cgroup.procs", absl::StrCat(getpid()));
      !moved.ok()) {
    rmdir(leaf.c_str());
    return Unavailable(std::string(moved.message()));
  }
  if (absl::Status enabled = WriteFile(dir + "/cgroup.subtree_control", enable);
      !enabled.ok()) {
    // Other processes share hrxd's group: it is not hrxd's to divide.
    (void)WriteFile(dir + "/cgroup.procs", absl::StrCat(getpid()));
    rmdir(leaf.c_str());
    return Unavailable(absl::StrCat(std::string(enabled.message()),
                                    " (other processes share hrxd's group ",
                                    dir, ")"));
  }
  auto made = std::unique_ptr<ExecutorCgroups>(
      new ExecutorCgroups(Version::kV2, {dir}, leaf));
  made->caps_memory_ = memory;
  return made;
}

absl::StatusOr<std::unique_ptr<ExecutorCgroups>> ExecutorCgroups::OpenV1(
    const std::string& root, const std::vector<std::string>& lines) {
  // "ID:controller[,controller]:path" for each v1 hierarchy.
  auto own_path = [&](const std::string& controller) -> std::string {
    for (const std::string& line : lines) {
      std::vector<std::string> fields =
          absl::StrSplit(line, absl::MaxSplits(':', 2));
      if (fields.size() != 3) continue;
      for (absl::string_view name : absl::StrSplit(fields[1], ',')) {
        if (name == controller) return fields[2];
      }
    }
    return "";
  };
  std::vector<std::string> parents;
  for (const char* controller : {"pids", "memory"}) {
    const std::string path = own_path(controller);
    const std::string mount = absl::StrCat(root, "/", controller);
    if (path.empty() || !Exists(mount + "/cgroup.procs")) {
      if (parents.empty()) {
        return Unavailable(absl::StrFormat(
            "neither cgroup v2 at %s nor a v1 pids hierarchy at %s", root,
            mount));
      }
      continue;  // no memory hierarchy: tasks are still limited
    }
    const std::string own = path == "/" ? mount : mount + path;
    SweepStale(own);
    const std::string parent = absl::StrCat(own, "/hrxd-", getpid());
    if (absl::Status made = MakeDirectory(parent); !made.ok()) {
      for (const std::string& made_parent : parents) rmdir(made_parent.c_str());
      return Unavailable(std::string(made.message()));
    }
    parents.push_back(parent);
  }
  const bool memory = parents.size() > 1;
  auto made = std::unique_ptr<ExecutorCgroups>(
      new ExecutorCgroups(Version::kV1, std::move(parents), ""));
  made->caps_memory_ = memory;
  return made;
}

ExecutorCgroups::~ExecutorCgroups() {
  absl::MutexLock lock(&mu_);
  for (const std::string& group : made_) rmdir(group.c_str());
  for (const std::string& group : tenants_groups_) rmdir(group.c_str());
  // v2's delegated group is the unit's; v1's hrxd-PID groups are hrxd's.
  if (version_ == Version::kV1 || own_leaf_.empty()) {
    for (const std::string& parent : parents_) rmdir(parent.c_str());
  }
}

absl::StatusOr<std::vector<std::string>> ExecutorCgroups::Prepare(
    uint32_t index, const CgroupLimits& limits) {
  std::vector<std::string> procs;
  for (size_t i = 0; i < parents_.size(); ++i) {
    // Made again each time: an empty group may have been removed by
    // another hrxd's sweep of groups it took for stale (one in another PID
    // namespace cannot see that this hrxd lives), as an empty executor-N may.
    if (limits.tenants_own) {
      if (absl::Status made = MakeTenantsGroup(i); !made.ok()) return made;
    }
    const std::string group = absl::StrCat(
        parents_[i], limits.tenants_own ? "/tenants" : "", "/executor-", index);
    if (absl::Status made = MakeDirectory(group); !made.ok()) return made;
    {
      absl::MutexLock lock(&mu_);
      if (std::find(made_.begin(), made_.end(), group) == made_.end()) {
        made_.push_back(group);
      }
    }
    // v1: the pids hierarchy first, then memory; v2: one group for both.
    const bool tasks_here = version_ == Version::kV2 || i == 0;
    const bool memory_here = MemoryHere(i);
    if (tasks_here) {
      if (absl::Status set =
              WriteFile(group + "/pids.max", absl::StrCat(limits.tasks));
          !set.ok()) {
        return set;
      }
    }
    if (memory_here &&
        Exists(group + (version_ == Version::kV2 ? "/memory.max"
                                                 : "/memory.limit_in_bytes"))) {
      const std::string limit = limits.memory_bytes == 0
                                    ? (version_ == Version::kV2 ? "max" : "-1")
                                    : absl::StrCat(limits.memory_bytes);
      if (absl::Status set = WriteFile(
              group + (version_ == Version::kV2 ? "/memory.max"
                                                : "/memory.limit_in_bytes"),
              limit);
          !set.ok()) {
        return set;
      }
      // Out of memory, the whole group goes (the executor is one process).
      if (version_ == Version::kV2) {
        (void)WriteFile(group + "/memory.oom.group", "1");
      }
    }
    procs.push_back(group + "/cgroup.procs");
  }
  return procs;
}

std::string ExecutorCgroups::Describe() const {
  return absl::StrFormat("cgroup %s under %s",
                         version_ == Version::kV2 ? "v2" : "v1",
                         absl::StrJoin(parents_, " and "));
}

absl::Status JoinCgroups(const std::vector<std::string>& procs) {
  for (const std::string& path : procs) {
    if (absl::Status joined = WriteFile(path, "0"); !joined.ok()) {
      return joined;
    }
  }
  return absl::OkStatus();
}

}  // namespace hrx::executor
