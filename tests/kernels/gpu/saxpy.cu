// saxpy: y[i] = a * x[i] + y[i] for i < n. Any block size.
// Arguments: n (u32), a (f32), x (buffer of floats), y (buffer of floats).
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(saxpy) = {HRX_GPU_KERNEL_ABI,
                              {0, 0, 0},
                              4,
                              {HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_SCALAR,
                               HRX_GPU_ARG_BUFFER, HRX_GPU_ARG_BUFFER},
                              {4, 4, 0, 0}};

extern "C" __global__ void saxpy(uint32_t n, float a, hrx_gpu_buffer x,
                                 hrx_gpu_buffer y) {
  const uint64_t bytes = uint64_t{n} * sizeof(float);
  if (bytes > x.length || bytes > y.length) __trap();
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) {
    float* out = static_cast<float*>(y.data);
    out[i] = a * static_cast<const float*>(x.data)[i] + out[i];
  }
}
