/* snoop: a kernel that tries to reach past its executor: hrxd's memory,
 * descriptors and environment, another executor's memory, a debugger's
 * hold on it, and the network. For each attempt it writes 0 when it
 * succeeded, else the errno it got, as u32s into out:
 *   [0] open /proc/<hrxd>/mem      [1] open /proc/<hrxd>/environ
 *   [2] open /proc/<hrxd>/fd       [3] open /proc/<other>/mem
 *   [4] ptrace attach <other>      [5] socket(AF_INET)
 *   [6] kill(<hrxd>, 0)            [7] kill(<other>, 0)
 *   [8] open /proc/<hrxd>/cmdline  [9] list /proc (other processes' pids)
 * Arguments: hrxd pid (u32), other executor pid (u32), out (>= 40 bytes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {
    {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info snoop_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 3, kArgs};

static uint32_t TryOpen(const char* format, uint32_t pid, int flags) {
  char path[64];
  snprintf(path, sizeof(path), format, pid);
  const int fd = open(path, flags);
  if (fd < 0) return (uint32_t)errno;
  close(fd);
  return 0;
}

int snoop(const hrx_cpu_workgroup* wg) {
  uint32_t daemon, other, result[10];
  memcpy(&daemon, wg->constants, 4);
  memcpy(&other, wg->constants + 4, 4);
  if (wg->bindings[0].length < sizeof(result)) return 1;
  result[0] = TryOpen("/proc/%u/mem", daemon, O_RDONLY);
  result[1] = TryOpen("/proc/%u/environ", daemon, O_RDONLY);
  result[2] = TryOpen("/proc/%u/fd", daemon, O_RDONLY | O_DIRECTORY);
  result[3] = TryOpen("/proc/%u/mem", other, O_RDONLY);
  result[4] = ptrace(PTRACE_ATTACH, other, 0, 0) == 0 ? 0 : (uint32_t)errno;
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  result[5] = s >= 0 ? 0 : (uint32_t)errno;
  if (s >= 0) close(s);
  result[6] = kill((pid_t)daemon, 0) == 0 ? 0 : (uint32_t)errno;
  result[7] = kill((pid_t)other, 0) == 0 ? 0 : (uint32_t)errno;
  result[8] = TryOpen("/proc/%u/cmdline", daemon, O_RDONLY);
  result[9] = TryOpen("/proc", 0, O_RDONLY | O_DIRECTORY);
  memcpy(wg->bindings[0].data, result, sizeof(result));
  return 0;
}
