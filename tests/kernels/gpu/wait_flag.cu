// wait_flag: spins until flag[0] is nonzero, then returns; a gate that holds
// its queue until another queue writes the flag. Traps after about 60
// seconds so a broken test cannot hang the daemon forever.
// Arguments: flag (buffer, at least 1 byte).
#include "hrx/gpu_kernel.h"

HRX_GPU_KERNEL_INFO(wait_flag) = {
    HRX_GPU_KERNEL_ABI, {1, 1, 1}, 1, {HRX_GPU_ARG_BUFFER}, {0}};

extern "C" __global__ void wait_flag(hrx_gpu_buffer flag) {
  if (flag.length < 1) __trap();
  volatile const uint8_t* value = static_cast<const uint8_t*>(flag.data);
  const long long start = clock64();
  // ~60 s at the H200's ~2 GHz clock; the point is an upper bound.
  while (*value == 0) {
    if (clock64() - start > 120000000000LL) __trap();
    __nanosleep(1000);
  }
}
