// hip_platform on AMD's runtime.
#include <string>

#include "daemon/backend/hip/hip_platform.h"

namespace hrx::backend::hip_platform {

const char* Name() { return "amd"; }

std::string TargetName(const hipDeviceProp_t& properties) {
  // gcnArchName reads like "gfx1151:sramecc-:xnack-"; code objects are
  // built for the part before the first feature.
  std::string name = properties.gcnArchName;
  return name.substr(0, name.find(':'));
}

// HIP 5.2 has no parameter introspection; the declared layout stands.
hipError_t KernelParamInfo(hipFunction_t, size_t, size_t*, size_t*) {
  return hipErrorNotSupported;
}

// HIP 5.2 exports no dma-buf (ROCr's hsa_amd_portable_export_dmabuf is
// newer than Debian 12's runtime).
hipError_t ExportDmaBuf(void*, size_t, int*) { return hipErrorNotSupported; }

}  // namespace hrx::backend::hip_platform
