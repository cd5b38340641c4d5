// The project's mapping of the HIP runtime calls the backend uses onto
// CUDA 13, so the one HIP backend runs on NVIDIA GPUs. Debian's HIP 5.2
// NVIDIA headers do not compile against CUDA 13, hence this small subset.
//
// Runtime calls map onto the CUDA runtime (linked statically: the binary
// starts without a driver, and then reports that no device is usable).
// Module and launch calls map onto the CUDA driver API, reached through
// cudaGetDriverEntryPointByVersion, so no link against libcuda either.
// HIP's and CUDA's error codes coincide for everything used here
// (hipError_t is cudaError_t; driver results share the runtime's values).
#ifndef HRX_DAEMON_BACKEND_HIP_NVIDIA_HIP_ON_CUDA_H_
#define HRX_DAEMON_BACKEND_HIP_NVIDIA_HIP_ON_CUDA_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipModule_t = CUmodule;
using hipFunction_t = CUfunction;
using hipDeviceptr_t = void*;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipGraphNode_t = cudaGraphNode_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;
using hipMemsetParams = cudaMemsetParams;

// Same fields as HIP's; `func` is a hipFunction_t from a module.
struct hipKernelNodeParams {
  dim3 blockDim;
  void** extra;
  void* func;
  dim3 gridDim;
  void** kernelParams;
  unsigned int sharedMemBytes;
};

inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipError_t hipErrorNotReady = cudaErrorNotReady;
inline constexpr hipError_t hipErrorInvalidValue = cudaErrorInvalidValue;
inline constexpr hipError_t hipErrorNotSupported = cudaErrorNotSupported;
inline constexpr hipError_t hipErrorNoDevice = cudaErrorNoDevice;
inline constexpr hipError_t hipErrorInsufficientDriver =
    cudaErrorInsufficientDriver;
inline constexpr hipError_t hipErrorOutOfMemory = cudaErrorMemoryAllocation;
inline constexpr hipMemcpyKind hipMemcpyDefault = cudaMemcpyDefault;
inline constexpr unsigned int hipStreamNonBlocking = cudaStreamNonBlocking;
inline constexpr unsigned int hipEventDefault = cudaEventDefault;
inline constexpr unsigned int hipEventDisableTiming = cudaEventDisableTiming;
inline constexpr unsigned int hipHostRegisterPortable =
    cudaHostRegisterPortable;
inline constexpr unsigned int hipHostRegisterMapped = cudaHostRegisterMapped;
// AMD's coarse-grained registration; CUDA registers one way only.
inline constexpr unsigned int hipExtHostRegisterCoarseGrained = 0;

// Runtime calls: one CUDA runtime call each.
inline const char* hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
inline const char* hipGetErrorString(hipError_t e) {
  return cudaGetErrorString(e);
}
inline hipError_t hipGetDeviceCount(int* count) {
  return cudaGetDeviceCount(count);
}
inline hipError_t hipSetDevice(int device) { return cudaSetDevice(device); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int device) {
  return cudaGetDeviceProperties(p, device);
}
inline hipError_t hipMemGetInfo(size_t* free, size_t* total) {
  return cudaMemGetInfo(free, total);
}
inline hipError_t hipMalloc(void** p, size_t bytes) {
  return cudaMalloc(p, bytes);
}
inline hipError_t hipFree(void* p) { return cudaFree(p); }
inline hipError_t hipMallocAsync(void** p, size_t bytes, hipStream_t s) {
  return cudaMallocAsync(p, bytes, s);
}
inline hipError_t hipFreeAsync(void* p, hipStream_t s) {
  return cudaFreeAsync(p, s);
}
inline hipError_t hipMemset(void* p, int value, size_t bytes) {
  return cudaMemset(p, value, bytes);
}
inline hipError_t hipHostMalloc(void** p, size_t bytes, unsigned int flags) {
  return cudaHostAlloc(p, bytes, flags);
}
inline hipError_t hipHostFree(void* p) { return cudaFreeHost(p); }
inline hipError_t hipHostRegister(void* p, size_t bytes, unsigned int flags) {
  return cudaHostRegister(p, bytes, flags);
}
inline hipError_t hipHostUnregister(void* p) { return cudaHostUnregister(p); }
inline hipError_t hipHostGetDevicePointer(void** device, void* host,
                                          unsigned int flags) {
  return cudaHostGetDevicePointer(device, host, flags);
}
inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned int flags) {
  return cudaStreamCreateWithFlags(s, flags);
}
inline hipError_t hipStreamDestroy(hipStream_t s) {
  return cudaStreamDestroy(s);
}
inline hipError_t hipStreamSynchronize(hipStream_t s) {
  return cudaStreamSynchronize(s);
}
inline hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e,
                                     unsigned int flags) {
  return cudaStreamWaitEvent(s, e, flags);
}
inline hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned int flags) {
  return cudaEventCreateWithFlags(e, flags);
}
inline hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  return cudaEventRecord(e, s);
}
inline hipError_t hipEventQuery(hipEvent_t e) { return cudaEventQuery(e); }
inline hipError_t hipEventSynchronize(hipEvent_t e) {
  return cudaEventSynchronize(e);
}
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t start,
                                      hipEvent_t stop) {
  return cudaEventElapsedTime(ms, start, stop);
}
inline hipError_t hipMemsetD8Async(hipDeviceptr_t p, unsigned char value,
                                   size_t bytes, hipStream_t s) {
  return cudaMemsetAsync(p, value, bytes, s);
}
inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes,
                                 hipMemcpyKind kind, hipStream_t s) {
  return cudaMemcpyAsync(dst, src, bytes, kind, s);
}
inline hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
inline hipError_t hipGraphCreate(hipGraph_t* g, unsigned int flags) {
  return cudaGraphCreate(g, flags);
}
inline hipError_t hipGraphDestroy(hipGraph_t g) { return cudaGraphDestroy(g); }
inline hipError_t hipGraphAddMemsetNode(hipGraphNode_t* node, hipGraph_t g,
                                        const hipGraphNode_t* deps, size_t n,
                                        const hipMemsetParams* params) {
  return cudaGraphAddMemsetNode(node, g, deps, n, params);
}
inline hipError_t hipGraphAddMemcpyNode1D(hipGraphNode_t* node, hipGraph_t g,
                                          const hipGraphNode_t* deps, size_t n,
                                          void* dst, const void* src,
                                          size_t bytes, hipMemcpyKind kind) {
  return cudaGraphAddMemcpyNode1D(node, g, deps, n, dst, src, bytes, kind);
}
inline hipError_t hipGraphAddEmptyNode(hipGraphNode_t* node, hipGraph_t g,
                                       const hipGraphNode_t* deps, size_t n) {
  return cudaGraphAddEmptyNode(node, g, deps, n);
}
inline hipError_t hipGraphInstantiate(hipGraphExec_t* exec, hipGraph_t g,
                                      hipGraphNode_t* /*error_node*/,
                                      char* /*log*/, size_t /*log_size*/) {
  return cudaGraphInstantiate(exec, g, 0);
}
inline hipError_t hipGraphExecDestroy(hipGraphExec_t e) {
  return cudaGraphExecDestroy(e);
}
inline hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s) {
  return cudaGraphLaunch(e, s);
}

// Module and launch calls: the CUDA driver API (hip_on_cuda.cc).
hipError_t hipModuleLoadData(hipModule_t* module, const void* image);
hipError_t hipModuleUnload(hipModule_t module);
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module,
                                const char* name);
hipError_t hipModuleGetGlobal(hipDeviceptr_t* address, size_t* bytes,
                              hipModule_t module, const char* name);
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int grid_x,
                                 unsigned int grid_y, unsigned int grid_z,
                                 unsigned int block_x, unsigned int block_y,
                                 unsigned int block_z,
                                 unsigned int shared_bytes, hipStream_t stream,
                                 void** params, void** extra);
hipError_t hipGraphAddKernelNode(hipGraphNode_t* node, hipGraph_t graph,
                                 const hipGraphNode_t* deps, size_t n,
                                 const hipKernelNodeParams* params);

#endif  // HRX_DAEMON_BACKEND_HIP_NVIDIA_HIP_ON_CUDA_H_
