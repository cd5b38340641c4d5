#include "daemon/server/call_lanes.h"

#include <system_error>
#include <thread>
#include <utility>

namespace hrx::daemon {

CallLanes& CallLanes::ForServer() {
  static CallLanes* const lanes = new CallLanes();
  return *lanes;
}

CallLanes::~CallLanes() {
  absl::MutexLock lock(&mu_);
  auto ended = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_ == 0; };
  mu_.Await(absl::Condition(&ended));
}

CallLanes::Admitted CallLanes::Run(const std::string& lane,
                                   std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  Lane& target = lanes_[lane];
  if (target.queued.size() >= kMaxLaneQueuedCalls) return Admitted::kLaneFull;
  const bool start = target.idle <= target.queued.size() &&
                     target.threads < kLaneThreads &&
                     threads_ < kMaxLaneThreads;
  if (target.threads == 0 && !start) {
    if (target.queued.empty()) lanes_.erase(lane);
    return Admitted::kNoThread;  // no thread of its own, none to be had
  }
  target.queued.push_back(std::move(work));
  if (start) {
    try {
      std::thread([this, lane] { Serve(lane); }).detach();
    } catch (const std::system_error&) {
      // No thread now: a lane with threads of its own still drains; one
      // without runs nothing, so the call goes back to its caller.
      if (target.threads == 0) {
        target.queued.pop_back();
        if (target.queued.empty()) lanes_.erase(lane);
        return Admitted::kNoThread;
      }
      return Admitted::kQueued;
    }
    ++target.threads;
    ++threads_;
  }
  return Admitted::kQueued;
}

size_t CallLanes::threads() const {
  absl::MutexLock lock(&mu_);
  return threads_;
}

void CallLanes::Serve(std::string name) {
  absl::MutexLock lock(&mu_);
  while (true) {
    Lane& lane = lanes_[name];  // never erased while it has threads
    if (lane.queued.empty()) {
      ++lane.idle;
      auto has_work = [&lane]() { return !lane.queued.empty(); };
      const bool woke = mu_.AwaitWithTimeout(absl::Condition(&has_work), idle_);
      --lane.idle;
      if (!woke) {
        --lane.threads;
        --threads_;
        if (lane.threads == 0 && lane.queued.empty()) lanes_.erase(name);
        return;
      }
    }
    std::function<void()> work = std::move(lane.queued.front());
    lane.queued.pop_front();
    mu_.Unlock();
    work();
    work = nullptr;  // what it captured goes before the lock is taken
    mu_.Lock();
  }
}

}  // namespace hrx::daemon
