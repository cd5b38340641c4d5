/* How a GPU kernel for hrxd's HIP backend declares itself (see
 * docs/gpu-kernels.md). Include it in HIP or CUDA device code.
 *
 * A kernel is an extern "C" __global__ function in a code object (a cubin
 * on NVIDIA, an AMD code object on AMD). Its parameters, in declaration
 * order, are scalars of 4 or 8 bytes and buffers. A buffer parameter is an
 * hrx_gpu_buffer passed by value: the view's device address and its length,
 * so kernels can check their bounds (and __trap() to fail the dispatch).
 *
 * Beside entry E the module defines E_hrx_info, the declared signature,
 * with HRX_GPU_KERNEL_INFO. The daemon reads it at load time and, where the
 * runtime reports the compiled parameter layout (the CUDA driver does),
 * refuses a module whose parameters disagree with it.
 */
#ifndef HRX_GPU_KERNEL_H_
#define HRX_GPU_KERNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HRX_GPU_KERNEL_ABI 1
#define HRX_GPU_MAX_ARGS 64

enum hrx_gpu_arg_kind {
  HRX_GPU_ARG_SCALAR = 1, /* 4 or 8 bytes, from the constant block */
  HRX_GPU_ARG_BUFFER = 2, /* one binding, as an hrx_gpu_buffer */
};

typedef struct hrx_gpu_buffer {
  void* data;      /* the view's first byte, in device memory */
  uint64_t length; /* the view's length in bytes */
} hrx_gpu_buffer;

typedef struct hrx_gpu_kernel_info {
  uint32_t abi;                        /* HRX_GPU_KERNEL_ABI */
  uint32_t workgroup_size[3];          /* 0 in a dimension: any size */
  uint32_t arg_count;                  /* at most HRX_GPU_MAX_ARGS */
  uint8_t arg_kinds[HRX_GPU_MAX_ARGS]; /* enum hrx_gpu_arg_kind */
  uint8_t arg_sizes[HRX_GPU_MAX_ARGS]; /* 4 or 8 for scalars, 0 buffers */
} hrx_gpu_kernel_info;

#ifdef __cplusplus
}
#endif

/* Defines E_hrx_info in device code, e.g.
 *   HRX_GPU_KERNEL_INFO(add_f32) = {HRX_GPU_KERNEL_ABI, {0, 0, 0}, 3,
 *       {HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_SCALAR, HRX_GPU_ARG_BUFFER},
 *       {4, 4, 0}};
 */
#if defined(__CUDACC__) || defined(__HIPCC__)
#define HRX_GPU_KERNEL_INFO(entry) \
  extern "C" __device__ hrx_gpu_kernel_info entry##_hrx_info
#endif

#endif /* HRX_GPU_KERNEL_H_ */
