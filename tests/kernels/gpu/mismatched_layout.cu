// mismatched_layout: declares two 4-byte scalars, but its second parameter
// is a buffer. The daemon must refuse to load it (kernel_layout_mismatch).
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(mismatched_layout) = {
    HRX_GPU_KERNEL_ABI,
    {0, 0, 0},
    2,
    {HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_SCALAR},
    {4, 4}};

extern "C" __global__ void mismatched_layout(uint32_t n, hrx_gpu_buffer data) {
  if (threadIdx.x < n && data.length > 0)
    static_cast<uint8_t*>(data.data)[0] = 1;
}
