// What an executor may reach of the filesystem once its backend is open: a
// Landlock ruleset (Linux 5.13 and later) that lets it read the system's
// libraries, its own /proc directory, the machine-wide /proc files a
// runtime reads (cpuinfo, meminfo, stat, sys, driver, filesystems; never
// another process's directory or the list of pids) and /sys, and open
// device nodes a
// GPU runtime needs, and nothing else: no file of hrxd's (its config, keys,
// sockets), no other tenant's, no /tmp, and no creating, renaming or
// removing anything anywhere. It holds even when executors share hrxd's uid
// (hrxd not root), where file permissions alone would not.
#ifndef HRX_DAEMON_EXECUTOR_FILESYSTEM_POLICY_H_
#define HRX_DAEMON_EXECUTOR_FILESYSTEM_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hrx::executor {

struct FilesystemRule {
  std::string path;
  bool write = false;  // open for writing (device nodes); never create
};

// The paths an executor may read (and the device nodes it may open for
// writing), those of them that exist here.
std::vector<FilesystemRule> ExecutorFilesystemPolicy();

// Restricts this process (and threads it makes later) to the policy.
// Returns the Landlock ABI version applied, or 0 where the kernel has no
// Landlock (nothing is restricted then: the seccomp filter and the uid
// still apply).
absl::StatusOr<int> RestrictFilesystem();

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_FILESYSTEM_POLICY_H_
