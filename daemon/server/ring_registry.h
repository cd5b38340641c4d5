// hrxd's rings (ring_server.h): Streams.OpenRing creates a stream and a
// region for it, charged to the tenant's shared_bytes, with a ticket for
// the region's descriptor; the registry bounds how many rings (each a
// serving thread of hrxd's) are open, and ends them all at hrxd's stop.
#ifndef HRX_DAEMON_SERVER_RING_REGISTRY_H_
#define HRX_DAEMON_SERVER_RING_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/core.h"
#include "daemon/server/decode.h"
#include "daemon/server/executor_rings.h"
#include "daemon/stream/ring_server.h"

namespace hrx::daemon {

// Rings (each a serving thread in hrxd) a tenant may have open at once,
// and all tenants together: past either, OpenRing is refused with
// RESOURCE_EXHAUSTED "too_many_rings" (libhrx then opens the stream as a
// gRPC call, which costs hrxd no thread of its own).
inline constexpr size_t kMaxRingsPerTenant = 64;
inline constexpr size_t kMaxRings = 1024;

// A ring handed to a client: what OpenRing answers.
struct OpenedRing {
  uint64_t stream = 0;  // the stream object (to seal into a handle)
  uint32_t queue = 0;
  std::string ticket;
  uint64_t region_bytes = 0;
};

// Thread-safe.
class RingRegistry {
 public:
  // With `executor_rings`, a tenant whose work runs in an executor has its
  // rings served there (executor_rings.h); without, every ring is hrxd's.
  explicit RingRegistry(Core& core, ExecutorRings* executor_rings = nullptr)
      : core_(core), executor_rings_(executor_rings) {}
  ~RingRegistry();  // Shutdown(), if not yet

  // Creates a stream for `caller`'s session with a ring region charged to
  // its tenant's shared_bytes, and a ticket for the region's descriptor.
  // FAILED_PRECONDITION "peer_not_visible" for a caller without a visible
  // process (remote, or another PID namespace): only a local process can
  // map the region. Refusals of CreateStream and the budget pass through.
  absl::StatusOr<OpenedRing> Open(const Caller& caller,
                                  const PeerIdentity& peer);

  // hrxd is stopping: every ring tells its client at once (UNAVAILABLE, as
  // a stopping server ends its calls) and stops taking requests. Its stream
  // stays with its session, which the stop drains with every queue: gRPC
  // still answers unary calls until its own shutdown, and one naming the
  // stream must not find it freed. Does not wait.
  void StopAll();
  // StopAll, then waits for every ring to end.
  void Shutdown();

  // Rings whose serving thread runs.
  size_t live() const;

 private:
  // A running ring and what it holds. Members are destroyed in reverse
  // order: the ring (its mapping) before its charge is given back.
  struct Entry {
    ChargeRef charge;    // the region's shared_bytes
    std::string tenant;  // whose ring it is (per_tenant_'s count)
    std::unique_ptr<RingServer> ring;
  };

  void Ended(RingServer* ring);  // from its serving thread, as it exits
  // Open, for a ring `link`'s executor serves.
  absl::StatusOr<OpenedRing> OpenInExecutor(const Caller& caller,
                                            const std::string& tenant,
                                            ChargeRef charge, uint64_t bytes);

  Core& core_;
  ExecutorRings* const executor_rings_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RingServer*, Entry> rings_ ABSL_GUARDED_BY(mu_);
  // Open rings by tenant, for kMaxRingsPerTenant (those being opened
  // included), and rings being opened, not yet in rings_.
  absl::flat_hash_map<std::string, size_t> per_tenant_ ABSL_GUARDED_BY(mu_);
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Rings handed to executors, by tenant, for kMaxRingsPerTenant: shared
  // with each ring's slot, which ExecutorRings keeps until the ring ends
  // (possibly after this registry is gone).
  struct ExecutorRingCounts {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, size_t> per_tenant ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<ExecutorRingCounts> executor_ring_counts_ =
      std::make_shared<ExecutorRingCounts>();
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_RING_REGISTRY_H_
