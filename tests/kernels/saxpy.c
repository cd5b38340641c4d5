/* saxpy: y[i] = a * x[i] + y[i] for i < n. Any block size.
 * Arguments: n (u32), a (f32), x (buffer of floats), y (buffer of floats). */
#include <string.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_SCALAR, 4},
                                    {HRX_CPU_ARG_SCALAR, 4},
                                    {HRX_CPU_ARG_BUFFER, 0},
                                    {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info saxpy_info = {
    HRX_CPU_KERNEL_ABI, {0, 0, 0}, 4, kArgs};

int saxpy(const hrx_cpu_workgroup* wg) {
  uint32_t n;
  float a;
  memcpy(&n, wg->constants, 4);
  memcpy(&a, wg->constants + 4, 4);
  const uint64_t bytes = (uint64_t)n * sizeof(float);
  if (bytes > wg->bindings[0].length || bytes > wg->bindings[1].length)
    return 1;
  const float* x = (const float*)wg->bindings[0].data;
  float* y = (float*)wg->bindings[1].data;
  const uint64_t width = wg->block[0];
  const uint64_t first = (uint64_t)wg->group[0] * width;
  for (uint64_t i = first; i < first + width && i < n; ++i)
    y[i] = a * x[i] + y[i];
  return 0;
}
