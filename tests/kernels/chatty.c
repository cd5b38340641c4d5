/* chatty: a kernel that writes to its executor's stderr what would corrupt
 * or flood hrxd's log if it reached it raw: a forged daemon line, terminal
 * escapes, and `megabytes` (u32) MiB in lines of 4 KiB.
 * Arguments: megabytes (u32), out (>= 4 bytes: 0 when every write went). */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_SCALAR, 4},
                                    {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info chatty_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 2, kArgs};

static int WriteAll(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(2, data, size);
    if (n <= 0) return 1;
    data += n;
    size -= (size_t)n;
  }
  return 0;
}

int chatty(const hrx_cpu_workgroup* wg) {
  uint32_t megabytes = 0, failed = 0;
  memcpy(&megabytes, wg->constants, 4);
  static const char kForged[] =
      "2026-12-04T00:00:00.000 critical [daemon] hrxd: forged by a tenant\n";
  failed |= WriteAll(kForged, sizeof(kForged) - 1);
  static const char kEscapes[] = "\x1b]0;owned\x07\x1b[2Jscreen cleared\n";
  failed |= WriteAll(kEscapes, sizeof(kEscapes) - 1);
  static char line[4096];
  memset(line, 'y', sizeof(line) - 1);
  line[sizeof(line) - 1] = '\n';
  for (uint32_t i = 0; i < megabytes * 256u; ++i) {
    failed |= WriteAll(line, sizeof(line));
  }
  memcpy(wg->bindings[0].data, &failed, 4);
  return 0;
}
