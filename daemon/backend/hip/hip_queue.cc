#include "daemon/backend/hip/hip_queue.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/backend/hip/hip_graph.h"
#include "daemon/backend/hip/hip_memory.h"
#include "daemon/backend/hip/hip_status.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

constexpr char kHealthFix[] = "check the GPU's health (hrxctl status)";

const char* OpName(int op) {
  static constexpr const char* kNames[] = {
      "fill",     "copy",        "upload", "read", "marker", "cross-queue wait",
      "dispatch", "graph launch"};
  return kNames[op];
}

}  // namespace

HipEventPool::~HipEventPool() {
  (void)BindDevice(device_);
  absl::MutexLock lock(&mu_);
  for (hipEvent_t event : free_) (void)hipEventDestroy(event);
}

absl::StatusOr<HipEventPool::EventRef> HipEventPool::Take() {
  hipEvent_t event = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      event = free_.back();
      free_.pop_back();
    }
  }
  if (event == nullptr) {
    HRX_HIP_RETURN_IF_ERROR(
        hipEventCreateWithFlags(&event, hipEventDisableTiming),
        "create a completion event", "hipEventCreateWithFlags", kHealthFix);
  }
  return EventRef(new hipEvent_t(event),
                  [pool = shared_from_this()](const hipEvent_t* e) {
                    pool->Give(*e);
                    delete e;
                  });
}

void HipEventPool::Give(hipEvent_t event) {
  absl::MutexLock lock(&mu_);
  free_.push_back(event);
}

absl::StatusOr<std::unique_ptr<HipQueue>> HipQueue::Create(
    int device, std::shared_ptr<HipDeviceHealth> health) {
  HRX_RETURN_IF_ERROR(BindDevice(device));
  hipStream_t stream = nullptr;
  // Non-blocking: the daemon's queues never order behind the null stream.
  HRX_HIP_RETURN_IF_ERROR(
      hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), "create a queue",
      "hipStreamCreateWithFlags", kHealthFix);
  return std::unique_ptr<HipQueue>(
      new HipQueue(device, stream, std::move(health)));
}

HipQueue::HipQueue(int device, hipStream_t stream,
                   std::shared_ptr<HipDeviceHealth> health)
    : device_(device),
      stream_(stream),
      events_(std::make_shared<HipEventPool>(device)),
      bounce_(std::make_shared<HipPinnedPool>(device)),
      health_(std::move(health)),
      completions_([this] { RunCompletions(); }) {}

HipQueue::~HipQueue() {
  (void)Wait(timeline_.issued());
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  completions_.join();
  (void)BindDevice(device_);
  for (auto& [plan, cached] : execs_) (void)hipGraphExecDestroy(cached.exec);
  (void)hipStreamDestroy(stream_);
}

absl::StatusOr<Fence> HipQueue::Submit(Op op, const Issue& issue, Keep keep,
                                       const Kernel* kernel,
                                       CompletionCallback callback,
                                       std::function<void()> finish) {
  HRX_RETURN_IF_ERROR(BindDevice(device_));
  absl::MutexLock lock(&mu_);
  // After a fault the context is lost: nothing more reaches the device.
  if (!status_.ok()) return status_;
  if (issue) HRX_RETURN_IF_ERROR(issue(stream_));
  const Fence fence = timeline_.Issue();
  const bool needs_event = callback != nullptr;
  inflight_.push_back(InFlight{fence, nullptr, op, std::move(keep), kernel,
                               std::move(callback), std::move(finish)});
  if (needs_event || fence - last_event_fence_ >= kEventStride) {
    HRX_RETURN_IF_ERROR(RecordEventLocked());
  }
  return fence;
}

absl::Status HipQueue::RecordEventLocked() {
  HRX_ASSIGN_OR_RETURN(HipEventPool::EventRef event, events_->Take());
  HRX_HIP_RETURN_IF_ERROR(hipEventRecord(*event, stream_),
                          "record a completion event", "hipEventRecord",
                          kHealthFix);
  InFlight& newest = inflight_.back();
  newest.event = std::move(event);
  last_event_fence_ = newest.fence;
  ++pending_events_;
  return absl::OkStatus();
}

absl::Status HipQueue::EnsureEventLocked(Fence fence) {
  if (timeline_.completed() >= fence || last_event_fence_ >= fence ||
      inflight_.empty()) {
    return absl::OkStatus();
  }
  HRX_RETURN_IF_ERROR(BindDevice(device_));
  return RecordEventLocked();
}

void HipQueue::FailLocked(const absl::Status& why) {
  if (status_.ok()) status_ = why;
  (void)timeline_.FailIncomplete(status_);
}

absl::StatusOr<Fence> HipQueue::EnqueueFill(const MemoryRef& dst,
                                            uint64_t offset, uint64_t length,
                                            uint8_t value) {
  return Submit(Op::kFill,
                [&](hipStream_t stream) {
                  return IssueFill(*dst, offset, length, value, stream);
                },
                {dst, nullptr});
}

absl::StatusOr<Fence> HipQueue::EnqueueCopy(const MemoryRef& dst,
                                            uint64_t dst_offset,
                                            const MemoryRef& src,
                                            uint64_t src_offset,
                                            uint64_t length) {
  return Submit(Op::kCopy,
                [&](hipStream_t stream) {
                  return IssueCopy(*dst, dst_offset, *src, src_offset, length,
                                   stream);
                },
                {dst, src});
}

absl::StatusOr<Fence> HipQueue::EnqueueWrite(
    const MemoryRef& dst, uint64_t offset,
    std::shared_ptr<const std::string> bytes) {
  HipPinnedPool::BufferRef bounce;
  if (!bytes->empty()) {
    HRX_ASSIGN_OR_RETURN(bounce, bounce_->Take(bytes->size()));
    std::memcpy(bounce.get(), bytes->data(), bytes->size());
  }
  return Submit(Op::kWrite,
                [&](hipStream_t stream) {
                  if (bytes->empty()) return absl::OkStatus();
                  return HipStatus(
                      hipMemcpyAsync(DeviceAddress(*dst, offset), bounce.get(),
                                     bytes->size(), hipMemcpyDefault, stream),
                      "upload", "hipMemcpyAsync", kHealthFix);
                },
                {dst, bounce});
}

absl::StatusOr<Fence> HipQueue::EnqueueRead(const MemoryRef& src,
                                            uint64_t offset, uint64_t length,
                                            void* host) {
  if (length == 0) return Submit(Op::kRead, nullptr, {src, nullptr});
  HRX_ASSIGN_OR_RETURN(HipPinnedPool::BufferRef bounce, bounce_->Take(length));
  uint8_t* staged = bounce.get();
  return Submit(
      Op::kRead,
      [&](hipStream_t stream) {
        return HipStatus(hipMemcpyAsync(staged, DeviceAddress(*src, offset),
                                        length, hipMemcpyDefault, stream),
                         "read", "hipMemcpyAsync", kHealthFix);
      },
      {src, bounce}, nullptr, nullptr,
      [staged, host, length] { std::memcpy(host, staged, length); });
}

absl::StatusOr<Fence> HipQueue::EnqueueHostCallback(
    CompletionCallback callback) {
  return Submit(Op::kMarker, nullptr, {}, nullptr, std::move(callback));
}

HipEventPool::EventRef HipQueue::EventFor(Fence fence) {
  absl::MutexLock lock(&mu_);
  if (timeline_.completed() >= fence) return nullptr;
  if (!EnsureEventLocked(fence).ok() || !status_.ok()) return nullptr;
  // In-order stream: the first event at or after `fence` completes no
  // earlier than `fence` does.
  auto it = std::lower_bound(
      inflight_.begin(), inflight_.end(), fence,
      [](const InFlight& entry, Fence f) { return entry.fence < f; });
  while (it != inflight_.end() && it->event == nullptr) ++it;
  return it == inflight_.end() ? nullptr : it->event;
}

absl::StatusOr<Fence> HipQueue::EnqueueWaitFor(Queue& other, Fence fence) {
  HipEventPool::EventRef event = static_cast<HipQueue&>(other).EventFor(fence);
  return Submit(Op::kWait,
                [&](hipStream_t stream) {
                  if (event == nullptr) return absl::OkStatus();
                  return HipStatus(hipStreamWaitEvent(stream, *event, 0),
                                   "wait for another queue",
                                   "hipStreamWaitEvent", kHealthFix);
                },
                {event, nullptr});
}

absl::StatusOr<Fence> HipQueue::EnqueueDispatch(DispatchRef dispatch) {
  const Kernel* kernel = dispatch->kernel.get();
  return Submit(
      Op::kDispatch,
      [&](hipStream_t stream) { return IssueDispatch(*dispatch, stream); },
      {dispatch, nullptr}, kernel);
}

absl::StatusOr<hipGraphExec_t> HipQueue::ExecFor(const GraphRef& graph) {
  mu_.AssertHeld();
  auto it = execs_.find(graph.get());
  if (it != execs_.end() && it->second.plan.lock() == graph) {
    return it->second.exec;
  }
  // A miss: forget executables whose plans are gone (launches still in
  // flight finish first; the runtime frees them after).
  absl::erase_if(execs_, [](const auto& entry) {
    if (!entry.second.plan.expired()) return false;
    (void)hipGraphExecDestroy(entry.second.exec);
    return true;
  });
  HRX_ASSIGN_OR_RETURN(hipGraphExec_t exec, InstantiateGraph(*graph));
  execs_[graph.get()] = CachedExec{graph, exec};
  return exec;
}

absl::StatusOr<Fence> HipQueue::EnqueueGraph(
    GraphRef graph, std::vector<uint64_t>* node_nanoseconds) {
  if (node_nanoseconds == nullptr) {
    return Submit(Op::kGraph,
                  [&](hipStream_t stream) -> absl::Status {
                    HRX_ASSIGN_OR_RETURN(hipGraphExec_t exec, ExecFor(graph));
                    return HipStatus(hipGraphLaunch(exec, stream),
                                     "launch a graph", "hipGraphLaunch",
                                     kHealthFix);
                  },
                  {graph, nullptr});
  }
  // Profiled: the nodes one at a time, each between two timing events.
  const size_t count = graph->nodes.size();
  auto marks = std::shared_ptr<std::vector<hipEvent_t>>(
      new std::vector<hipEvent_t>(2 * count, nullptr),
      [device = device_](std::vector<hipEvent_t>* events) {
        (void)BindDevice(device);
        for (hipEvent_t event : *events) {
          if (event != nullptr) (void)hipEventDestroy(event);
        }
        delete events;
      });
  for (hipEvent_t& event : *marks) {
    HRX_HIP_RETURN_IF_ERROR(hipEventCreateWithFlags(&event, hipEventDefault),
                            "create a timing event", "hipEventCreateWithFlags",
                            kHealthFix);
  }
  auto finish = [marks, node_nanoseconds, count] {
    for (size_t i = 0; i < count; ++i) {
      float ms = 0;
      if (hipEventElapsedTime(&ms, (*marks)[2 * i], (*marks)[2 * i + 1]) ==
          hipSuccess) {
        (*node_nanoseconds)[i] = static_cast<uint64_t>(ms * 1e6);
      }
    }
  };
  return Submit(
      Op::kGraph,
      [&](hipStream_t stream) -> absl::Status {
        for (size_t i = 0; i < count; ++i) {
          HRX_HIP_RETURN_IF_ERROR(hipEventRecord((*marks)[2 * i], stream),
                                  "time a graph node", "hipEventRecord",
                                  kHealthFix);
          HRX_RETURN_IF_ERROR(IssueNode(graph->nodes[i], stream));
          HRX_HIP_RETURN_IF_ERROR(hipEventRecord((*marks)[2 * i + 1], stream),
                                  "time a graph node", "hipEventRecord",
                                  kHealthFix);
        }
        return absl::OkStatus();
      },
      {graph, marks}, nullptr, nullptr, std::move(finish));
}

void HipQueue::OnComplete(Fence fence, CompletionCallback callback) {
  absl::Status lost;
  {
    absl::MutexLock lock(&mu_);
    if (timeline_.completed() < fence && status_.ok()) {
      if (absl::Status recorded = EnsureEventLocked(fence); !recorded.ok()) {
        FailLocked(recorded);
      }
    }
    // A queue that cannot go on completes nothing more: the waiter hears
    // the failure now.
    if (timeline_.completed() < fence) lost = status_;
  }
  if (!lost.ok()) return callback(lost);
  timeline_.OnComplete(fence, std::move(callback));
}

Fence HipQueue::completed() const { return timeline_.completed(); }

absl::Duration HipQueue::StalledSince(absl::Time now) const {
  return timeline_.StalledSince(now);
}

absl::Status HipQueue::Wait(Fence fence) {
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status recorded = EnsureEventLocked(fence); !recorded.ok()) {
      FailLocked(recorded);
    }
  }
  // Poll the event ourselves first: a small command completes within the
  // spin, and retiring it here saves waking this thread from the
  // completion thread's publish.
  const absl::Time give_up = absl::Now() + kWaitSpin;
  while (timeline_.completed() < fence && timeline_.failure().ok() &&
         absl::Now() < give_up) {
    Poll();
  }
  return timeline_.Wait(fence, /*stop_at_failure=*/true);
}

bool HipQueue::Poll() {
  // Any thread may poll: the event queries need this queue's device.
  if (!BindDevice(device_).ok()) return false;
  if (!retire_mu_.TryLock()) return false;  // another thread is retiring
  const bool retired = RetireCompleted(nullptr, hipSuccess);
  retire_mu_.Unlock();
  return retired;
}

absl::Status HipQueue::DescribeFault(hipError_t error,
                                     const InFlight& entry) const {
  const std::string failure = absl::StrFormat("%s: %s", hipGetErrorName(error),
                                              hipGetErrorString(error));
  if (entry.op == Op::kDispatch) {
    return Refusal(
        Reason::kKernelFailed,
        absl::StrFormat("a dispatch of %s failed on the GPU (%s); the GPU "
                        "context is lost, so this daemon's queues fail from "
                        "here. Fix: check "
                        "the kernel's arguments and bounds, then restart hrxd.",
                        entry.kernel->entry(), failure));
  }
  if (entry.op == Op::kGraph) {
    // Copies and fills are checked against their buffers; a graph that
    // faults does so in one of its kernels.
    std::vector<std::string> kernels;
    const auto& plan = *static_cast<const GraphPlan*>(entry.keep[0].get());
    for (const GraphNode& node : plan.nodes) {
      const auto* dispatch = std::get_if<DispatchRef>(&node.op);
      if (dispatch == nullptr) continue;
      const std::string& name = (*dispatch)->kernel->entry();
      if (std::find(kernels.begin(), kernels.end(), name) == kernels.end()) {
        kernels.push_back(name);
      }
    }
    if (!kernels.empty()) {
      return Refusal(
          Reason::kKernelFailed,
          absl::StrFormat(
              "a graph launch with dispatches of %s failed on the "
              "GPU (%s); the GPU context is lost, so this daemon's queues fail "
              "from here. Fix: check those kernels' arguments and bounds, then "
              "restart hrxd.",
              absl::StrJoin(kernels, ", "), failure));
    }
  }
  return Refusal(
      Reason::kDeviceFault,
      absl::StrFormat("the GPU failed while this queue ran a %s (%s); the GPU "
                      "context is lost, so this daemon's queues fail from "
                      "here. Fix: restart "
                      "hrxd, and check the GPU's health.",
                      OpName(static_cast<int>(entry.op)), failure));
}

bool HipQueue::RetireCompleted(const HipEventPool::EventRef& synced,
                               hipError_t synced_error) {
  std::vector<InFlight> done;
  bool faulted = false;
  {
    absl::MutexLock lock(&mu_);
    auto pop_through = [&](size_t last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (size_t i = 0; i <= last; ++i) {
        if (inflight_.front().event != nullptr) --pending_events_;
        done.push_back(std::move(inflight_.front()));
        inflight_.pop_front();
      }
    };
    while (pending_events_ > 0) {
      // The oldest event; entries before it complete with it.
      size_t next = 0;
      while (inflight_[next].event == nullptr) ++next;
      const HipEventPool::EventRef& event = inflight_[next].event;
      const hipError_t state =
          event == synced ? synced_error : hipEventQuery(*event);
      if (state == hipErrorNotReady) break;
      if (state != hipSuccess) {
        // The commands up to the failed event ran without events of their
        // own: blame the first that runs kernels, else the event's command.
        size_t culprit = next;
        for (size_t i = 0; i <= next; ++i) {
          if (inflight_[i].op == Op::kDispatch ||
              inflight_[i].op == Op::kGraph) {
            culprit = i;
            break;
          }
        }
        FailLocked(DescribeFault(state, inflight_[culprit]));
        health_->Lost(status_);
        pop_through(inflight_.size() - 1);
        faulted = true;
        break;
      }
      pop_through(next);
    }
  }
  if (done.empty()) return false;
  // Results reach the host before anyone learns the fence completed.
  if (!faulted) {
    for (InFlight& entry : done) {
      if (entry.finish) entry.finish();
    }
  }
  const Fence last = faulted ? timeline_.issued() : done.back().fence;
  // Host callbacks first, as the commands they are; then the waiters.
  timeline_.Publish(last, [this, &done](absl::Status) {
    for (InFlight& entry : done) {
      if (entry.callback) entry.callback(timeline_.StatusOf(entry.fence));
    }
  });
  done.clear();  // releases memory, kernels and graphs outside mu_
  return true;
}

void HipQueue::RunCompletions() {
  (void)BindDevice(device_);
  while (true) {
    HipEventPool::EventRef oldest;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || pending_events_ > 0;
      };
      mu_.Await(absl::Condition(&ready));
      if (pending_events_ == 0) break;  // stopping, nothing left to wait for
      size_t next = 0;
      while (inflight_[next].event == nullptr) ++next;
      oldest = inflight_[next].event;
    }
    // A waiter may retire it meanwhile: the event stays ours (it is not
    // recycled while referenced), and retiring finds nothing new then.
    const hipError_t error = hipEventSynchronize(*oldest);
    absl::MutexLock retiring(&retire_mu_);
    (void)RetireCompleted(oldest, error);
  }
}

}  // namespace hrx::backend
