/* crash: a kernel that faults its executor, as a buggy or hostile kernel
 * would. mode (u32) 0: a store through a null pointer; 1: a store 1 GiB
 * past its buffer; 2: abort().
 * Arguments: mode (u32), out (buffer). */
#include <stdint.h>
#include <stdlib.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_SCALAR, 4},
                                    {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info crash_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 2, kArgs};

int crash(const hrx_cpu_workgroup* wg) {
  uint32_t mode;
  __builtin_memcpy(&mode, wg->constants, 4);
  volatile uint8_t* target = 0;
  if (mode == 1) target = wg->bindings[0].data + ((uint64_t)1 << 30);
  if (mode == 2) abort();
  *target = 1;
  return 0;
}
