// Core-side forms of requests and replies: decoded and shape-checked by the
// server layer, checked against live objects by Core.
#ifndef HRX_DAEMON_CORE_TYPES_H_
#define HRX_DAEMON_CORE_TYPES_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "daemon/backend/backend.h"
#include "daemon/core/command_cache.h"
#include "daemon/core/pools.h"
#include "daemon/core/tenants.h"

namespace hrx::daemon {

// Limits. Each is documented in docs/limits.md and tested at its edge.
inline constexpr uint64_t kMaxSessions = 1024;
inline constexpr size_t kMaxCommandsPerSubmit = 4096;
inline constexpr uint64_t kMaxInlineReadBytes = uint64_t{8} << 20;
inline constexpr size_t kMaxClientNameBytes = 128;
inline constexpr size_t kMaxKernelsPerSession = 256;
inline constexpr size_t kMaxEventsPerSession = 65536;
inline constexpr size_t kDispatchCacheEntries = 1024;
inline constexpr uint64_t kDispatchCacheBytes = uint64_t{16} << 20;
inline constexpr size_t kTransferCacheEntries = 128;
// Ordered operations (submits, syncs, reads) that may wait behind a batch
// suspended at the staging or backlog bound, per stream; more are refused.
inline constexpr size_t kMaxParkedOps = 64;
// Commands a stream may have on its queue not yet completed: a batch that
// reaches it is suspended until the queue has done half of them (nothing
// refused, no thread waits; the client's next request is not read until
// then). It bounds what a queue holds for a client that submits faster than
// the device runs, per stream: frames hrxd queues for an executor's link
// (which a ping would wait behind), and commands an executor or the CPU
// queue keeps. A tenant's streams together, or the tenants of the shared
// executor, can queue a multiple of it on one link.
inline constexpr backend::Fence kMaxQueueBacklog = 65536;
// A remote session ends this long after the last call that named it (gRPC
// does not report a TCP client's disconnection).
inline constexpr int64_t kRemoteSessionLeaseSeconds = 120;
// How often expired tickets and remote leases are swept.
inline constexpr int64_t kHousekeepingIntervalMs = 250;
// Spent tickets remembered (to tell "ticket_used" from "unknown_ticket").
inline constexpr size_t kMaxTicketTombstones = 65536;

struct ViewRef {
  uint64_t buffer = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct FillCommand {
  ViewRef dst;
  uint8_t value = 0;
};

struct CopyCommand {
  ViewRef dst;
  ViewRef src;
};

struct UploadCommand {
  ViewRef dst;
  std::string data;
};

// Event ids are chosen by the client (nonzero, unique among the session's
// live events), so recording needs no round trip.
struct RecordEventCommand {
  uint64_t event = 0;
};

struct WaitEventCommand {
  uint64_t event = 0;
};

struct DispatchCommand {
  uint64_t kernel = 0;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  std::string constants;
  std::vector<ViewRef> bindings;
};

// Replays a graph exec on its originating stream.
struct LaunchGraphCommand {
  uint64_t exec = 0;
};

using Command =
    std::variant<FillCommand, CopyCommand, UploadCommand, RecordEventCommand,
                 WaitEventCommand, DispatchCommand, LaunchGraphCommand>;

inline constexpr size_t kMaxGraphNodes = 4096;

// Nothing to run: orders a graph node's successors after its predecessors.
struct JoinCommand {};

// A recorded graph node as the client sends it to be finished.
struct GraphNodeSpec {
  std::variant<JoinCommand, FillCommand, CopyCommand, DispatchCommand> op;
  std::vector<uint32_t> after;  // indices of earlier nodes
};

struct GraphSpec {
  std::vector<GraphNodeSpec> nodes;
  bool profiled = false;
  std::vector<std::string> labels;  // one per non-join node when profiled
};

struct GraphExecInfo {
  uint64_t handle = 0;
  uint64_t binding_bytes = 0;  // distinct allocations bound, each once
};

struct NodeTime {
  std::string label;
  uint64_t nanoseconds = 0;
};

enum class AllocationKind {
  kDevice,  // unspecified contents
  kZeroed,  // all bytes zero
  kShared,  // host-coherent memory the client may map
};

// How Submit reports a bad command. Either way nothing of the batch runs.
enum class SubmitErrors {
  kReturn,  // return it now (unary Submit)
  kDefer,   // keep it for the stream's next synchronisation point
};

struct KernelInfo {
  uint64_t handle = 0;
  std::string entry;
  backend::KernelSignature signature;
};

struct StreamStats {
  uint32_t queue = 0;
  uint64_t published_fence = 0;
  uint64_t completed_fence = 0;
  std::vector<uint64_t> pending_staging_ids;
  uint64_t pending_staging_bytes = 0;
  std::vector<uint64_t> completed_staging_ids;
  PoolStats upload_staging;
  CacheStats dispatch_cache;
  CacheStats transfer_cache;
};

struct BufferInfo {
  uint64_t handle = 0;
  uint64_t bytes = 0;
  uint64_t allocation_id = 0;  // identifies the backing allocation
};

struct StreamInfo {
  uint64_t handle = 0;
  uint32_t queue = 0;
  uint64_t id = 0;  // StreamEntry::id
};

struct CloseSummary {
  uint64_t freed_buffers = 0;
  uint64_t freed_streams = 0;
};

struct DeviceInfo {
  std::string backend;
  std::string name;
  std::string target;
  uint64_t memory_bytes = 0;
  uint32_t queue_count = 0;
  bool integrated = false;  // backend::DeviceProperties::integrated
};

// How long an export ticket may wait to be redeemed on the side channel.
inline constexpr int64_t kDefaultTicketLifetimeMs = 10000;

struct ExportTicket {
  std::string ticket;      // 16 unguessable bytes; redeemed once
  uint64_t export_id = 0;  // names the mapping for ReleaseExport
  uint64_t bytes = 0;
  uint64_t offset = 0;  // where the buffer starts in the descriptor
};

struct TenantUsage {
  std::string name;
  Role role = Role::kClient;
  Limits limits;
  UsageCounts usage = {};
  uint64_t sessions = 0;
  bool load_kernels = false;
  uint64_t detached_exports = 0;  // see Core::detached_exports
  uint64_t detached_export_bytes = 0;
};

// A socket-bound tenant as admins see it (docs/kubernetes.md).
struct BoundTenantSummary {
  TenantUsage tenant;
  std::string socket_path;
  Labels labels;
  absl::Time created;
};

struct SessionSummary {
  uint64_t id = 0;
  std::string tenant;
  std::string client_name;
  uint32_t uid = 0;
  uint32_t pid = 0;
  uint64_t buffers = 0;
  uint64_t streams = 0;
  uint64_t kernels = 0;
  uint64_t buffer_bytes = 0;
};

struct BufferSummary {
  uint64_t session = 0;
  std::string tenant;
  uint64_t handle = 0;
  uint64_t bytes = 0;
  uint64_t allocation_id = 0;
  bool shared = false;
};

// What sessions' work has done and holds, summed over sessions and their
// streams: hrxd's own (SumWork), and what each executor reports of the
// sessions whose rings it serves.
struct WorkTotals {
  uint64_t commands_submitted = 0;
  CacheStats dispatch_cache;  // summed over streams
  CacheStats transfer_cache;  // summed over streams
  PoolStats allocation_pool;  // summed over sessions
  PoolStats staging_pool;     // summed over sessions
  PoolStats upload_staging;   // completed upload staging, summed over streams
  uint64_t suspended_streams =
      0;  // a batch waits at a staging or backlog bound
  uint64_t parked_operations = 0;  // ordered behind such batches

  WorkTotals& operator+=(const WorkTotals& other) {
    commands_submitted += other.commands_submitted;
    dispatch_cache += other.dispatch_cache;
    transfer_cache += other.transfer_cache;
    allocation_pool += other.allocation_pool;
    staging_pool += other.staging_pool;
    upload_staging += other.upload_staging;
    suspended_streams += other.suspended_streams;
    parked_operations += other.parked_operations;
    return *this;
  }
};

// The work totals are hrxd's and its executors' together.
struct CoreStatus : WorkTotals {
  DeviceInfo device;
  uint64_t uptime_seconds = 0;
  uint64_t sessions = 0;
  uint64_t streams = 0;
  uint64_t buffers = 0;
  uint64_t bytes_in_use = 0;
  uint64_t kernels = 0;
  uint64_t events = 0;
  uint32_t queues_created = 0;
  // Of commands_submitted, those enqueued by the rings executors serve
  // (hrxd never saw them).
  uint64_t executor_commands = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_TYPES_H_
