// crash: a kernel that faults its executor's GPU context, as a buggy or
// hostile kernel would. mode (u32) 0: a store through a null pointer;
// 1: a store 1 GiB past its buffer; 2: __trap().
// Arguments: mode (u32), out (buffer).
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(crash) = {HRX_GPU_KERNEL_ABI,
                              {1, 1, 1},
                              2,
                              {HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_BUFFER},
                              {4, 0}};

extern "C" __global__ void crash(uint32_t mode, hrx_gpu_buffer out) {
  volatile uint8_t* target = nullptr;
  if (mode == 1) target = static_cast<uint8_t*>(out.data) + (1ull << 30);
  if (mode == 2) __trap();
  *target = 1;
}
