#include "daemon/backend/remote/remote_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/backend/remote/remote_backend.h"
#include "shared/overloaded.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;
using backend::Fence;

absl::Status SetSpan(const backend::MemoryRef& memory, uint64_t offset,
                     uint64_t length, const std::shared_ptr<ExecutorLink>& link,
                     wire::Span* out) {
  HRX_ASSIGN_OR_RETURN(uint64_t id, RemoteIdOf(memory, link));
  out->set_memory(id);
  out->set_offset(offset);
  out->set_length(length);
  return absl::OkStatus();
}

absl::Status SetDispatch(const backend::DispatchArgs& dispatch,
                         const std::shared_ptr<ExecutorLink>& link,
                         wire::Dispatch* out) {
  HRX_ASSIGN_OR_RETURN(uint64_t kernel, RemoteIdOf(dispatch.kernel, *link));
  out->set_kernel(kernel);
  for (int d = 0; d < 3; ++d) {
    out->add_grid(dispatch.grid[d]);
    out->add_block(dispatch.block[d]);
  }
  out->set_constants(dispatch.constants);
  for (const backend::BoundBuffer& binding : dispatch.bindings) {
    HRX_RETURN_IF_ERROR(SetSpan(binding.memory, binding.offset, binding.length,
                                link, out->add_bindings()));
  }
  return absl::OkStatus();
}

// The executor's id of `plan`, defined there (one message, ahead of the
// launch on the same socket) on first use.
absl::StatusOr<uint64_t> GraphOn(const backend::GraphRef& plan,
                                 const std::shared_ptr<ExecutorLink>& link) {
  if (uint64_t id = link->CachedGraph(plan); id != 0) return id;
  wire::Request request;
  wire::DefineGraph* define = request.mutable_define_graph();
  define->set_graph(link->NewId());
  for (const backend::GraphNode& node : plan->nodes) {
    wire::GraphNode* out = define->add_nodes();
    out->mutable_after()->Add(node.after.begin(), node.after.end());
    HRX_RETURN_IF_ERROR(std::visit(
        Overloaded{
            [&](const backend::FillOp& fill) {
              out->mutable_fill()->set_value(fill.value);
              return SetSpan(fill.dst, fill.offset, fill.length, link,
                             out->mutable_fill()->mutable_dst());
            },
            [&](const backend::CopyOp& copy) {
              HRX_RETURN_IF_ERROR(SetSpan(copy.dst, copy.dst_offset,
                                          copy.length, link,
                                          out->mutable_copy()->mutable_dst()));
              return SetSpan(copy.src, copy.src_offset, copy.length, link,
                             out->mutable_copy()->mutable_src());
            },
            [&](const backend::DispatchRef& dispatch) {
              return SetDispatch(*dispatch, link, out->mutable_dispatch());
            },
            [&](const backend::JoinOp&) {
              out->mutable_join();
              return absl::OkStatus();
            },
        },
        node.op));
  }
  const uint64_t id = define->graph();
  link->Post(request);
  link->CacheGraph(plan, id);
  return id;
}

}  // namespace

RemoteQueue::RemoteQueue(std::shared_ptr<ExecutorLink> link, uint64_t id)
    : link_(std::move(link)), id_(id) {
  link_->Attach(id_, this);
}

RemoteQueue::~RemoteQueue() {
  (void)timeline_.Wait(timeline_.issued());
  link_->Detach(id_);
}

absl::StatusOr<Fence> RemoteQueue::Send(wire::Request& request, Held held,
                                        ReadTarget read,
                                        std::vector<uint64_t>* profile) {
  HRX_RETURN_IF_ERROR(link_->lost());
  absl::MutexLock lock(&mu_);
  // The loss may have been delivered since the check above.
  if (lost_) return link_->lost();
  const uint64_t fence = timeline_.Issue();
  // Where replies land is known before the executor can answer.
  if (read.host != nullptr) reads_[fence] = read;
  if (profile != nullptr) profiles_[fence] = profile;
  request.mutable_enqueue()->set_queue(id_);
  request.mutable_enqueue()->set_fence(fence);
  held_.emplace_back(fence, std::move(held));
  // Sent under the lock: the executor sees this queue's fences in order.
  link_->Post(request);
  return fence;
}

absl::StatusOr<Fence> RemoteQueue::EnqueueFill(const backend::MemoryRef& dst,
                                               uint64_t offset, uint64_t length,
                                               uint8_t value) {
  wire::Request request;
  wire::Fill* fill = request.mutable_enqueue()->mutable_fill();
  HRX_RETURN_IF_ERROR(SetSpan(dst, offset, length, link_, fill->mutable_dst()));
  fill->set_value(value);
  return Send(request, Held{{dst}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueCopy(const backend::MemoryRef& dst,
                                               uint64_t dst_offset,
                                               const backend::MemoryRef& src,
                                               uint64_t src_offset,
                                               uint64_t length) {
  wire::Request request;
  wire::Copy* copy = request.mutable_enqueue()->mutable_copy();
  HRX_RETURN_IF_ERROR(
      SetSpan(dst, dst_offset, length, link_, copy->mutable_dst()));
  HRX_RETURN_IF_ERROR(
      SetSpan(src, src_offset, length, link_, copy->mutable_src()));
  return Send(request, Held{{dst, src}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueWrite(
    const backend::MemoryRef& dst, uint64_t offset,
    std::shared_ptr<const std::string> bytes) {
  wire::Request request;
  wire::Write* write = request.mutable_enqueue()->mutable_write();
  HRX_RETURN_IF_ERROR(
      SetSpan(dst, offset, bytes->size(), link_, write->mutable_dst()));
  write->set_data(*bytes);
  return Send(request, Held{{dst}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueRead(const backend::MemoryRef& src,
                                               uint64_t offset, uint64_t length,
                                               void* host) {
  wire::Request request;
  HRX_RETURN_IF_ERROR(
      SetSpan(src, offset, length, link_,
              request.mutable_enqueue()->mutable_read()->mutable_src()));
  return Send(request, Held{{src}}, ReadTarget{host, length});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueHostCallback(
    backend::CompletionCallback callback) {
  wire::Request request;
  request.mutable_enqueue()->mutable_marker();
  HRX_ASSIGN_OR_RETURN(Fence fence, Send(request, Held{}, ReadTarget{}));
  OnComplete(fence, std::move(callback));
  return fence;
}

absl::StatusOr<Fence> RemoteQueue::EnqueueWaitFor(backend::Queue& other,
                                                  Fence fence) {
  auto* remote = dynamic_cast<RemoteQueue*>(&other);
  wire::Request request;
  wire::WaitFor* wait = request.mutable_enqueue()->mutable_wait_for();
  if (remote == nullptr || remote->link_ != link_) {
    return Refusal(Reason::kCrossExecutorMemory,
                   "wait for a queue of another executor. Fix: wait on "
                   "events of the same tenant's streams.");
  }
  wait->set_other_queue(remote->id_);
  wait->set_other_fence(fence);
  return Send(request, Held{}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueDispatch(
    backend::DispatchRef dispatch) {
  wire::Request request;
  HRX_RETURN_IF_ERROR(SetDispatch(
      *dispatch, link_, request.mutable_enqueue()->mutable_dispatch()));
  return Send(request, Held{{dispatch}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueGraph(
    backend::GraphRef graph, std::vector<uint64_t>* node_nanoseconds) {
  HRX_ASSIGN_OR_RETURN(uint64_t id, GraphOn(graph, link_));
  wire::Request request;
  request.mutable_enqueue()->mutable_graph()->set_graph(id);
  request.mutable_enqueue()->mutable_graph()->set_profiled(node_nanoseconds !=
                                                           nullptr);
  return Send(request, Held{{graph}}, ReadTarget{}, node_nanoseconds);
}

void RemoteQueue::OnComplete(Fence fence,
                             backend::CompletionCallback callback) {
  timeline_.OnComplete(fence, std::move(callback));
}

Fence RemoteQueue::completed() const { return timeline_.completed(); }

absl::Status RemoteQueue::Wait(Fence fence) { return timeline_.Wait(fence); }

void RemoteQueue::OnProgress(uint64_t completed) {
  {
    absl::MutexLock lock(&mu_);
    completed = std::min(completed, timeline_.issued());
    if (completed <= timeline_.completed()) return;
    // What the commands held goes before their fences complete: whoever
    // sees a new fence (a callback, or OnComplete on another thread) must
    // also see the memory and its charge released.
    while (!held_.empty() && held_.front().first <= completed) {
      held_.pop_front();
    }
    reads_.erase(reads_.begin(), reads_.upper_bound(completed));
    profiles_.erase(profiles_.begin(), profiles_.upper_bound(completed));
  }
  timeline_.Publish(completed);
}

void RemoteQueue::OnFailed(uint64_t fence, absl::Status status) {
  timeline_.Fail(fence, std::move(status));
}

void RemoteQueue::OnReadData(uint64_t fence, std::string data) {
  absl::MutexLock lock(&mu_);
  auto it = reads_.find(fence);
  if (it == reads_.end()) return;
  std::memcpy(it->second.host, data.data(),
              std::min<uint64_t>(data.size(), it->second.length));
  reads_.erase(it);
}

void RemoteQueue::OnProfile(uint64_t fence, std::vector<uint64_t> nanoseconds) {
  absl::MutexLock lock(&mu_);
  auto it = profiles_.find(fence);
  if (it == profiles_.end()) return;
  const size_t count = std::min(nanoseconds.size(), it->second->size());
  std::copy_n(nanoseconds.begin(), count, it->second->begin());
  profiles_.erase(it);
}

void RemoteQueue::OnLost(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    lost_ = true;  // no fence is issued after this
  }
  // Nothing more will complete: everything outstanding ends with the loss.
  OnProgress(timeline_.FailIncomplete(std::move(status)));
}

absl::Duration RemoteQueue::StalledSince(absl::Time now) const {
  return timeline_.StalledSince(now);
}

}  // namespace hrx::backend::remote
