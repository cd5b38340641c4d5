// Where a HIP-backend allocation lives, decided from what the device is.
// Kept apart from the runtime so that the decision is tested anywhere, with
// the device's properties faked (hip_placement_test).
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_PLACEMENT_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_PLACEMENT_H_

#include "daemon/backend/backend.h"

namespace hrx::backend {

enum class HipPlacement {
  // hipMalloc (or the stream-ordered allocator): the host cannot map it; it
  // leaves the daemon only as a driver dma-buf.
  kDeviceAllocation,
  // A memfd registered with the runtime (hipHostRegister, mapped): the
  // client's mapping of the memfd, the daemon's and the device's are the
  // same pages, so the buffer maps and exports as shm.
  kRegisteredHostPages,
};

// Host-coherent buffers are registered host pages everywhere. Device buffers
// are too where the device is integrated (an APU such as gfx1151, whose
// device memory is system memory: registered pages cost the device nothing
// there, and the in-process runtime hands out a host pointer for them); on a
// discrete GPU they are device allocations, which the host cannot map.
HipPlacement PlaceAllocation(MemoryKind kind,
                             const DeviceProperties& properties);

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_PLACEMENT_H_
