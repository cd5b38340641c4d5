/* wait_flag: spins until flag[0] is nonzero, then returns; a gate that holds
 * its queue until another queue writes the flag. Gives up (returns 2) after
 * about 60 seconds so a broken test cannot hang the daemon forever.
 * Arguments: flag (buffer, at least 1 byte). */
#include <time.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info wait_flag_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 1, kArgs};

int wait_flag(const hrx_cpu_workgroup* wg) {
  if (wg->bindings[0].length < 1) return 1;
  volatile const uint8_t* flag = wg->bindings[0].data;
  const struct timespec pause = {0, 1000000}; /* 1 ms */
  for (int i = 0; i < 60000; ++i) {
    if (*flag != 0) return 0;
    nanosleep(&pause, 0);
  }
  return 2;
}
