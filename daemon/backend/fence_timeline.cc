#include "daemon/backend/fence_timeline.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace hrx::backend {

Fence FenceTimeline::Issue() {
  absl::MutexLock lock(&mu_);
  // Busy from now: a stall is measured from the oldest wait.
  if (completed_ == issued_) progress_at_ = absl::Now();
  return ++issued_;
}

Fence FenceTimeline::issued() const {
  absl::MutexLock lock(&mu_);
  return issued_;
}

Fence FenceTimeline::completed() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

absl::Status FenceTimeline::StatusOfLocked(Fence fence) const {
  return !failure_.ok() && fence >= failed_from_ ? failure_ : absl::OkStatus();
}

absl::Status FenceTimeline::StatusOf(Fence fence) const {
  absl::MutexLock lock(&mu_);
  return StatusOfLocked(fence);
}

absl::Status FenceTimeline::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

void FenceTimeline::Publish(Fence fence, CompletionCallback first) {
  std::vector<std::pair<CompletionCallback, absl::Status>> ready;
  absl::Status first_status;
  {
    absl::MutexLock lock(&mu_);
    fence = std::min(fence, issued_);
    first_status = StatusOfLocked(fence);
    if (fence > completed_) {
      completed_ = fence;
      progress_at_ = absl::Now();
      const auto reached = waiters_.upper_bound(completed_);
      for (auto it = waiters_.begin(); it != reached; ++it) {
        ready.emplace_back(std::move(it->second), StatusOfLocked(it->first));
      }
      waiters_.erase(waiters_.begin(), reached);
    }
  }
  if (first) first(first_status);
  for (auto& [callback, status] : ready) callback(status);
}

void FenceTimeline::Fail(Fence fence, absl::Status status) {
  if (status.ok()) return;
  absl::MutexLock lock(&mu_);
  // A fence already complete was reported OK to its waiters: a late
  // failure fails what comes after it.
  fence = std::max(fence, completed_ + 1);
  if (!failure_.ok() && failed_from_ <= fence) return;
  failure_ = std::move(status);
  failed_from_ = fence;
}

Fence FenceTimeline::FailIncomplete(absl::Status status) {
  absl::MutexLock lock(&mu_);
  const Fence first_incomplete = completed_ + 1;
  if (!status.ok() && (failure_.ok() || failed_from_ > first_incomplete)) {
    failure_ = std::move(status);
    failed_from_ = first_incomplete;
  }
  return issued_;
}

Fence FenceTimeline::FailAll(absl::Status status) {
  const Fence last = FailIncomplete(std::move(status));
  Publish(last);
  return last;
}

void FenceTimeline::OnComplete(Fence fence, CompletionCallback callback) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (fence > completed_) {
      waiters_.emplace(fence, std::move(callback));
      return;
    }
    status = StatusOfLocked(fence);
  }
  callback(status);
}

absl::Status FenceTimeline::Wait(Fence fence, bool stop_at_failure) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, fence,
                  stop_at_failure]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_ >= fence ||
           (stop_at_failure && !failure_.ok() && failed_from_ <= fence);
  };
  mu_.Await(absl::Condition(&reached));
  return StatusOfLocked(fence);
}

absl::Duration FenceTimeline::StalledSince(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (completed_ >= issued_) return absl::ZeroDuration();
  return now - progress_at_;
}

}  // namespace hrx::backend
