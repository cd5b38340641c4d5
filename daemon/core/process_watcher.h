// Notices when a local client process dies, through a pidfd per process and
// one epoll thread, and reports it once. Backs the rule that a session dies
// with the process that opened it, even when it never said goodbye.
//
// Thread-safe. The callback runs on the watcher's thread.
#ifndef HRX_DAEMON_CORE_PROCESS_WATCHER_H_
#define HRX_DAEMON_CORE_PROCESS_WATCHER_H_

#include <sys/types.h>

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace hrx::daemon {

class ProcessWatcher {
 public:
  using ExitCallback = std::function<void(pid_t)>;
  explicit ProcessWatcher(ExitCallback on_exit);
  ~ProcessWatcher();
  ProcessWatcher(const ProcessWatcher&) = delete;
  ProcessWatcher& operator=(const ProcessWatcher&) = delete;

  // Watches `pid` (once, however often it is called). If the process is
  // already gone, the callback runs at once on the calling thread.
  void Watch(pid_t pid);
  // Stops watching `pid` (its pidfd is closed): nothing of it needs
  // watching any more. A pidfd costs a descriptor per live process.
  void Unwatch(pid_t pid);

 private:
  void Run();

  const ExitCallback on_exit_;
  const int epoll_fd_;
  const int wake_fd_;
  absl::Mutex mu_;
  absl::flat_hash_map<pid_t, int> pidfds_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_PROCESS_WATCHER_H_
