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
  // same pages, so the buffer maps and exports as shm. Fine-grained: the
  // device's accesses are coherent with the host's while a kernel runs
  // (what AllocateShared promises).
  kCoherentHostPages,
  // The same, registered coarse-grained on AMD
  // (hipExtHostRegisterCoarseGrained): the device may cache the pages, and
  // host and device agree at synchronization points, which is what an
  // ordinary buffer promises (a mapping sees device writes after a
  // Synchronize). Fine-grained system memory bypasses caches a kernel
  // relies on; the HIP-on-CUDA mapping has no such flag (no-op there).
  kCachedHostPages,
};

// Host-coherent buffers are coherent host pages everywhere. Device buffers
// are cached host pages where the device is integrated (an APU such as
// gfx1151, whose device memory is system memory anyway, and whose
// in-process runtime hands out a host pointer for them); on a discrete GPU
// they are device allocations, which the host cannot map. Not yet measured
// on an APU against a device allocation (docs/gpu.md).
HipPlacement PlaceAllocation(MemoryKind kind,
                             const DeviceProperties& properties);

// Another executor's pages imported here (only host pages cross): coherent
// for a host-coherent buffer, cached for the rest (an integrated device's
// buffers, or the CPU backend's).
HipPlacement PlaceImport(MemoryKind kind);

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_PLACEMENT_H_
