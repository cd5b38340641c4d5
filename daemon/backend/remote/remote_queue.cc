#include "daemon/backend/remote/remote_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/backend/remote/op_codec.h"
#include "daemon/backend/remote/remote_backend.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;
using backend::Fence;

// The ids in `link`'s executor of the objects an op names.
class LinkNames final : public RemoteNames {
 public:
  explicit LinkNames(const std::shared_ptr<ExecutorLink>& link) : link_(link) {}
  absl::StatusOr<uint64_t> MemoryId(const backend::MemoryRef& memory) override {
    return RemoteIdOf(memory, link_);
  }
  absl::StatusOr<uint64_t> KernelId(const backend::KernelRef& kernel) override {
    return RemoteIdOf(kernel, *link_);
  }

 private:
  const std::shared_ptr<ExecutorLink>& link_;
};

// A dispatch defined in an executor: kept in the dispatch's prepared slot,
// so it lives exactly as long as hrxd holds the dispatch (a stream's cache,
// a queued launch), and the executor forgets it then.
class DefinedDispatch {
 public:
  DefinedDispatch(std::weak_ptr<ExecutorLink> link, uint64_t id)
      : link_(std::move(link)), id_(id) {}
  ~DefinedDispatch() {
    if (auto link = link_.lock())
      link->Forget(wire::Forget::KIND_DISPATCH, id_);
  }
  uint64_t id() const { return id_; }

 private:
  const std::weak_ptr<ExecutorLink> link_;
  const uint64_t id_;
};

// The executor's id of `dispatch`, defined there (one message, ahead of the
// launch on the same socket) on first use; 0 for a dispatch no cache keeps
// (one frame, sent whole, costs less than a definition, a launch and a
// forget) or one another backend prepared first.
absl::StatusOr<uint64_t> DispatchOn(const backend::DispatchArgs& dispatch,
                                    const std::shared_ptr<ExecutorLink>& link) {
  if (!dispatch.cached) return 0;
  auto defined = dispatch.prepared.GetOrMake<DefinedDispatch>(
      link.get(),
      [&]() -> absl::StatusOr<std::shared_ptr<const DefinedDispatch>> {
        wire::Request request;
        wire::DefineDispatch* define = request.mutable_define_dispatch();
        LinkNames names(link);
        HRX_RETURN_IF_ERROR(
            EncodeDispatch(dispatch, names, define->mutable_args()));
        define->set_dispatch(link->NewId());
        link->Post(request);
        return std::make_shared<const DefinedDispatch>(link,
                                                       define->dispatch());
      });
  if (!defined.ok()) return defined.status();
  return *defined == nullptr ? 0 : (*defined)->id();
}

}  // namespace

absl::StatusOr<uint64_t> GraphOn(const backend::GraphRef& plan,
                                 const std::shared_ptr<ExecutorLink>& link) {
  if (uint64_t id = link->CachedGraph(plan); id != 0) return id;
  wire::Request request;
  wire::DefineGraph* define = request.mutable_define_graph();
  LinkNames names(link);
  HRX_RETURN_IF_ERROR(EncodeGraph(*plan, names, define));
  define->set_graph(link->NewId());
  const uint64_t id = define->graph();
  link->Post(request);
  link->CacheGraph(plan, id);
  return id;
}

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
  LinkNames names(link_);
  HRX_RETURN_IF_ERROR(EncodeFill(backend::FillOp{dst, offset, length, value},
                                 names,
                                 request.mutable_enqueue()->mutable_fill()));
  return Send(request, Held{{dst}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueCopy(const backend::MemoryRef& dst,
                                               uint64_t dst_offset,
                                               const backend::MemoryRef& src,
                                               uint64_t src_offset,
                                               uint64_t length) {
  wire::Request request;
  LinkNames names(link_);
  HRX_RETURN_IF_ERROR(
      EncodeCopy(backend::CopyOp{dst, dst_offset, src, src_offset, length},
                 names, request.mutable_enqueue()->mutable_copy()));
  return Send(request, Held{{dst, src}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueWrite(
    const backend::MemoryRef& dst, uint64_t offset,
    std::shared_ptr<const std::string> bytes) {
  wire::Request request;
  LinkNames names(link_);
  HRX_RETURN_IF_ERROR(EncodeWrite(dst, offset, *bytes, names,
                                  request.mutable_enqueue()->mutable_write()));
  return Send(request, Held{{dst}}, ReadTarget{});
}

absl::StatusOr<Fence> RemoteQueue::EnqueueRead(const backend::MemoryRef& src,
                                               uint64_t offset, uint64_t length,
                                               void* host) {
  wire::Request request;
  LinkNames names(link_);
  HRX_RETURN_IF_ERROR(
      EncodeSpan(src, offset, length, names,
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
  HRX_ASSIGN_OR_RETURN(uint64_t id, DispatchOn(*dispatch, link_));
  if (id != 0) {
    request.mutable_enqueue()->mutable_launch_dispatch()->set_dispatch(id);
  } else {
    LinkNames names(link_);
    HRX_RETURN_IF_ERROR(EncodeDispatch(
        *dispatch, names, request.mutable_enqueue()->mutable_dispatch()));
  }
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
