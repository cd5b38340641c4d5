#include "daemon/backend/cpu/cpu_queue.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "daemon/backend/cpu/cpu_kernel.h"
#include "daemon/backend/cpu/cpu_memory.h"
#include "daemon/backend/cpu/object_unloader.h"
#include "shared/overloaded.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

// The core only hands a queue memory from the same backend.
uint8_t* Bytes(const MemoryRef& memory) { return memory->host_address(); }

}  // namespace

CpuQueue::CpuQueue(ThreadPool& pool)
    : pool_(pool), worker_([this] { RunWorker(); }) {}

CpuQueue::~CpuQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

Fence CpuQueue::Enqueue(Work work, CompletionCallback callback) {
  absl::MutexLock lock(&mu_);
  const Fence fence = timeline_.Issue();
  pending_.push_back(Entry{fence, std::move(work), std::move(callback)});
  return fence;
}

void CpuQueue::RunWorker() {
  const ObjectUnloader::OwnThread own;  // never a kernel's thread
  while (true) {
    Entry entry;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !pending_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (pending_.empty()) return;  // stopping and drained
      entry = std::move(pending_.front());
      pending_.pop_front();
    }
    absl::Status result = entry.work ? entry.work() : absl::OkStatus();
    // Let go of what the command held (memory, kernels, staging) before its
    // completion is published: whoever observes the fence must also see
    // those released — reservations ride on that memory.
    entry.work = nullptr;
    timeline_.Fail(entry.fence, std::move(result));
    // A host callback runs before the fence's other waiters, as the command
    // it is.
    timeline_.Publish(entry.fence, std::move(entry.callback));
  }
}

absl::StatusOr<Fence> CpuQueue::EnqueueFill(const MemoryRef& dst,
                                            uint64_t offset, uint64_t length,
                                            uint8_t value) {
  return Enqueue(
      [dst, offset, length, value] {
        std::memset(Bytes(dst) + offset, value, length);
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueCopy(const MemoryRef& dst,
                                            uint64_t dst_offset,
                                            const MemoryRef& src,
                                            uint64_t src_offset,
                                            uint64_t length) {
  return Enqueue(
      [dst, dst_offset, src, src_offset, length] {
        // memmove: the core refuses overlap, but distinct views of one memfd
        // mapping must never be undefined behaviour here.
        std::memmove(Bytes(dst) + dst_offset, Bytes(src) + src_offset, length);
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueWrite(
    const MemoryRef& dst, uint64_t offset,
    std::shared_ptr<const std::string> bytes) {
  return Enqueue(
      [dst, offset, bytes = std::move(bytes)] {
        std::memcpy(Bytes(dst) + offset, bytes->data(), bytes->size());
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueRead(const MemoryRef& src,
                                            uint64_t offset, uint64_t length,
                                            void* host) {
  return Enqueue(
      [src, offset, length, host] {
        std::memcpy(host, Bytes(src) + offset, length);
        return absl::OkStatus();
      },
      nullptr);
}

absl::StatusOr<Fence> CpuQueue::EnqueueHostCallback(
    CompletionCallback callback) {
  return Enqueue(nullptr, std::move(callback));
}

absl::StatusOr<Fence> CpuQueue::EnqueueWaitFor(Queue& other, Fence fence) {
  return Enqueue(
      [&other, fence] {
        absl::Notification done;
        absl::Status other_status;
        other.OnComplete(fence, [&](absl::Status status) {
          other_status = status;
          done.Notify();
        });
        done.WaitForNotification();
        return other_status;
      },
      nullptr);
}

absl::Status CpuQueue::RunDispatch(const DispatchArgs& dispatch_args) {
  const DispatchArgs* dispatch = &dispatch_args;
  const auto& kernel = static_cast<const CpuKernel&>(*dispatch->kernel);
  std::vector<hrx_cpu_binding> bindings;
  bindings.reserve(dispatch->bindings.size());
  for (const BoundBuffer& bound : dispatch->bindings) {
    bindings.push_back(hrx_cpu_binding{
        bound.memory->host_address() + bound.offset, bound.length});
  }
  const auto& grid = dispatch->grid;
  const uint64_t groups = uint64_t{grid[0]} * grid[1] * grid[2];
  std::atomic<int> failure{0};
  std::atomic<uint64_t> failed_group{0};
  pool_.ParallelFor(groups, [&](uint64_t index) {
    hrx_cpu_workgroup workgroup{};
    for (int d = 0; d < 3; ++d) {
      workgroup.grid[d] = grid[d];
      workgroup.block[d] = dispatch->block[d];
    }
    workgroup.group[0] = static_cast<uint32_t>(index % grid[0]);
    workgroup.group[1] = static_cast<uint32_t>((index / grid[0]) % grid[1]);
    workgroup.group[2] =
        static_cast<uint32_t>(index / (uint64_t{grid[0]} * grid[1]));
    workgroup.constants =
        reinterpret_cast<const uint8_t*>(dispatch->constants.data());
    workgroup.constants_bytes =
        static_cast<uint32_t>(dispatch->constants.size());
    workgroup.bindings = bindings.data();
    workgroup.binding_count = static_cast<uint32_t>(bindings.size());
    const int rc = kernel.function()(&workgroup);
    int expected = 0;
    if (rc != 0 && failure.compare_exchange_strong(expected, rc)) {
      failed_group = index;
    }
  });
  if (failure.load() != 0) {
    return Refusal(
        Reason::kKernelFailed,
        absl::StrFormat(
            "kernel %s returned %d in workgroup %u of %u. "
            "Fix: check the dispatch's arguments against the kernel's "
            "contract; this queue reports the fault until the daemon "
            "restarts.",
            kernel.entry(), failure.load(), failed_group.load(), groups));
  }
  return absl::OkStatus();
}

absl::StatusOr<Fence> CpuQueue::EnqueueDispatch(DispatchRef dispatch) {
  return Enqueue(
      [this, dispatch = std::move(dispatch)] { return RunDispatch(*dispatch); },
      nullptr);
}

absl::Status CpuQueue::RunNode(const GraphNode& node) {
  return std::visit(
      Overloaded{
          [](const FillOp& fill) {
            std::memset(Bytes(fill.dst) + fill.offset, fill.value, fill.length);
            return absl::OkStatus();
          },
          [](const CopyOp& copy) {
            std::memmove(Bytes(copy.dst) + copy.dst_offset,
                         Bytes(copy.src) + copy.src_offset, copy.length);
            return absl::OkStatus();
          },
          [this](const DispatchRef& dispatch) {
            return RunDispatch(*dispatch);
          },
          [](const JoinOp&) { return absl::OkStatus(); },
      },
      node.op);
}

absl::StatusOr<Fence> CpuQueue::EnqueueGraph(
    GraphRef graph, std::vector<uint64_t>* node_nanoseconds) {
  return Enqueue(
      [this, graph = std::move(graph), node_nanoseconds]() -> absl::Status {
        const std::vector<GraphNode>& nodes = graph->nodes;
        if (node_nanoseconds != nullptr) {
          // Profiled: one node at a time, in order, each timed.
          for (size_t i = 0; i < nodes.size(); ++i) {
            const auto start = std::chrono::steady_clock::now();
            if (absl::Status s = RunNode(nodes[i]); !s.ok()) return s;
            (*node_nanoseconds)[i] = static_cast<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count());
          }
          return absl::OkStatus();
        }
        // Level by level: every node whose predecessors have all run goes
        // into the next wave, and a wave's nodes run concurrently.
        std::vector<uint32_t> level(nodes.size(), 0);
        uint32_t deepest = 0;
        for (size_t i = 0; i < nodes.size(); ++i) {
          for (uint32_t p : nodes[i].after) {
            level[i] = std::max(level[i], level[p] + 1);
          }
          deepest = std::max(deepest, level[i]);
        }
        std::vector<std::vector<uint32_t>> waves(deepest + 1);
        for (size_t i = 0; i < nodes.size(); ++i) {
          waves[level[i]].push_back(static_cast<uint32_t>(i));
        }
        absl::Mutex mu;
        absl::Status first_error;
        for (const std::vector<uint32_t>& wave : waves) {
          pool_.ParallelFor(wave.size(), [&](uint64_t k) {
            absl::Status s = RunNode(nodes[wave[k]]);
            if (!s.ok()) {
              absl::MutexLock lock(&mu);
              if (first_error.ok()) first_error = s;
            }
          });
          absl::MutexLock lock(&mu);
          if (!first_error.ok()) return first_error;
        }
        return absl::OkStatus();
      },
      nullptr);
}

void CpuQueue::OnComplete(Fence fence, CompletionCallback callback) {
  timeline_.OnComplete(fence, std::move(callback));
}

Fence CpuQueue::completed() const { return timeline_.completed(); }

absl::Duration CpuQueue::StalledSince(absl::Time now) const {
  return timeline_.StalledSince(now);
}

absl::Status CpuQueue::Wait(Fence fence) { return timeline_.Wait(fence); }

}  // namespace hrx::backend
