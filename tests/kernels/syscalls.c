/* syscalls: a kernel that makes the calls the executor's allowlist refuses
 * (docs/security.md): signals to other processes in every form, processes,
 * namespaces, sockets, io_uring, the mount APIs, ptrace, bpf, exec, SysV
 * IPC, userfaultfd, perf events, TIOCSTI on a standard stream and making
 * itself dumpable, and asking the kernel to signal another process when
 * I/O arrives (fcntl F_SETOWN / F_SETSIG, ioctl FIOSETOWN). Every workgroup
 * does it all (so the calls are made on the backend's worker threads too,
 * which start before the filter) and writes, as u32s at 4 * kCalls * its
 * index, 0 for a call that succeeded, else the errno it got (see kNames in
 * executor_sandbox_test.cc).
 * Arguments: hrxd pid (u32), other executor pid (u32),
 * out (>= 4 * kCalls * workgroups). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "hrx/cpu_kernel.h"

#define kCalls 29

static const hrx_cpu_arg kArgs[] = {
    {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info syscalls_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 3, kArgs};

/* 0 when `result` is a success (>= 0), else errno; descriptors it got are
 * closed. */
static uint32_t Outcome(long result) {
  if (result < 0) return (uint32_t)errno;
  return 0;
}

static uint32_t CloseOutcome(long fd) {
  const uint32_t outcome = Outcome(fd);
  if (fd >= 0) close((int)fd);
  return outcome;
}

int syscalls(const hrx_cpu_workgroup* wg) {
  uint32_t daemon, other, r[kCalls];
  memcpy(&daemon, wg->constants, 4);
  memcpy(&other, wg->constants + 4, 4);
  const uint64_t at = (uint64_t)wg->group[0] * sizeof(r);
  if (wg->bindings[0].length < at + sizeof(r)) return 1;
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  info.si_code = SI_QUEUE;
  r[0] = Outcome(syscall(SYS_tkill, other, 0));
  r[1] = Outcome(syscall(SYS_rt_sigqueueinfo, other, 0, &info));
  r[2] = Outcome(syscall(SYS_rt_tgsigqueueinfo, other, other, 0, &info));
  r[3] = CloseOutcome(syscall(SYS_pidfd_open, other, 0));
  const pid_t child = fork();
  if (child == 0) _exit(0);
  if (child > 0) waitpid(child, NULL, 0);
  r[4] = child < 0 ? (uint32_t)errno : 0;
  r[5] = Outcome(syscall(SYS_clone3, NULL, 0));
  r[6] = CloseOutcome(socket(AF_UNIX, SOCK_STREAM, 0));
  r[7] = CloseOutcome(socket(AF_INET, SOCK_STREAM, 0));
  struct io_uring_params params;
  memset(&params, 0, sizeof(params));
  r[8] = CloseOutcome(syscall(SYS_io_uring_setup, 1, &params));
  r[9] = CloseOutcome(syscall(SYS_open_tree, AT_FDCWD, "/", 0));
  r[10] = CloseOutcome(syscall(SYS_fsopen, "tmpfs", 0));
  r[11] = Outcome(mount("none", "/tmp", "tmpfs", 0, NULL));
  r[12] = Outcome(unshare(CLONE_NEWUSER));
  r[13] = Outcome(ptrace(PTRACE_ATTACH, other, 0, 0));
  r[14] = CloseOutcome(syscall(SYS_bpf, 0, NULL, 0));
  char* const argv[] = {"/bin/true", NULL};
  r[15] = Outcome(execve("/bin/true", argv, NULL));
  r[16] = Outcome(kill(0, 0));
  r[17] = Outcome(kill((pid_t)daemon, 0));
  const char c = ' ';
  r[18] = Outcome(ioctl(2, TIOCSTI, &c));
  r[19] = Outcome(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
  r[20] = Outcome(shmget(IPC_PRIVATE, 4096, 0600));
  r[21] = CloseOutcome(syscall(SYS_userfaultfd, 0));
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  r[22] = CloseOutcome(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
  r[23] = Outcome(syscall(SYS_pidfd_send_signal, 0, 0, NULL, 0));
  int pair[2];
  const int paired = socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
  r[24] = Outcome(paired);
  if (paired == 0) {
    close(pair[0]);
    close(pair[1]);
  }
  r[25] = Outcome(syscall(SYS_setns, 0, 0));
  int io[2];
  r[26] = r[27] = r[28] = 0xffffffffu; /* the pipe itself failed */
  if (pipe2(io, O_CLOEXEC) == 0) {
    r[26] = Outcome(fcntl(io[0], F_SETOWN, (int)daemon));
    r[27] = Outcome(fcntl(io[0], F_SETSIG, SIGKILL));
    const int owner = (int)daemon;
    r[28] = Outcome(ioctl(io[0], FIOSETOWN, &owner));
    close(io[0]);
    close(io[1]);
  }
  memcpy((uint8_t*)wg->bindings[0].data + at, r, sizeof(r));
  return 0;
}
