// What an executor process gives up before it runs tenant code: every
// descriptor but the ones it needs, its privileges (hrxd's user, when that
// is root), the right to gain any back, to be inspected (ptrace,
// /proc/pid/mem) or to core-dump, and every system call outside an
// allowlist (seccomp, syscall_policy.h).
#ifndef HRX_DAEMON_EXECUTOR_SANDBOX_H_
#define HRX_DAEMON_EXECUTOR_SANDBOX_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hrx::executor {

struct SandboxOptions {
  int keep_fd = -1;  // the socket to hrxd
  pid_t parent = 0;  // hrxd's pid as this process sees it (0: unchecked)
  // Switched to when running as root (0: stay; never root afterwards).
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (device node access)
  // The uid is this executor's alone: its process limit (threads; it can
  // make no processes) is then its own, kExecutorMaxThreads. Without, the
  // executor counts its tasks apart in a user namespace of its own where
  // the kernel allows (EnterSandbox).
  bool own_uid = false;
  // cgroup.procs files of the executor's own groups (ExecutorCgroups),
  // joined first, while the process still may.
  std::vector<std::string> cgroup_procs;
};

// Threads (tasks) an executor with a uid of its own may run.
inline constexpr rlim_t kExecutorMaxThreads = 1024;

// Whose tasks an executor's process limit (RLIMIT_NPROC, kExecutorMaxThreads)
// counts once EnterSandbox is done.
enum class TaskCount {
  kOwnUid,            // a uid of its own
  kOwnUserNamespace,  // its uid's, within a user namespace of its own
  kInControlGroup,    // not set: its control group's pids.max caps it
  kUncapped,          // its uid's, shared with other executors: not set
};

// Before the backend opens: closes other descriptors, dies with hrxd,
// switches user, caps its tasks where they can be counted apart from other
// executors', forbids new privileges and inspection.
absl::StatusOr<TaskCount> EnterSandbox(const SandboxOptions& options);

// After the backend opens (its runtime may need more at start): installs
// the system call allowlist (syscall_policy.h). A no-op where the
// architecture is not x86-64.
absl::Status RestrictSystemCalls();

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_SANDBOX_H_
