// One client session's state: its buffers, streams, kernels and events, and
// the per-session pools. Shared by the core's units (session_table.h owns the
// sessions); every mutable member is guarded by Session::mu.
//
// Lock order: no unit's own lock (SessionTable's, Sharing's) is held while
// a Session::mu is taken; no two Session::mu are held at once; nothing waits
// for the device while holding one.
#ifndef HRX_DAEMON_CORE_SESSION_H_
#define HRX_DAEMON_CORE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/core/command_cache.h"
#include "daemon/core/handle_table.h"
#include "daemon/core/identity.h"
#include "daemon/core/pools.h"
#include "daemon/core/tenants.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

struct BufferEntry {
  backend::MemoryRef memory;
  uint64_t origin_stream = 0;  // StreamEntry::id of the allocating stream
  ChargeRef charge;  // the tenant's buffers ceiling, while the handle lives
  // Granted or exported at least once: another tenant or process may hold
  // the memory, so it is never recycled through the session's pool.
  bool shared_out = false;
};

// A descriptor the session's process received (a redeemed export): the
// memory, and with it the owner's byte charge, stays while it is held.
struct ExportEntry {
  backend::MemoryRef memory;
  ChargeRef charge;  // the tenant's exports ceiling
  // Handed out as a description of its own, whose end the kernel can
  // report (descriptor_holds.h); otherwise held until the redeeming
  // process exits.
  bool tracked = false;
};

// A fill or copy resolved and checked once, replayed from a stream's cache.
using CachedTransfer = std::variant<backend::FillOp, backend::CopyOp>;

// Work to run once a lock is released: completions may run inline, and a
// completion that takes the session's lock must not be registered under it.
using Deferred = std::vector<std::function<void()>>;
// An operation ordered on a stream, run with the session's lock held. It
// gets a non-OK `cancelled` when it will never run (its session closed, or
// too much is parked on the stream) and must then report that status.
using GatedOp = std::function<void(absl::Status cancelled, Deferred& after)>;

struct StreamEntry {
  StreamEntry(uint64_t id, uint32_t queue_index,
              std::shared_ptr<backend::Queue> queue)
      : id(id), queue_index(queue_index), queue(std::move(queue)) {}

  const uint64_t id;  // unique for the daemon's run
  ChargeRef charge;   // the tenant's stream budget, held while it exists
  const uint32_t queue_index;
  // Shared with the queue pool, which alone destroys it (QueuePool::Sweep):
  // a retired queue lives while a stream, event or wait still names it.
  const std::shared_ptr<backend::Queue> queue;

  backend::Fence published = 0;  // fence of the stream's last command
  // Commands may be published up to this fence without asking the queue
  // how far it got (the backlog bound, kMaxQueueBacklog, asked again here).
  backend::Fence backlog_checked_to = 0;
  // The one place a stream's deferred refusal lives (stream_gate.h): the
  // first refused batch of Streams.Open, reported at the next sync point.
  absl::Status deferred_refusal;
  UploadStaging staging;
  // Submit never waits on a caller's thread: a batch that meets the staging
  // or backlog bound is suspended until the stream's earlier work completes
  // (enough of it), and the
  // ordered operations arriving meanwhile wait in `parked`, in order (at
  // most kMaxParkedOps).
  bool suspended = false;
  bool closed = false;  // its session closed: parked and suspended work ends
  std::deque<GatedOp> parked;
  CommandCache<backend::DispatchRef> dispatch_cache{kDispatchCacheEntries,
                                                    kDispatchCacheBytes};
  CommandCache<CachedTransfer> transfer_cache{kTransferCacheEntries,
                                              ~uint64_t{0}};
};

// A recorded event: a fence of one queue. `queue` is null while the batch
// that records it is still being enqueued (it waits for staging).
struct EventEntry {
  std::shared_ptr<backend::Queue> queue;
  backend::Fence fence = 0;
  ChargeRef charge;  // the tenant's events ceiling, while the id is live
};

struct GraphExecEntry {
  backend::GraphRef plan;
  uint64_t stream_id = 0;  // the originating stream (StreamEntry::id)
  bool profiled = false;
  std::vector<std::string> labels;            // for each node; "" for joins
  std::shared_ptr<std::atomic<bool>> failed;  // set when a launch failed
  ChargeRef charge;                           // the tenant's graph budget
};

struct KernelEntry {
  backend::KernelRef kernel;
  ChargeRef charge;  // the tenant's kernel budget
};

class Session {
 public:
  Session(std::string client_name, PeerIdentity identity,
          std::shared_ptr<Tenant> tenant, ChargeRef charge)
      : client_name(std::move(client_name)),
        identity(std::move(identity)),
        tenant(std::move(tenant)),
        charge(std::move(charge)) {}

  // "uid 1000, pid 4242" (or the certificate subject), for messages.
  std::string Who() const;

  const std::string client_name;
  const PeerIdentity identity;  // who opened it; every call must match
  const std::shared_ptr<Tenant> tenant;
  const ChargeRef charge;  // the tenant's sessions ceiling
  // When it was opened (an executor lost later does not end it).
  const absl::Time opened_at = absl::Now();
  // When a call last named this session (absl::ToUnixNanos): a remote
  // session ends once it is older than kRemoteSessionLease.
  std::atomic<int64_t> last_call_ns{0};

  absl::Mutex mu;
  HandleTable<BufferEntry> buffers ABSL_GUARDED_BY(mu){
      shared::HandleKind::kBuffer};
  HandleTable<std::shared_ptr<StreamEntry>> streams ABSL_GUARDED_BY(mu){
      shared::HandleKind::kStream};
  HandleTable<KernelEntry> kernels ABSL_GUARDED_BY(mu){
      shared::HandleKind::kKernel};
  HandleTable<GraphExecEntry> graph_execs ABSL_GUARDED_BY(mu){
      shared::HandleKind::kGraphExec};
  absl::flat_hash_map<uint64_t, EventEntry> events ABSL_GUARDED_BY(mu);
  AllocationPool allocation_pool ABSL_GUARDED_BY(mu);
  StagingPool staging_pool ABSL_GUARDED_BY(mu);
  uint64_t commands_submitted ABSL_GUARDED_BY(mu) = 0;
  // Memory whose descriptor this session received, by export id: the
  // owner's charge stays until the mapping is released or the session ends.
  absl::flat_hash_map<uint64_t, ExportEntry> exports ABSL_GUARDED_BY(mu);
  uint64_t next_export_id ABSL_GUARDED_BY(mu) = 1;
};

// PERMISSION_DENIED "observer_read_only" for a session of an observer
// tenant: observers may look, never touch. `what` names the operation.
absl::Status RequireWriter(const Session& session, std::string_view what);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_SESSION_H_
