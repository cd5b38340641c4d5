// Runs a function every `interval` on a thread of its own until destroyed.
// Thread-safe.
#ifndef HRX_DAEMON_CORE_TICKER_H_
#define HRX_DAEMON_CORE_TICKER_H_

#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hrx::daemon {

class Ticker {
 public:
  Ticker(absl::Duration interval, std::function<void()> tick)
      : interval_(interval), tick_(std::move(tick)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Ticker() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_)) {
      mu_.Unlock();
      tick_();
      mu_.Lock();
    }
  }

  const absl::Duration interval_;
  const std::function<void()> tick_;
  absl::Mutex mu_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_TICKER_H_
