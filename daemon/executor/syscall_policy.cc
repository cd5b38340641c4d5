#include "daemon/executor/syscall_policy.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>

namespace hrx::executor {
namespace {

#define HRX_RULE(call, check) \
  SyscallRule { SYS_##call, #call, SyscallCheck::check }

// Namespace flags: a thread never needs one, and a new user namespace is
// the door to most kernel attack surface.
constexpr uint32_t kNamespaceFlags =
    CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
    CLONE_NEWUTS | CLONE_NEWCGROUP;

sock_filter Load(uint32_t offset) {
  return BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset);
}
sock_filter Return(uint32_t action) {
  return BPF_STMT(BPF_RET | BPF_K, action);
}
sock_filter JumpIfEqual(uint32_t value, uint8_t if_true, uint8_t if_false) {
  return BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, if_true, if_false);
}
sock_filter JumpIfAnyBit(uint32_t mask, uint8_t if_true, uint8_t if_false) {
  return BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, if_true, if_false);
}

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kDeny = SECCOMP_RET_ERRNO | EPERM;
constexpr uint32_t kArg0 = offsetof(struct seccomp_data, args[0]);

constexpr uint32_t kArg1 = offsetof(struct seccomp_data, args[1]);

// Requests that make the kernel signal another process (its owner when I/O
// arrives) or type into a terminal: refused whatever the descriptor (a dup
// of a standard stream is any number).
constexpr uint32_t kUnsafeIoctls[] = {FIOSETOWN, SIOCSPGRP, FIOASYNC, TIOCSPGRP,
                                      TIOCSTI,   TIOCLINUX, TIOCSCTTY};
constexpr uint32_t kUnsafeFcntls[] = {F_SETOWN, F_SETOWN_EX, F_SETSIG};

// Refuses the call when its second argument (low 32 bits, as the kernel
// reads a request or command) is one of `values`.
template <size_t N>
std::vector<sock_filter> RefuseArg1(const uint32_t (&values)[N]) {
  std::vector<sock_filter> body = {Load(kArg1)};
  for (size_t i = 0; i < N; ++i) {
    // Equal: jump past the remaining checks and the allow, to the deny.
    body.push_back(JumpIfEqual(values[i], static_cast<uint8_t>(N - i), 0));
  }
  body.push_back(Return(kAllow));
  body.push_back(Return(kDeny));
  return body;
}

// What runs once a rule's number matched: ends in a return on every path.
std::vector<sock_filter> Body(SyscallCheck check, uint32_t self) {
  switch (check) {
    case SyscallCheck::kAllow:
      return {Return(kAllow)};
    case SyscallCheck::kEnosys:
      return {Return(SECCOMP_RET_ERRNO | ENOSYS)};
    case SyscallCheck::kSelf:
      // kill(0) or a negative pid names a group or everyone: only itself.
      return {Load(kArg0), JumpIfEqual(self, 0, 1), Return(kAllow),
              Return(kDeny)};
    case SyscallCheck::kSelfOrZero:
      return {Load(kArg0), JumpIfEqual(self, 1, 0), JumpIfEqual(0, 0, 1),
              Return(kAllow), Return(kDeny)};
    case SyscallCheck::kThreadsOnly:
      return {Load(kArg0), JumpIfAnyBit(kNamespaceFlags, 2, 0),
              JumpIfAnyBit(CLONE_THREAD, 0, 1), Return(kAllow), Return(kDeny)};
    case SyscallCheck::kIoctlSafe:
      return RefuseArg1(kUnsafeIoctls);
    case SyscallCheck::kFcntlSafe:
      return RefuseArg1(kUnsafeFcntls);
    case SyscallCheck::kPrctlSafe:
      return {Load(kArg0), JumpIfEqual(PR_SET_DUMPABLE, 1, 0),
              JumpIfEqual(PR_SET_PTRACER, 0, 1), Return(kDeny), Return(kAllow)};
  }
  return {Return(kDeny)};
}

}  // namespace

const std::vector<SyscallRule>& ExecutorSyscallPolicy() {
  static const auto* const policy = new std::vector<SyscallRule>{
#ifdef __x86_64__
      // Synchronisation, memory and I/O on descriptors it holds.
      HRX_RULE(futex, kAllow),
      HRX_RULE(read, kAllow),
      HRX_RULE(write, kAllow),
      HRX_RULE(recvmsg, kAllow),
      HRX_RULE(sendmsg, kAllow),
      HRX_RULE(poll, kAllow),
      HRX_RULE(ppoll, kAllow),
      HRX_RULE(mmap, kAllow),
      HRX_RULE(munmap, kAllow),
      HRX_RULE(mprotect, kAllow),
      HRX_RULE(mremap, kAllow),
      HRX_RULE(madvise, kAllow),
      HRX_RULE(brk, kAllow),
      HRX_RULE(ioctl, kIoctlSafe),
      HRX_RULE(sched_yield, kAllow),
      HRX_RULE(clock_gettime, kAllow),
      HRX_RULE(clock_getres, kAllow),
      HRX_RULE(clock_nanosleep, kAllow),
      HRX_RULE(nanosleep, kAllow),
      HRX_RULE(gettimeofday, kAllow),
      HRX_RULE(time, kAllow),
      HRX_RULE(readv, kAllow),
      HRX_RULE(writev, kAllow),
      HRX_RULE(pread64, kAllow),
      HRX_RULE(pwrite64, kAllow),
      HRX_RULE(preadv, kAllow),
      HRX_RULE(pwritev, kAllow),
      HRX_RULE(lseek, kAllow),
      HRX_RULE(close, kAllow),
      HRX_RULE(dup, kAllow),
      HRX_RULE(dup2, kAllow),
      HRX_RULE(dup3, kAllow),
      HRX_RULE(fcntl, kFcntlSafe),
      HRX_RULE(recvfrom, kAllow),
      HRX_RULE(sendto, kAllow),
      HRX_RULE(shutdown, kAllow),
      HRX_RULE(getsockopt, kAllow),
      HRX_RULE(setsockopt, kAllow),
      HRX_RULE(getsockname, kAllow),
      HRX_RULE(getpeername, kAllow),
      HRX_RULE(mlock, kAllow),
      HRX_RULE(munlock, kAllow),
      HRX_RULE(mincore, kAllow),
      HRX_RULE(msync, kAllow),
      HRX_RULE(membarrier, kAllow),
      HRX_RULE(get_mempolicy, kAllow),
      HRX_RULE(set_mempolicy, kAllow),
      HRX_RULE(mbind, kAllow),
      // Threads (never processes), signals to itself.
      HRX_RULE(clone, kThreadsOnly),
      HRX_RULE(clone3, kEnosys),
      HRX_RULE(set_robust_list, kAllow),
      HRX_RULE(get_robust_list, kAllow),
      HRX_RULE(rseq, kAllow),
      HRX_RULE(set_tid_address, kAllow),
      HRX_RULE(arch_prctl, kAllow),
      HRX_RULE(exit, kAllow),
      HRX_RULE(exit_group, kAllow),
      HRX_RULE(restart_syscall, kAllow),
      HRX_RULE(rt_sigaction, kAllow),
      HRX_RULE(rt_sigprocmask, kAllow),
      HRX_RULE(rt_sigreturn, kAllow),
      HRX_RULE(rt_sigpending, kAllow),
      HRX_RULE(rt_sigsuspend, kAllow),
      HRX_RULE(pause, kAllow),  // as rt_sigsuspend; refused, a wait spins
      HRX_RULE(rt_sigtimedwait, kAllow),
      HRX_RULE(sigaltstack, kAllow),
      HRX_RULE(kill, kSelf),
      HRX_RULE(tgkill, kSelf),
      HRX_RULE(rt_sigqueueinfo, kSelf),
      HRX_RULE(rt_tgsigqueueinfo, kSelf),
      HRX_RULE(prlimit64, kSelfOrZero),
      HRX_RULE(prctl, kPrctlSafe),
      HRX_RULE(getpid, kAllow),
      HRX_RULE(gettid, kAllow),
      HRX_RULE(getppid, kAllow),
      HRX_RULE(getuid, kAllow),
      HRX_RULE(geteuid, kAllow),
      HRX_RULE(getgid, kAllow),
      HRX_RULE(getegid, kAllow),
      HRX_RULE(getgroups, kAllow),
      HRX_RULE(getresuid, kAllow),
      HRX_RULE(getresgid, kAllow),
      HRX_RULE(getpgrp, kAllow),
      HRX_RULE(getrlimit, kAllow),
      HRX_RULE(getrusage, kAllow),
      HRX_RULE(times, kAllow),
      HRX_RULE(sched_getaffinity, kAllow),
      HRX_RULE(sched_setaffinity, kSelfOrZero),
      HRX_RULE(sched_getparam, kAllow),
      HRX_RULE(sched_getscheduler, kAllow),
      HRX_RULE(sched_get_priority_max, kAllow),
      HRX_RULE(sched_get_priority_min, kAllow),
      HRX_RULE(getcpu, kAllow),
      HRX_RULE(getrandom, kAllow),
      HRX_RULE(uname, kAllow),
      HRX_RULE(sysinfo, kAllow),
      HRX_RULE(capget, kAllow),
      // Waiting on its own descriptors and timers.
      HRX_RULE(select, kAllow),
      HRX_RULE(pselect6, kAllow),
      HRX_RULE(epoll_create1, kAllow),
      HRX_RULE(epoll_ctl, kAllow),
      HRX_RULE(epoll_wait, kAllow),
      HRX_RULE(epoll_pwait, kAllow),
      HRX_RULE(eventfd2, kAllow),
      HRX_RULE(pipe2, kAllow),
      HRX_RULE(timerfd_create, kAllow),
      HRX_RULE(timerfd_settime, kAllow),
      HRX_RULE(timerfd_gettime, kAllow),
      HRX_RULE(timer_create, kAllow),
      HRX_RULE(timer_settime, kAllow),
      HRX_RULE(timer_gettime, kAllow),
      HRX_RULE(timer_getoverrun, kAllow),
      HRX_RULE(timer_delete, kAllow),
      HRX_RULE(setitimer, kAllow),
      HRX_RULE(getitimer, kAllow),
      HRX_RULE(alarm, kAllow),
      // Files, as its user may (kernels are loaded through memfds; a GPU
      // runtime opens device nodes and keeps a compile cache).
      HRX_RULE(openat, kAllow),
      HRX_RULE(open, kAllow),
      HRX_RULE(memfd_create, kAllow),
      HRX_RULE(ftruncate, kAllow),
      HRX_RULE(fchmod, kAllow),
      HRX_RULE(fallocate, kAllow),
      HRX_RULE(fstat, kAllow),
      HRX_RULE(newfstatat, kAllow),
      HRX_RULE(stat, kAllow),
      HRX_RULE(lstat, kAllow),
      HRX_RULE(statx, kAllow),
      HRX_RULE(statfs, kAllow),
      HRX_RULE(fstatfs, kAllow),
      HRX_RULE(access, kAllow),
      HRX_RULE(faccessat, kAllow),
      HRX_RULE(faccessat2, kAllow),
      HRX_RULE(readlink, kAllow),
      HRX_RULE(readlinkat, kAllow),
      HRX_RULE(getdents64, kAllow),
      HRX_RULE(getcwd, kAllow),
      HRX_RULE(chdir, kAllow),
      HRX_RULE(fchdir, kAllow),
      HRX_RULE(umask, kAllow),
      HRX_RULE(mkdir, kAllow),
      HRX_RULE(mkdirat, kAllow),
      HRX_RULE(unlink, kAllow),
      HRX_RULE(unlinkat, kAllow),
      HRX_RULE(rename, kAllow),
      HRX_RULE(renameat, kAllow),
      HRX_RULE(renameat2, kAllow),
      HRX_RULE(flock, kAllow),
      HRX_RULE(fsync, kAllow),
      HRX_RULE(fdatasync, kAllow),
      HRX_RULE(fadvise64, kAllow),
      HRX_RULE(sendfile, kAllow),
      HRX_RULE(copy_file_range, kAllow),
      HRX_RULE(wait4, kAllow),
      HRX_RULE(waitid, kAllow),
#endif
  };
  return *policy;
}

#undef HRX_RULE

std::vector<sock_filter> CompileSyscallPolicy(pid_t self) {
  std::vector<sock_filter> program;
#ifdef __x86_64__
  program.push_back(Load(offsetof(struct seccomp_data, arch)));
  program.push_back(JumpIfEqual(AUDIT_ARCH_X86_64, 1, 0));
  program.push_back(Return(SECCOMP_RET_KILL_PROCESS));
  for (const SyscallRule& rule : ExecutorSyscallPolicy()) {
    const std::vector<sock_filter> body =
        Body(rule.check, static_cast<uint32_t>(self));
    // Each rule reloads the number: a body may have loaded an argument.
    program.push_back(Load(offsetof(struct seccomp_data, nr)));
    program.push_back(JumpIfEqual(static_cast<uint32_t>(rule.number), 0,
                                  static_cast<uint8_t>(body.size())));
    program.insert(program.end(), body.begin(), body.end());
  }
  program.push_back(Return(kDeny));
#endif
  return program;
}

}  // namespace hrx::executor
