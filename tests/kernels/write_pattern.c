/* write_pattern: out[i] = (uint8_t)(i * 31 + seed) for i < n.
 * Compiled for a fixed block of 64 work-items.
 * Arguments: n (u64), seed (u32), out (buffer of bytes). */
#include <string.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {
    {HRX_CPU_ARG_SCALAR, 8}, {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info write_pattern_info = {
    HRX_CPU_KERNEL_ABI, {64, 1, 1}, 3, kArgs};

int write_pattern(const hrx_cpu_workgroup* wg) {
  uint64_t n;
  uint32_t seed;
  memcpy(&n, wg->constants, 8);
  memcpy(&seed, wg->constants + 8, 4);
  if (n > wg->bindings[0].length) return 1;
  uint8_t* out = wg->bindings[0].data;
  const uint64_t first = (uint64_t)wg->group[0] * 64;
  for (uint64_t i = first; i < first + 64 && i < n; ++i)
    out[i] = (uint8_t)(i * 31 + seed);
  return 0;
}
