// spin: a kernel that never finishes (the executor watchdog's case).
// Arguments: out (buffer), written never.
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(spin) = {
    HRX_GPU_KERNEL_ABI, {1, 1, 1}, 1, {HRX_GPU_ARG_BUFFER}, {0}};

extern "C" __global__ void spin(hrx_gpu_buffer out) {
  volatile uint32_t forever = 1;
  while (forever) {
    __nanosleep(1000);
  }
  if (out.length == 0) __trap();
}
