/* add_f32: data[i] += value for i < n. Any block size.
 * Arguments: n (u32), value (f32), data (buffer of floats). */
#include <string.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {
    {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_SCALAR, 4}, {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info add_f32_info = {
    HRX_CPU_KERNEL_ABI, {0, 0, 0}, 3, kArgs};

int add_f32(const hrx_cpu_workgroup* wg) {
  uint32_t n;
  float value;
  memcpy(&n, wg->constants, 4);
  memcpy(&value, wg->constants + 4, 4);
  if ((uint64_t)n * sizeof(float) > wg->bindings[0].length) return 1;
  float* data = (float*)wg->bindings[0].data;
  const uint64_t width = wg->block[0];
  const uint64_t first = (uint64_t)wg->group[0] * width;
  for (uint64_t i = first; i < first + width && i < n; ++i) data[i] += value;
  return 0;
}
