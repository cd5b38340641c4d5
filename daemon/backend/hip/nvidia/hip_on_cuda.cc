// Driver-API half of the HIP-on-CUDA mapping, and hip_platform on NVIDIA.
#include "daemon/backend/hip/nvidia/hip_on_cuda.h"

#include <string>

#include "daemon/backend/hip/hip_platform.h"

namespace {

// The driver functions used, resolved once from the driver the CUDA runtime
// loaded. decltype of the cuda.h declarations keeps each pointer's type
// exactly the versioned ABI that entry-point lookup returns for CUDA 13.
struct Driver {
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuModuleGetGlobal) module_get_global = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuGraphAddKernelNode) graph_add_kernel_node = nullptr;
  decltype(&::cuFuncGetParamInfo) func_get_param_info = nullptr;
  decltype(&::cuMemGetHandleForAddressRange) mem_get_handle = nullptr;
  cudaError_t status = cudaSuccess;
};

template <typename Function>
void Resolve(const char* symbol, Function* out, cudaError_t* status) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(
      symbol, &address, 13000, cudaEnableDefault, &found);
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    if (*status == cudaSuccess) {
      *status = error != cudaSuccess ? error : cudaErrorNotSupported;
    }
    return;
  }
  *out = reinterpret_cast<Function>(address);
}

const Driver& GetDriver() {
  static const Driver driver = [] {
    Driver d;
    Resolve("cuModuleLoadData", &d.module_load_data, &d.status);
    Resolve("cuModuleUnload", &d.module_unload, &d.status);
    Resolve("cuModuleGetFunction", &d.module_get_function, &d.status);
    Resolve("cuModuleGetGlobal", &d.module_get_global, &d.status);
    Resolve("cuLaunchKernel", &d.launch_kernel, &d.status);
    Resolve("cuGraphAddKernelNode", &d.graph_add_kernel_node, &d.status);
    Resolve("cuFuncGetParamInfo", &d.func_get_param_info, &d.status);
    Resolve("cuMemGetHandleForAddressRange", &d.mem_get_handle, &d.status);
    return d;
  }();
  return driver;
}

hipError_t FromDriver(CUresult result) {
  return static_cast<hipError_t>(result);
}

}  // namespace

hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
  const Driver& d = GetDriver();
  if (d.module_load_data == nullptr) return d.status;
  return FromDriver(d.module_load_data(module, image));
}

hipError_t hipModuleUnload(hipModule_t module) {
  const Driver& d = GetDriver();
  if (d.module_unload == nullptr) return d.status;
  return FromDriver(d.module_unload(module));
}

hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module,
                                const char* name) {
  const Driver& d = GetDriver();
  if (d.module_get_function == nullptr) return d.status;
  return FromDriver(d.module_get_function(function, module, name));
}

hipError_t hipModuleGetGlobal(hipDeviceptr_t* address, size_t* bytes,
                              hipModule_t module, const char* name) {
  const Driver& d = GetDriver();
  if (d.module_get_global == nullptr) return d.status;
  CUdeviceptr pointer = 0;
  const CUresult result = d.module_get_global(&pointer, bytes, module, name);
  *address = reinterpret_cast<void*>(pointer);
  return FromDriver(result);
}

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int grid_x,
                                 unsigned int grid_y, unsigned int grid_z,
                                 unsigned int block_x, unsigned int block_y,
                                 unsigned int block_z,
                                 unsigned int shared_bytes, hipStream_t stream,
                                 void** params, void** extra) {
  const Driver& d = GetDriver();
  if (d.launch_kernel == nullptr) return d.status;
  return FromDriver(d.launch_kernel(
      f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes,
      reinterpret_cast<CUstream>(stream), params, extra));
}

hipError_t hipGraphAddKernelNode(hipGraphNode_t* node, hipGraph_t graph,
                                 const hipGraphNode_t* deps, size_t n,
                                 const hipKernelNodeParams* params) {
  const Driver& d = GetDriver();
  if (d.graph_add_kernel_node == nullptr) return d.status;
  CUDA_KERNEL_NODE_PARAMS driver_params{};
  driver_params.func = static_cast<CUfunction>(params->func);
  driver_params.gridDimX = params->gridDim.x;
  driver_params.gridDimY = params->gridDim.y;
  driver_params.gridDimZ = params->gridDim.z;
  driver_params.blockDimX = params->blockDim.x;
  driver_params.blockDimY = params->blockDim.y;
  driver_params.blockDimZ = params->blockDim.z;
  driver_params.sharedMemBytes = params->sharedMemBytes;
  driver_params.kernelParams = params->kernelParams;
  driver_params.extra = params->extra;
  return FromDriver(d.graph_add_kernel_node(
      reinterpret_cast<CUgraphNode*>(node), reinterpret_cast<CUgraph>(graph),
      reinterpret_cast<const CUgraphNode*>(deps), n, &driver_params));
}

namespace hrx::backend::hip_platform {

const char* Name() { return "nvidia"; }

std::string TargetName(const hipDeviceProp_t& properties) {
  return "sm_" + std::to_string(properties.major) +
         std::to_string(properties.minor);
}

hipError_t KernelParamInfo(hipFunction_t function, size_t index, size_t* offset,
                           size_t* size) {
  const Driver& d = GetDriver();
  if (d.func_get_param_info == nullptr) return hipErrorNotSupported;
  return FromDriver(d.func_get_param_info(function, index, offset, size));
}

hipError_t ExportDmaBuf(void* address, size_t bytes, int* fd) {
  const Driver& d = GetDriver();
  if (d.mem_get_handle == nullptr) return hipErrorNotSupported;
  return FromDriver(d.mem_get_handle(fd, reinterpret_cast<CUdeviceptr>(address),
                                     bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                     0));
}

}  // namespace hrx::backend::hip_platform
