// Buffers: device, zeroed and shared allocations charged to their tenant,
// and their release.
//
// Contract: an allocation's byte charge rides on the memory itself and is
// returned only when its last holder (the buffer table, a pool, a queued
// command, an importer, a descriptor) lets go. Freeing kills the handle at
// once and evicts cached commands that bind it.
//
// Locking: takes a Session::mu for table updates; allocates from the backend
// without holding it.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_BUFFERS_H_
#define HRX_DAEMON_CORE_BUFFERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/core/device_set.h"
#include "daemon/core/session_table.h"
#include "daemon/core/sharing.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

class Buffers {
 public:
  Buffers(DeviceSet& devices, SessionTable& sessions, Sharing& sharing)
      : devices_(devices), sessions_(sessions), sharing_(sharing) {}

  // A zero-byte request is rounded up to one byte. `stream` (0: none) is the
  // stream allocating it: commands binding only buffers of their own stream
  // are cached, and scratch recycling checks it.
  absl::StatusOr<BufferInfo> Allocate(uint64_t session, uint64_t bytes,
                                      AllocationKind kind, uint64_t stream = 0);
  // The handle dies at once, its grants are revoked and cached commands
  // binding the buffer are evicted; the memory lives until queued uses
  // complete.
  absl::Status Free(uint64_t session, uint64_t buffer);

  // What a copy of the session's tables needs of `buffer` (an executor
  // serving its rings): its memory and the stream that allocated it.
  struct Described {
    backend::MemoryRef memory;
    uint64_t origin_stream = 0;
  };
  absl::StatusOr<Described> Describe(uint64_t session, uint64_t buffer,
                                     std::string_view what);

 private:
  DeviceSet& devices_;
  SessionTable& sessions_;
  Sharing& sharing_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_BUFFERS_H_
