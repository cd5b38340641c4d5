#include "daemon/backend/cpu/thread_pool.h"

#include <atomic>
#include <memory>

#include "daemon/backend/cpu/object_unloader.h"

namespace hrx::backend {

ThreadPool::ThreadPool(unsigned threads) {
  for (unsigned i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { RunWorker(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::RunWorker() {
  const ObjectUnloader::OwnThread own;  // never a kernel's thread
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(uint64_t count,
                             const std::function<void(uint64_t)>& body) {
  if (count == 0) return;
  // Work is claimed index by index from a shared counter, so helpers that
  // start late (or never) cost nothing.
  struct Loop {
    std::atomic<uint64_t> next{0};
    std::atomic<uint64_t> done{0};
    absl::Mutex mu;
  };
  auto loop = std::make_shared<Loop>();
  auto run = [loop, count, &body] {
    uint64_t finished = 0;
    for (uint64_t i = loop->next.fetch_add(1); i < count;
         i = loop->next.fetch_add(1)) {
      body(i);
      ++finished;
    }
    if (finished != 0) {
      absl::MutexLock lock(&loop->mu);
      loop->done.fetch_add(finished);
    }
  };
  const uint64_t helpers =
      std::min<uint64_t>(workers_.size(), count > 0 ? count - 1 : 0);
  // Helpers reference `body` through the loop's lifetime: the caller waits
  // below until every index ran, and a helper that starts after that finds
  // no index left and touches nothing but `loop`.
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t i = 0; i < helpers; ++i) tasks_.push_back(run);
  }
  run();
  absl::MutexLock lock(&loop->mu);
  auto all_done = [&]() { return loop->done.load() == count; };
  loop->mu.Await(absl::Condition(&all_done));
}

}  // namespace hrx::backend
