// The device abstraction everything above daemon/backend/ programs against.
// Shaped after the HIP runtime: a device hands out allocations (device memory
// or host-coherent mappings) and in-order native queues (hipStream_t); work is
// enqueued asynchronously and completion is observed through monotonic fences
// (hipEvent_t) or host callbacks (hipLaunchHostFunc). Nothing above this layer
// knows which backend runs.
//
// Thread safety: Backend and Queue methods may be called from any thread.
#ifndef HRX_DAEMON_BACKEND_BACKEND_H_
#define HRX_DAEMON_BACKEND_BACKEND_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/backend/prepared_slot.h"
#include "shared/kernel_signature.h"

namespace hrx::backend {

enum class MemoryKind {
  kDevice,        // device memory (on an APU, also system memory)
  kHostCoherent,  // host memory the device reads and writes coherently
};

struct DeviceProperties {
  std::string backend;  // "cpu" or "hip"
  std::string name;     // human-readable device name
  std::string target;   // exact compiler target: "gfx1151", "sm_90", "x86_64"
  uint64_t memory_bytes = 0;  // what this backend may hand out in total
  // Device memory is system memory (an APU: the runtime's integrated flag):
  // ordinary buffers map on the host. The CPU backend's always do.
  bool integrated = false;
};

// How an allocation can be handed to a client process as a descriptor.
enum class ExportKind : uint8_t {
  kShm = 1,     // a memfd of the same pages (CPU backend; host-coherent memory)
  kDmaBuf = 2,  // a dma-buf (driver export, or udmabuf over a memfd)
};

// One allocation. It lives while anything holds a MemoryRef: the daemon's
// buffer table and every queued command that uses it, so freeing a buffer
// with work still queued against it never frees memory under the device.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual uint64_t size() const = 0;
  virtual MemoryKind kind() const = 0;
  // Unique among this backend's allocations for the daemon's lifetime; lets
  // tests and tools tell a reused allocation from a fresh one.
  virtual uint64_t id() const = 0;
  // The host address of the bytes, or nullptr where the host cannot reach
  // them directly (discrete device memory).
  virtual uint8_t* host_address() const = 0;
  // A new descriptor (the caller owns it) through which another process can
  // map this allocation. FAILED_PRECONDITION naming what is missing where
  // the kind is not available for it.
  virtual absl::StatusOr<int> ExportFd(ExportKind kind) const = 0;
};
using MemoryRef = std::shared_ptr<Memory>;

using ArgKind = shared::ArgKind;
using KernelArg = shared::KernelArg;
using KernelSignature = shared::KernelSignature;

// A loaded kernel entry. Alive while referenced, including by queued
// dispatches, so unloading never pulls code out from under the device.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const std::string& entry() const = 0;
  virtual const KernelSignature& signature() const = 0;
};
using KernelRef = std::shared_ptr<const Kernel>;

struct BoundBuffer {
  MemoryRef memory;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// A fully checked launch: everything a queue needs, immutable, shareable by
// a cache that replays it.
struct DispatchArgs {
  KernelRef kernel;
  std::array<uint32_t, 3> grid = {1, 1, 1};   // workgroups per dimension
  std::array<uint32_t, 3> block = {1, 1, 1};  // work-items per workgroup
  std::string constants;                      // packed little-endian scalars
  std::vector<BoundBuffer> bindings;          // declaration order
  // Kept by a cache for more launches: worth a backend's prepared form,
  // made once and kept in `prepared` (prepared_slot.h). A one-shot launch
  // is not worth the extra work of keeping it.
  bool cached = false;
  PreparedSlot prepared;
};
using DispatchRef = std::shared_ptr<const DispatchArgs>;

// A fill of `length` bytes of `dst` from `offset` with `value`.
struct FillOp {
  MemoryRef dst;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t value = 0;
};

// A copy of `length` bytes between two checked, non-overlapping spans.
struct CopyOp {
  MemoryRef dst;
  uint64_t dst_offset = 0;
  MemoryRef src;
  uint64_t src_offset = 0;
  uint64_t length = 0;
};

// Nothing to run: orders a graph node's successors after its predecessors.
struct JoinOp {};

// One node of a graph.
struct GraphNode {
  // A default node is a join: it runs nothing.
  std::variant<JoinOp, FillOp, CopyOp, DispatchRef> op;
  std::vector<uint32_t> after;  // predecessor indices, all smaller than this
};

// A checked, prepared DAG, replayed by each launch. Immutable.
struct GraphPlan {
  std::vector<GraphNode> nodes;  // in a topological order
};
using GraphRef = std::shared_ptr<const GraphPlan>;

// Per-queue, monotonic. Fence N is complete once the command that returned N
// and everything enqueued on that queue before it have completed.
using Fence = uint64_t;

// Called once on a backend thread with its fence's status: OK, or the first
// failure on the queue when that came at or before the fence (the rule of
// fence_timeline.h). Must not block and must not enqueue work.
using CompletionCallback = std::function<void(absl::Status)>;

// A native in-order queue. Commands run in enqueue order. Offsets and lengths
// are trusted: the core has checked them against Memory::size().
class Queue {
 public:
  virtual ~Queue() = default;  // drains queued work first

  virtual absl::StatusOr<Fence> EnqueueFill(const MemoryRef& dst,
                                            uint64_t offset, uint64_t length,
                                            uint8_t value) = 0;
  virtual absl::StatusOr<Fence> EnqueueCopy(const MemoryRef& dst,
                                            uint64_t dst_offset,
                                            const MemoryRef& src,
                                            uint64_t src_offset,
                                            uint64_t length) = 0;
  // Host to device. The queue keeps `bytes` alive until the write completes.
  virtual absl::StatusOr<Fence> EnqueueWrite(
      const MemoryRef& dst, uint64_t offset,
      std::shared_ptr<const std::string> bytes) = 0;
  // Device to host. `host` must stay valid until the returned fence completes.
  virtual absl::StatusOr<Fence> EnqueueRead(const MemoryRef& src,
                                            uint64_t offset, uint64_t length,
                                            void* host) = 0;
  // Runs `callback` once everything enqueued before it has completed.
  virtual absl::StatusOr<Fence> EnqueueHostCallback(
      CompletionCallback callback) = 0;
  // Later commands on this queue wait until `fence` of `other` completes
  // (hipStreamWaitEvent). `other` must be a queue of the same backend, and
  // `fence` must already have been returned by it.
  virtual absl::StatusOr<Fence> EnqueueWaitFor(Queue& other, Fence fence) = 0;
  virtual absl::StatusOr<Fence> EnqueueDispatch(DispatchRef dispatch) = 0;
  // Runs every node of `graph` once, each after its predecessors; nodes that
  // do not depend on each other may run concurrently. With `node_nanoseconds`
  // (sized to the graph, alive until the fence completes) the nodes run one
  // at a time and each one's duration is recorded: diagnostic, not fast.
  virtual absl::StatusOr<Fence> EnqueueGraph(
      GraphRef graph, std::vector<uint64_t>* node_nanoseconds) = 0;

  // Calls `callback` once `fence` has completed: at once when it already
  // has. Unlike EnqueueHostCallback, it does not wait for later commands.
  virtual void OnComplete(Fence fence, CompletionCallback callback) = 0;

  // The highest fence known complete; never decreases.
  virtual Fence completed() const = 0;
  // Blocks until `fence` completes (or the queue can complete nothing more);
  // returns the fence's status.
  virtual absl::Status Wait(Fence fence) = 0;

  // Whether Poll does anything: completions that arrive without help (the
  // CPU backend's workers, an executor's reports) need no poller.
  virtual bool NeedsPoll() const { return false; }
  // Retires work the device has finished on the calling thread, without
  // waiting for the device: fences are published and their callbacks run
  // here, whichever stream of the queue they belong to, so the call may take
  // as long as those callbacks (and wait for the queue's lock while a
  // submitter holds it). For a thread that polls anyway (a ring's serving
  // thread while it spins), so a completion needs no other thread's wake-up.
  // Returns whether anything was retired.
  virtual bool Poll() { return false; }
  // How long issued work has been outstanding without a fence completing
  // (zero when everything issued has completed): what a watchdog judges a
  // hung kernel by.
  virtual absl::Duration StalledSince(absl::Time now) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const DeviceProperties& properties() const = 0;

  // RESOURCE_EXHAUSTED when the allocation would pass
  // properties().memory_bytes.
  virtual absl::StatusOr<MemoryRef> Allocate(uint64_t bytes, MemoryKind kind,
                                             bool zeroed) = 0;
  virtual absl::StatusOr<std::unique_ptr<Queue>> CreateQueue() = 0;

  // Loads `entry` from a code object (an ELF shared object on the cpu
  // backend, a code object or cubin on hip) and reads its signature.
  // INVALID_ARGUMENT when the bytes are not loadable or lack the entry.
  virtual absl::StatusOr<KernelRef> LoadKernel(std::string_view code,
                                               const std::string& entry) = 0;

  // Bytes held by live allocations, including freed buffers still referenced
  // by queued commands.
  virtual uint64_t bytes_in_use() const = 0;

  // The descriptor kinds Memory::ExportFd can give on this machine.
  virtual std::vector<ExportKind> export_kinds() const = 0;

  // Memory another executor of the same device made, from its shm
  // descriptor (taking `fd`): the same pages, for this backend's queues, not
  // counted against its limit. FAILED_PRECONDITION "cross_executor_memory"
  // where this backend cannot run on foreign host memory.
  virtual absl::StatusOr<MemoryRef> ImportShm(int fd, uint64_t bytes,
                                              MemoryKind kind);

  // OK while the device works; once a fault has lost it (a GPU context lost
  // to a faulting kernel), the status that lost it. The CPU backend's device
  // is never lost: a kernel failure there poisons only its queue.
  virtual absl::Status device_status() const { return absl::OkStatus(); }

  // `lost` runs once, with the status that lost the device, on the thread
  // that found the fault (possibly under the backend's own locks: it must
  // not call into the backend); the HIP backend finds it when a queue
  // retires failed work. An executor ends on it so that hrxd starts a fresh
  // one: a lost context refuses every later call, whether hrxd's link or a
  // ring the executor serves drove the queue. Backends whose device is
  // never lost ignore it.
  using DeviceLostHandler = std::function<void(const absl::Status& why)>;
  virtual void OnDeviceLost(DeviceLostHandler lost) { (void)lost; }
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_BACKEND_H_
