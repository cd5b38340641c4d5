#include "daemon/executor/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "daemon/executor/executor_cgroups.h"
#include "daemon/executor/syscall_policy.h"
#include "shared/refusal.h"

namespace hrx::executor {
namespace {

absl::Status Failed(const std::string& what) {
  return Refusal(Reason::kExecutorLost,
                 absl::StrFormat("executor sandbox: %s: %s. Fix: run hrxd as "
                                 "root (or as the executor user) on Linux "
                                 "5.x or later.",
                                 what, std::strerror(errno)));
}

void CloseOtherDescriptors(int keep) {
  std::vector<int> open;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) {
      int fd = -1;
      if (absl::SimpleAtoi(entry->d_name, &fd) && fd > 2 && fd != keep &&
          fd != dirfd(dir)) {
        open.push_back(fd);
      }
    }
    closedir(dir);
  }
  for (int fd : open) close(fd);
}

// Linux counts RLIMIT_NPROC per user namespace from 5.14 on; before, per
// uid across every namespace, so a namespace of its own would not help.
bool CountsTasksPerUserNamespace() {
  utsname names{};
  if (uname(&names) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(names.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 5 || (major == 5 && minor >= 14);
}

bool WriteProcSelf(const char* file, const std::string& text) {
  const int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return written;
}

// Moves the calling process into a user namespace of its own, mapping its
// uid and gid to themselves, and gives up the capabilities that namespace
// grants. False at the first step that fails.
bool UnshareMappedUserNamespace() {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER) != 0) return false;
  if (!WriteProcSelf("/proc/self/uid_map",
                     absl::StrFormat("%d %d 1", uid, uid)) ||
      !WriteProcSelf("/proc/self/setgroups", "deny") ||
      !WriteProcSelf("/proc/self/gid_map",
                     absl::StrFormat("%d %d 1", gid, gid))) {
    return false;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  return syscall(SYS_capset, &header, none) == 0;
}

// Whether UnshareMappedUserNamespace would succeed here, tried in a child
// that then exits: a kernel may allow the namespace but not its maps
// (Ubuntu's AppArmor restriction of unprivileged namespaces), and a process
// left in a namespace without maps could not make a file.
bool UserNamespaceWorks() {
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) _exit(UnshareMappedUserNamespace() ? 0 : 1);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Where the executor's uid is shared with other executors and no control
// group caps its tasks: moves it into a user namespace of its own, so that
// its tasks count against RLIMIT_NPROC apart from every other process of
// its uid (Linux 5.14 on), while its uid and files stay as they were.
// kUncapped where the kernel does not allow it (an older kernel, no
// unprivileged user namespaces, systemd's RestrictNamespaces=), or where
// writing its maps would need it dumpable (it left root: its /proc files
// are root's, and making it dumpable for that would open it to other
// processes of its uid). Fails only when the namespace was entered and then
// could not be finished (it cannot be left again).
absl::StatusOr<TaskCount> CountTasksApart() {
  if (!CountsTasksPerUserNamespace() || prctl(PR_GET_DUMPABLE) != 1 ||
      !UserNamespaceWorks()) {
    return TaskCount::kUncapped;
  }
  if (!UnshareMappedUserNamespace()) {
    return Failed("a user namespace of its own (it worked in a trial)");
  }
  return TaskCount::kOwnUserNamespace;
}

}  // namespace

absl::StatusOr<TaskCount> EnterSandbox(const SandboxOptions& options) {
  CloseOtherDescriptors(options.keep_fd);
  const rlimit no_core{0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);
  // Its own task and memory limits, before anything of a tenant's runs.
  if (absl::Status joined = JoinCgroups(options.cgroup_procs); !joined.ok()) {
    return joined;
  }
  // The first the kernel kills when memory runs out, never hrxd: set while
  // root, a tenant cannot lower it again (and /proc is read-only to it).
  if (int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
      fd >= 0) {
    (void)!write(fd, "1000", 4);
    close(fd);
  }
  if (geteuid() == 0 && options.uid != 0) {
    if (setgroups(options.groups.size(), options.groups.data()) != 0) {
      return Failed("setgroups");
    }
    if (setresgid(options.gid, options.gid, options.gid) != 0) {
      return Failed("setresgid");
    }
    if (setresuid(options.uid, options.uid, options.uid) != 0) {
      return Failed("setresuid");
    }
    // Never root afterwards, whatever the uid asked for was ((uid_t)-1
    // would have changed nothing).
    uid_t real = 0, effective = 0, saved = 0;
    if (getresuid(&real, &effective, &saved) != 0 || real == 0 ||
        effective == 0 || saved == 0) {
      errno = EPERM;
      return Failed("still root after setresuid");
    }
  }
  // The process limit counts every task of the uid (in its user
  // namespace), so it is set only where that count is this executor's
  // alone: a uid of its own, or a namespace of its own. The namespace comes
  // first: the limit its parent level keeps is the one in force as it is
  // made, hrxd's, never the executor's (lowering needs no privilege).
  // With a control group of its own, pids.max counts its tasks already.
  TaskCount count = TaskCount::kOwnUid;
  if (!options.own_uid) {
    count = TaskCount::kInControlGroup;
    if (options.cgroup_procs.empty()) {
      absl::StatusOr<TaskCount> apart = CountTasksApart();
      if (!apart.ok()) return apart.status();
      count = *apart;
    }
  }
  if (count == TaskCount::kOwnUid || count == TaskCount::kOwnUserNamespace) {
    const rlimit threads{kExecutorMaxThreads, kExecutorMaxThreads};
    if (setrlimit(RLIMIT_NPROC, &threads) != 0) return Failed("RLIMIT_NPROC");
  }
  // hrxd's death ends the executor: nothing of a tenant outlives it. Armed
  // after the credentials change, which would clear it.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return Failed("PR_SET_PDEATHSIG");
  // hrxd may have died before the death signal was armed.
  if (options.parent != 0 && getppid() != options.parent) {
    return Failed("hrxd already exited");
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Failed("PR_SET_NO_NEW_PRIVS");
  }
  // Not dumpable: /proc/<pid>/mem, fd and maps are root's, and another
  // executor of the same user cannot ptrace or read this one.
  if (prctl(PR_SET_DUMPABLE, 0) != 0) return Failed("PR_SET_DUMPABLE");
  return count;
}

absl::Status RestrictSystemCalls() {
#ifdef __x86_64__
  std::vector<sock_filter> filter = CompileSyscallPolicy(getpid());
  sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  // On every thread of the process, those the backend already started (its
  // workers run kernels) included: a filter without TSYNC covers only the
  // calling thread and the threads it makes afterwards.
  const long synced = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                              SECCOMP_FILTER_FLAG_TSYNC, &program);
  if (synced != 0) {
    if (synced > 0) errno = ESRCH;  // the id of a thread it could not sync
    return Failed("seccomp(SECCOMP_FILTER_FLAG_TSYNC)");
  }
#endif
  return absl::OkStatus();
}

}  // namespace hrx::executor
