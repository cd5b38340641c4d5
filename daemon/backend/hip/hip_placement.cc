#include "daemon/backend/hip/hip_placement.h"

namespace hrx::backend {

HipPlacement PlaceAllocation(MemoryKind kind,
                             const DeviceProperties& properties) {
  if (kind == MemoryKind::kHostCoherent || properties.integrated) {
    return HipPlacement::kRegisteredHostPages;
  }
  return HipPlacement::kDeviceAllocation;
}

}  // namespace hrx::backend
