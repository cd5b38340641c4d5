// The system calls an executor may make once its backend is open: an
// allowlist. Each call it names is allowed outright or with its first
// argument checked (signals only to itself, threads but no processes or
// namespaces, no request that signals others); every other call fails with
// EPERM (clone3 with ENOSYS, so the C library falls back to a clone whose
// flags the filter can read). docs/security.md lists this table, and
// syscall_policy_test checks the list against it.
#ifndef HRX_DAEMON_EXECUTOR_SYSCALL_POLICY_H_
#define HRX_DAEMON_EXECUTOR_SYSCALL_POLICY_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace hrx::executor {

enum class SyscallCheck : uint8_t {
  kAllow,        // any arguments
  kSelf,         // first argument is this process's pid
  kSelfOrZero,   // ... or 0 (prlimit64: "this process")
  kThreadsOnly,  // clone: CLONE_THREAD set, no namespace flags
  // ioctl: no request that signals another process or types into a
  // terminal (FIOSETOWN, SIOCSPGRP, FIOASYNC, TIOCSPGRP, TIOCSTI, TIOCLINUX,
  // TIOCSCTTY), whatever the descriptor.
  kIoctlSafe,
  // fcntl: no F_SETOWN, F_SETOWN_EX, F_SETSIG (a signal to another process
  // when I/O arrives).
  kFcntlSafe,
  kPrctlSafe,  // prctl: anything but PR_SET_DUMPABLE, PR_SET_PTRACER
  kEnosys,     // refused with ENOSYS (clone3: glibc falls back)
};

struct SyscallRule {
  int number;
  const char* name;
  SyscallCheck check;
};

// The table, in the order the filter tests it (the most frequent first).
// Empty where the architecture is not x86-64.
const std::vector<SyscallRule>& ExecutorSyscallPolicy();

// The seccomp program for `self` (the executor's pid): the architecture
// check, the table, then EPERM for everything else.
std::vector<sock_filter> CompileSyscallPolicy(pid_t self);

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_SYSCALL_POLICY_H_
