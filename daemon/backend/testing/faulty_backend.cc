#include "daemon/backend/testing/faulty_backend.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace hrx::backend::testing {

// Forwards to a real queue, applying its backend's faults.
class FaultyQueue final : public Queue {
 public:
  FaultyQueue(FaultyBackend& owner, std::unique_ptr<Queue> inner)
      : owner_(owner), inner_(std::move(inner)) {}
  ~FaultyQueue() override {
    Release();  // nothing may wait forever
    owner_.Forget(this);
  }

  absl::StatusOr<Fence> EnqueueFill(const MemoryRef& dst, uint64_t offset,
                                    uint64_t length, uint8_t value) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueFill(dst, offset, length, value);
  }
  absl::StatusOr<Fence> EnqueueCopy(const MemoryRef& dst, uint64_t dst_offset,
                                    const MemoryRef& src, uint64_t src_offset,
                                    uint64_t length) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueCopy(dst, dst_offset, src, src_offset, length);
  }
  absl::StatusOr<Fence> EnqueueWrite(
      const MemoryRef& dst, uint64_t offset,
      std::shared_ptr<const std::string> bytes) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueWrite(dst, offset, std::move(bytes));
  }
  absl::StatusOr<Fence> EnqueueRead(const MemoryRef& src, uint64_t offset,
                                    uint64_t length, void* host) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueRead(src, offset, length, host);
  }
  absl::StatusOr<Fence> EnqueueHostCallback(
      CompletionCallback callback) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueHostCallback(std::move(callback));
  }
  absl::StatusOr<Fence> EnqueueWaitFor(Queue& other, Fence fence) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueWaitFor(*static_cast<FaultyQueue&>(other).inner_,
                                  fence);
  }
  absl::StatusOr<Fence> EnqueueDispatch(DispatchRef dispatch) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueDispatch(std::move(dispatch));
  }
  absl::StatusOr<Fence> EnqueueGraph(
      GraphRef graph, std::vector<uint64_t>* node_nanoseconds) override {
    if (absl::Status lost = owner_.faults().lost; !lost.ok()) return lost;
    return inner_->EnqueueGraph(std::move(graph), node_nanoseconds);
  }

  void OnComplete(Fence fence, CompletionCallback callback) override {
    {
      absl::MutexLock lock(&mu_);
      if (holding_) {
        held_.push_back({fence, std::move(callback)});
        return;
      }
    }
    Forward(fence, std::move(callback));
  }
  Fence completed() const override {
    absl::MutexLock lock(&mu_);
    const Fence real = inner_->completed();
    return holding_ ? std::min(real, visible_) : real;
  }
  absl::Status Wait(Fence fence) override { return inner_->Wait(fence); }
  absl::Duration StalledSince(absl::Time now) const override {
    return inner_->StalledSince(now);
  }

  void Hold() {
    absl::MutexLock lock(&mu_);
    if (holding_) return;
    holding_ = true;
    visible_ = inner_->completed();
  }
  // Lets held completions run once their real work has finished.
  void Release() {
    std::vector<Held> held;
    {
      absl::MutexLock lock(&mu_);
      holding_ = false;
      held.swap(held_);
    }
    std::stable_sort(
        held.begin(), held.end(),
        [](const Held& a, const Held& b) { return a.fence < b.fence; });
    for (Held& one : held) Forward(one.fence, std::move(one.callback));
  }
  size_t held() const {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }

 private:
  struct Held {
    Fence fence;
    CompletionCallback callback;
  };
  void Forward(Fence fence, CompletionCallback callback) {
    // The backend outlives its queues; this queue may be mid-destruction
    // (its real queue drains) when the callback runs.
    inner_->OnComplete(fence, [&owner = owner_, callback = std::move(callback)](
                                  absl::Status status) {
      absl::Status injected = owner.faults().completion_status;
      callback(injected.ok() ? status : injected);
    });
  }

  FaultyBackend& owner_;
  const std::unique_ptr<Queue> inner_;
  mutable absl::Mutex mu_;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  Fence visible_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
};

FaultyBackend::FaultyBackend(std::unique_ptr<Backend> inner)
    : inner_(std::move(inner)) {}

FaultyBackend::~FaultyBackend() = default;

void FaultyBackend::FailAllocations(int count, absl::Status status) {
  absl::MutexLock lock(&mu_);
  failing_allocations_ = count;
  allocation_status_ = std::move(status);
}

void FaultyBackend::HoldCompletions() {
  absl::MutexLock lock(&mu_);
  faults_.holding = true;
  for (FaultyQueue* queue : queues_) queue->Hold();
}

void FaultyBackend::ReleaseCompletions() {
  std::vector<FaultyQueue*> queues;
  {
    absl::MutexLock lock(&mu_);
    faults_.holding = false;
    queues = queues_;
  }
  for (FaultyQueue* queue : queues) queue->Release();
}

void FaultyBackend::FailCompletions(absl::Status status) {
  absl::MutexLock lock(&mu_);
  faults_.completion_status = std::move(status);
}

void FaultyBackend::LoseDevice(absl::Status status) {
  std::shared_ptr<DeviceLostHandler> on_lost;
  {
    absl::MutexLock lock(&mu_);
    if (!faults_.lost.ok()) return;
    faults_.lost = status;
    on_lost = on_lost_;
  }
  if (on_lost != nullptr) (*on_lost)(status);
}

void FaultyBackend::OnDeviceLost(DeviceLostHandler lost) {
  // Whichever loss comes first (injected here, or the inner device's) runs
  // `lost`; the other finds it told.
  auto told = std::make_shared<std::atomic<bool>>(false);
  auto once = std::make_shared<DeviceLostHandler>(
      [told, lost = std::move(lost)](const absl::Status& why) {
        if (!told->exchange(true)) lost(why);
      });
  {
    absl::MutexLock lock(&mu_);
    on_lost_ = once;
  }
  inner_->OnDeviceLost([once](const absl::Status& why) { (*once)(why); });
}

size_t FaultyBackend::held_completions() const {
  absl::MutexLock lock(&mu_);
  size_t total = 0;
  for (const FaultyQueue* queue : queues_) total += queue->held();
  return total;
}

size_t FaultyBackend::allocations() const {
  absl::MutexLock lock(&mu_);
  return allocations_;
}

size_t FaultyBackend::zeroed_allocations() const {
  absl::MutexLock lock(&mu_);
  return zeroed_allocations_;
}

FaultyBackend::Faults FaultyBackend::faults() const {
  absl::MutexLock lock(&mu_);
  return faults_;
}

void FaultyBackend::Forget(FaultyQueue* queue) {
  absl::MutexLock lock(&mu_);
  queues_.erase(std::remove(queues_.begin(), queues_.end(), queue),
                queues_.end());
}

const DeviceProperties& FaultyBackend::properties() const {
  return inner_->properties();
}

absl::StatusOr<MemoryRef> FaultyBackend::Allocate(uint64_t bytes,
                                                  MemoryKind kind,
                                                  bool zeroed) {
  {
    absl::MutexLock lock(&mu_);
    ++allocations_;
    if (zeroed) ++zeroed_allocations_;
    if (failing_allocations_ > 0) {
      --failing_allocations_;
      return allocation_status_;
    }
  }
  return inner_->Allocate(bytes, kind, zeroed);
}

absl::StatusOr<std::unique_ptr<Queue>> FaultyBackend::CreateQueue() {
  auto inner = inner_->CreateQueue();
  if (!inner.ok()) return inner.status();
  auto queue = std::make_unique<FaultyQueue>(*this, *std::move(inner));
  absl::MutexLock lock(&mu_);
  if (faults_.holding) queue->Hold();
  queues_.push_back(queue.get());
  return queue;
}

absl::StatusOr<KernelRef> FaultyBackend::LoadKernel(std::string_view code,
                                                    const std::string& entry) {
  return inner_->LoadKernel(code, entry);
}

uint64_t FaultyBackend::bytes_in_use() const { return inner_->bytes_in_use(); }

std::vector<ExportKind> FaultyBackend::export_kinds() const {
  return inner_->export_kinds();
}

absl::Status FaultyBackend::device_status() const {
  absl::Status lost = faults().lost;
  return lost.ok() ? inner_->device_status() : lost;
}

}  // namespace hrx::backend::testing
