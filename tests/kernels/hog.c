/* hog: a kernel that takes heap memory outside any budget, `mib` MiB one at
 * a time, touching every page; returns 0 if it got all of it.
 * Arguments: mib (u32), out (buffer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_SCALAR, 4},
                                    {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info hog_info = {HRX_CPU_KERNEL_ABI, {1, 1, 1}, 2, kArgs};

int hog(const hrx_cpu_workgroup* wg) {
  uint32_t mib;
  __builtin_memcpy(&mib, wg->constants, 4);
  for (uint32_t i = 0; i < mib; ++i) {
    char* chunk = malloc(1 << 20);
    if (chunk == 0) return 1;
    memset(chunk, (int)i | 1, 1 << 20); /* kept: never freed */
  }
  return 0;
}
