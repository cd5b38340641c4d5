// The HIP runtime the backend is written against, for either platform:
//   HRX_HIP_PLATFORM_AMD     AMD's runtime (Debian's libamdhip64), unchanged.
//   HRX_HIP_PLATFORM_NVIDIA  the project's mapping of the same HIP calls onto
//                            CUDA 13 (nvidia/hip_on_cuda.h).
// Plus the few device queries HIP 5.2 does not offer, each with an
// implementation per platform.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_PLATFORM_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_PLATFORM_H_

#if defined(HRX_HIP_PLATFORM_AMD)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#elif defined(HRX_HIP_PLATFORM_NVIDIA)
#include "daemon/backend/hip/nvidia/hip_on_cuda.h"
#else
#error "define HRX_HIP_PLATFORM_AMD or HRX_HIP_PLATFORM_NVIDIA"
#endif

#include <cstddef>
#include <string>

namespace hrx::backend::hip_platform {

// "amd" or "nvidia".
const char* Name();

// The exact compiler target of `device`: "gfx1151" on AMD (the gcnArchName
// without its feature suffix), "sm_90" on NVIDIA.
std::string TargetName(const hipDeviceProp_t& properties);

// Offset and size of parameter `index` of `function` as the module compiled
// it. hipErrorInvalidValue past the last parameter; hipErrorNotSupported
// where the runtime cannot tell (AMD's HIP 5.2).
hipError_t KernelParamInfo(hipFunction_t function, size_t index, size_t* offset,
                           size_t* size);

// A dma-buf descriptor for [address, address + bytes) of device memory;
// both must be page aligned. hipErrorNotSupported where the driver cannot.
hipError_t ExportDmaBuf(void* address, size_t bytes, int* fd);

}  // namespace hrx::backend::hip_platform

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_PLATFORM_H_
