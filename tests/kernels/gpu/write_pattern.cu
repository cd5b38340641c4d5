// write_pattern: out[i] = (uint8_t)(i * 31 + seed) for i < n.
// Compiled for a fixed block of 64 work-items.
// Arguments: n (u64), seed (u32), out (buffer of bytes).
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(write_pattern) = {
    HRX_GPU_KERNEL_ABI,
    {64, 1, 1},
    3,
    {HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_BUFFER},
    {8, 4, 0}};

extern "C" __global__ void __launch_bounds__(64)
    write_pattern(uint64_t n, uint32_t seed, hrx_gpu_buffer out) {
  if (n > out.length) __trap();
  const uint64_t i = uint64_t{blockIdx.x} * 64 + threadIdx.x;
  if (i < n)
    static_cast<uint8_t*>(out.data)[i] = static_cast<uint8_t>(i * 31 + seed);
}
