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

void CallLanes::SetPace(double calls_per_second, double burst) {
  absl::MutexLock lock(&mu_);
  calls_per_second_ = calls_per_second;
  burst_ = burst;
}

CallLanes::Admitted CallLanes::Run(const std::string& lane,
                                   std::function<void()> work, bool paced) {
  absl::MutexLock lock(&mu_);
  Lane& target =
      lanes_.try_emplace(lane, calls_per_second_, burst_).first->second;
  if (target.queued.size() >= kMaxLaneQueuedCalls) return Admitted::kLaneFull;
  const bool start = target.idle <= target.queued.size() &&
                     target.threads < kLaneThreads &&
                     threads_ < kMaxLaneThreads;
  if (target.threads == 0 && !start) {
    if (target.queued.empty()) lanes_.erase(lane);
    return Admitted::kNoThread;  // no thread of its own, none to be had
  }
  target.queued.push_back(Call{std::move(work), paced});
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
    if (lane.queued.front().paced) {
      // Past its pace the lane rests (only its own threads wait), then
      // looks again: another of its threads may have run the call.
      const absl::Duration wait = lane.pacer.Take(absl::Now());
      if (wait > absl::ZeroDuration()) {
        mu_.Unlock();
        absl::SleepFor(wait);
        mu_.Lock();
        continue;
      }
    }
    std::function<void()> work = std::move(lane.queued.front().work);
    lane.queued.pop_front();
    mu_.Unlock();
    work();
    work = nullptr;  // what it captured goes before the lock is taken
    mu_.Lock();
  }
}

}  // namespace hrx::daemon
