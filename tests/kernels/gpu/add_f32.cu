// add_f32: data[i] += value for i < n. Any block size. Traps (failing the
// dispatch) when n floats do not fit the binding.
// Arguments: n (u32), value (f32), data (buffer of floats).
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(add_f32) = {
    HRX_GPU_KERNEL_ABI,
    {0, 0, 0},
    3,
    {HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_BUFFER},
    {4, 4, 0}};

extern "C" __global__ void add_f32(uint32_t n, float value,
                                   hrx_gpu_buffer data) {
  if (uint64_t{n} * sizeof(float) > data.length) __trap();
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) static_cast<float*>(data.data)[i] += value;
}
