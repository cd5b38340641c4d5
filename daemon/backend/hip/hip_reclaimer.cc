#include "daemon/backend/hip/hip_reclaimer.h"

#include "daemon/backend/hip/hip_status.h"

namespace hrx::backend {

absl::StatusOr<std::shared_ptr<HipReclaimer>> HipReclaimer::Create(int device) {
  HRX_RETURN_IF_ERROR(BindDevice(device));
  hipStream_t stream = nullptr;
  HRX_HIP_RETURN_IF_ERROR(
      hipStreamCreateWithFlags(&stream, hipStreamNonBlocking),
      "create the allocation stream", "hipStreamCreateWithFlags",
      "check the GPU's health (hrxctl status)");
  return std::make_shared<HipReclaimer>(device, stream);
}

HipReclaimer::HipReclaimer(int device, hipStream_t stream)
    : device_(device), stream_(stream), thread_([this] { Run(); }) {}

HipReclaimer::~HipReclaimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  (void)BindDevice(device_);
  (void)hipStreamSynchronize(stream_);
  (void)hipStreamDestroy(stream_);
}

void HipReclaimer::Defer(std::function<void()> release) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(release));
}

void HipReclaimer::Run() {
  (void)BindDevice(device_);
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !pending_.empty();
    };
    mu_.Await(absl::Condition(&ready));
    if (pending_.empty()) return;  // stopping, nothing left
    std::function<void()> release = std::move(pending_.front());
    pending_.pop_front();
    mu_.Unlock();
    release();
    mu_.Lock();
  }
}

}  // namespace hrx::backend
