#include "daemon/executor/filesystem_policy.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "shared/unique_fd.h"

namespace hrx::executor {
namespace {

constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE |
                           LANDLOCK_ACCESS_FS_READ_DIR |
                           LANDLOCK_ACCESS_FS_EXECUTE;

// Every right of the ABI: what is not granted below is refused.
uint64_t HandledRights(int abi) {
  uint64_t rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                    LANDLOCK_ACCESS_FS_REMOVE_DIR |
                    LANDLOCK_ACCESS_FS_REMOVE_FILE |
                    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                    LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                    LANDLOCK_ACCESS_FS_MAKE_FIFO |
                    LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
  return rights;
}

absl::Status Failed(const std::string& what) {
  return Refusal(Reason::kExecutorLost,
                 absl::StrFormat("executor sandbox: landlock %s: %s. Fix: run "
                                 "hrxd on Linux 5.13 or later, or report it.",
                                 what, std::strerror(errno)));
}

}  // namespace

std::vector<FilesystemRule> ExecutorFilesystemPolicy() {
  std::vector<FilesystemRule> rules;
  auto add = [&rules](const std::string& path, bool write) {
    struct stat info {};
    if (stat(path.c_str(), &info) == 0) rules.push_back({path, write});
  };
  // Libraries a runtime loads late, and the kernel's views of the devices.
  for (const char* path :
       {"/usr", "/lib", "/lib64", "/opt/rocm", "/etc/ld.so.cache", "/sys"}) {
    add(path, false);
  }
  // Of /proc, the executor's own directory (the memfds kernels are loaded
  // through are /proc/self/fd; /proc/self is a link, so the rule names the
  // directory it resolves to) and the machine-wide files a runtime reads,
  // never /proc itself: another process's command line, or the list of
  // every pid on the machine, is not tenant code's to read.
  add(absl::StrCat("/proc/", getpid()), false);
  for (const char* path : {"/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                           "/proc/sys", "/proc/driver", "/proc/filesystems"}) {
    add(path, false);
  }
  // Device nodes: the GPU's (AMD's kfd and render nodes, NVIDIA's), and the
  // harmless ones a runtime may open. Never /dev itself: /dev/shm is where
  // other processes of the same uid keep shared memory.
  for (const char* path :
       {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/kfd",
        "/dev/dri", "/dev/udmabuf"}) {
    add(path, true);
  }
  if (DIR* dev = opendir("/dev")) {
    while (dirent* entry = readdir(dev)) {
      if (absl::StartsWith(entry->d_name, "nvidia")) {
        add(std::string("/dev/") + entry->d_name, true);
      }
    }
    closedir(dev);
  }
  return rules;
}

absl::StatusOr<int> RestrictFilesystem() {
  const int abi = static_cast<int>(syscall(SYS_landlock_create_ruleset, nullptr,
                                           0, LANDLOCK_CREATE_RULESET_VERSION));
  if (abi < 0) {
    if (errno == ENOSYS || errno == EOPNOTSUPP) return 0;
    return Failed("version");
  }
  const uint64_t handled = HandledRights(abi);
  landlock_ruleset_attr attributes{};
  attributes.handled_access_fs = handled;
  shared::UniqueFd ruleset(static_cast<int>(syscall(
      SYS_landlock_create_ruleset, &attributes, sizeof(attributes), 0)));
  if (!ruleset.valid()) return Failed("create_ruleset");
  for (const FilesystemRule& rule : ExecutorFilesystemPolicy()) {
    shared::UniqueFd path(open(rule.path.c_str(), O_PATH | O_CLOEXEC));
    if (!path.valid()) continue;  // gone since it was listed
    struct stat info {};
    if (fstat(path.get(), &info) != 0) continue;
    landlock_path_beneath_attr beneath{};
    beneath.parent_fd = path.get();
    beneath.allowed_access =
        rule.write ? kRead | LANDLOCK_ACCESS_FS_WRITE_FILE : kRead;
    // Directory rights only on directories.
    if (!S_ISDIR(info.st_mode)) {
      beneath.allowed_access &=
          ~static_cast<uint64_t>(LANDLOCK_ACCESS_FS_READ_DIR);
    }
    beneath.allowed_access &= handled;
    if (syscall(SYS_landlock_add_rule, ruleset.get(),
                LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
      return Failed("add_rule " + rule.path);
    }
  }
  // Required before restrict_self by an unprivileged process; set already
  // by the sandbox.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return Failed("no_new_privs");
  if (syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return Failed("restrict_self");
  }
  return abi;
}

}  // namespace hrx::executor
