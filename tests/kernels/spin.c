/* spin: a kernel that never finishes (the executor watchdog's case).
 * Arguments: out (buffer), written never. */
#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info spin_info = {HRX_CPU_KERNEL_ABI, {1, 1, 1}, 1, kArgs};

int spin(const hrx_cpu_workgroup* wg) {
  volatile int forever = 1;
  while (forever) {
  }
  return wg->bindings[0].length == 0;
}
