#include "daemon/executor/sandbox.h"

#include <dirent.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
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

// System calls no device work needs, refused with EPERM.
std::vector<int> DeniedSystemCalls() {
  return {
#ifdef __x86_64__
      SYS_ptrace,
      SYS_process_vm_readv,
      SYS_process_vm_writev,
      SYS_kexec_load,
      SYS_kexec_file_load,
      SYS_init_module,
      SYS_finit_module,
      SYS_delete_module,
      SYS_mount,
      SYS_umount2,
      SYS_pivot_root,
      SYS_chroot,
      SYS_swapon,
      SYS_swapoff,
      SYS_reboot,
      SYS_setns,
      SYS_unshare,
      SYS_bpf,
      SYS_perf_event_open,
      SYS_keyctl,
      SYS_add_key,
      SYS_request_key,
      SYS_userfaultfd,
      SYS_open_by_handle_at,
      SYS_name_to_handle_at,
      SYS_acct,
      SYS_settimeofday,
      SYS_clock_settime,
      SYS_clock_adjtime,
      SYS_adjtimex,
      SYS_iopl,
      SYS_ioperm,
      SYS_personality,
      SYS_quotactl,
      SYS_vhangup,
      SYS_fanotify_init,
      SYS_setuid,
      SYS_setgid,
      SYS_setreuid,
      SYS_setregid,
      SYS_setresuid,
      SYS_setresgid,
      SYS_setgroups,
#endif
  };
}

}  // namespace

absl::Status EnterSandbox(const SandboxOptions& options) {
  CloseOtherDescriptors(options.keep_fd);
  const rlimit no_core{0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);
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
  return absl::OkStatus();
}

absl::Status RestrictSystemCalls() {
#ifdef __x86_64__
  const std::vector<int> denied = DeniedSystemCalls();
  const unsigned n = static_cast<unsigned>(denied.size());
  std::vector<sock_filter> filter;
  filter.push_back(
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  filter.push_back(
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  // Signals and resource limits only for itself: kill, tgkill and prlimit64
  // name a pid first, which must be 0 (itself) or its own.
  const uint32_t self = static_cast<uint32_t>(getpid());
  for (int call : {SYS_kill, SYS_tgkill, SYS_prlimit64}) {
    filter.push_back(
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    filter.push_back(
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(call), 0, 5));
    filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                              offsetof(struct seccomp_data, args[0])));
    // kill(0) would signal the process group: only prlimit64 means itself
    // by 0.
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                              call == SYS_prlimit64 ? 0u : self, 2, 0));
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 1, 0));
    filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
  filter.push_back(
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  // Indices: denied checks at 4..3+n, the socket check at 4+n, allow at
  // 5+n, deny at 6+n, then the socket family check.
  for (unsigned i = 0; i < n; ++i) {
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                              static_cast<unsigned>(denied[i]),
                              static_cast<uint8_t>(n + 1 - i), 0));
  }
  filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 2, 0));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
  // Only Unix sockets: an executor has no business on the network.
  filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                            offsetof(struct seccomp_data, args[0])));
  filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
  sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    return Failed("PR_SET_SECCOMP");
  }
#endif
  return absl::OkStatus();
}

}  // namespace hrx::executor
