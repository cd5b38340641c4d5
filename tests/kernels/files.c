/* files: a kernel that reaches for files outside its executor's allowance:
 * a world-readable system file, hrxd's config and socket (paths given),
 * and a new file in /tmp. For each it writes, as a u32, 0 when the call
 * succeeded, else the errno it got:
 *   [0] open /etc/passwd       [1] open the config (path 1)
 *   [2] create /tmp/hrx-probe  [3] unlink the socket (path 2)
 *   [4] open /dev/shm          [5] read a system library (must work: 0)
 * Arguments: paths (buffer: two NUL-terminated paths), out (>= 24 bytes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_BUFFER, 0},
                                    {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info files_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 2, kArgs};

static uint32_t TryOpen(const char* path, int flags) {
  const int fd = open(path, flags, 0600);
  if (fd < 0) return (uint32_t)errno;
  close(fd);
  return 0;
}

int files(const hrx_cpu_workgroup* wg) {
  const char* config = (const char*)wg->bindings[0].data;
  const size_t length = wg->bindings[0].length;
  if (length < 2 || config[length - 1] != '\0') return 1;
  const char* socket = config + strlen(config) + 1;
  if (socket >= config + length) return 1;
  uint32_t r[6];
  if (wg->bindings[1].length < sizeof(r)) return 1;
  r[0] = TryOpen("/etc/passwd", O_RDONLY);
  r[1] = TryOpen(config, O_RDONLY);
  r[2] = TryOpen("/tmp/hrx-executor-probe", O_CREAT | O_WRONLY);
  r[3] = unlink(socket) == 0 ? 0 : (uint32_t)errno;
  r[4] = TryOpen("/dev/shm", O_RDONLY | O_DIRECTORY);
  r[5] = TryOpen("/usr/lib/os-release", O_RDONLY);
  memcpy(wg->bindings[1].data, r, sizeof(r));
  return 0;
}
