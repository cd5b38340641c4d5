// A Backend that wraps a real one and injects faults, for core tests (as
// LevelDB's tests wrap Env): allocations that fail, completions held back
// (a slow device, released on demand) or failing, and a lost device.
//
// Held completions: while held, each queue reports as completed only what
// had completed when holding began, and completion callbacks wait; Release
// lets them all run (after the real work has finished). This drives the
// core's asynchronous paths deterministically: what is suspended, parked or
// waiting can be observed before anything completes.
//
// Thread-safe.
#ifndef HRX_DAEMON_BACKEND_TESTING_FAULTY_BACKEND_H_
#define HRX_DAEMON_BACKEND_TESTING_FAULTY_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"

namespace hrx::backend::testing {

class FaultyQueue;

class FaultyBackend final : public Backend {
 public:
  explicit FaultyBackend(std::unique_ptr<Backend> inner);
  ~FaultyBackend() override;

  // The next `count` allocations fail with `status`.
  void FailAllocations(int count, absl::Status status);
  // Completions wait until ReleaseCompletions (see the file comment).
  void HoldCompletions();
  // Lets every held completion run, in fence order per queue, once the real
  // work behind it has finished; completions flow freely again.
  void ReleaseCompletions();
  // From now on every completion reports `status` (a failing device queue).
  void FailCompletions(absl::Status status);
  // The device is lost: device_status() reports `status`, every queue
  // refuses new work with it, and the OnDeviceLost handler runs (the first
  // time).
  void LoseDevice(absl::Status status);
  // Completion callbacks waiting for ReleaseCompletions, over all queues.
  size_t held_completions() const;
  // Allocations asked for so far, and how many of them zeroed.
  size_t allocations() const;
  size_t zeroed_allocations() const;

  // Backend:
  const DeviceProperties& properties() const override;
  absl::StatusOr<MemoryRef> Allocate(uint64_t bytes, MemoryKind kind,
                                     bool zeroed) override;
  absl::StatusOr<std::unique_ptr<Queue>> CreateQueue() override;
  absl::StatusOr<KernelRef> LoadKernel(std::string_view code,
                                       const std::string& entry) override;
  uint64_t bytes_in_use() const override;
  std::vector<ExportKind> export_kinds() const override;
  absl::Status device_status() const override;
  void OnDeviceLost(DeviceLostHandler lost) override;

 private:
  friend class FaultyQueue;
  struct Faults {
    bool holding = false;
    absl::Status completion_status;  // OK: pass the real status through
    absl::Status lost;               // OK: the device works
  };
  Faults faults() const;
  void Forget(FaultyQueue* queue);

  const std::unique_ptr<Backend> inner_;
  mutable absl::Mutex mu_;
  // The OnDeviceLost handler, shared with the inner backend so that a loss
  // of either (LoseDevice, or the real device's) tells it once.
  std::shared_ptr<DeviceLostHandler> on_lost_ ABSL_GUARDED_BY(mu_);
  int failing_allocations_ ABSL_GUARDED_BY(mu_) = 0;
  size_t allocations_ ABSL_GUARDED_BY(mu_) = 0;
  size_t zeroed_allocations_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status allocation_status_ ABSL_GUARDED_BY(mu_);
  Faults faults_ ABSL_GUARDED_BY(mu_);
  std::vector<FaultyQueue*> queues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::backend::testing

#endif  // HRX_DAEMON_BACKEND_TESTING_FAULTY_BACKEND_H_
