#include "daemon/backend/hip/hip_placement.h"

namespace hrx::backend {

HipPlacement PlaceAllocation(MemoryKind kind,
                             const DeviceProperties& properties) {
  if (kind == MemoryKind::kHostCoherent) {
    return HipPlacement::kCoherentHostPages;
  }
  return properties.integrated ? HipPlacement::kCachedHostPages
                               : HipPlacement::kDeviceAllocation;
}

HipPlacement PlaceImport(MemoryKind kind) {
  return kind == MemoryKind::kHostCoherent ? HipPlacement::kCoherentHostPages
                                           : HipPlacement::kCachedHostPages;
}

}  // namespace hrx::backend
