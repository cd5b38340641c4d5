// A fixed pool of worker threads that runs parallel-for loops: the CPU
// backend's "compute units". Shared by every queue; a queue's own thread
// takes part in its loop, so a dispatch progresses even when the pool is
// busy with another queue's dispatch.
//
// Thread-safe.
#ifndef HRX_DAEMON_BACKEND_CPU_THREAD_POOL_H_
#define HRX_DAEMON_BACKEND_CPU_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hrx::backend {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls body(i) for every i in [0, count), across the pool and the calling
  // thread, and returns when all calls have returned.
  void ParallelFor(uint64_t count, const std::function<void(uint64_t)>& body);

 private:
  void RunWorker();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_THREAD_POOL_H_
