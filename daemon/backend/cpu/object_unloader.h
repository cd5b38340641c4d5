// When a CPU kernel's object may be unmapped. Kernel code (an ELF
// constructor, a dispatch) may start threads that run, or are about to run,
// the object's code; unmapping it under them crashes the process (seen: a
// thread bomb's last threads started after their kernel was unloaded). So
// an object is unloaded only when no thread born since its load is alive,
// other than the backend's own (queue workers, the workgroup pool, which
// register themselves); otherwise it is kept, mapped with its memfd open,
// and tried again at every later unload.
//
// Thread-safe; process-wide (a process has one set of threads).
#ifndef HRX_DAEMON_BACKEND_CPU_OBJECT_UNLOADER_H_
#define HRX_DAEMON_BACKEND_CPU_OBJECT_UNLOADER_H_

#include <sys/types.h>

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace hrx::backend {

// The threads of this process now (sorted thread ids, from
// /proc/self/task); empty when they cannot be listed.
std::vector<pid_t> LiveThreads();

class ObjectUnloader {
 public:
  static ObjectUnloader& Get();

  // Marks the calling thread as the backend's own for as long as it lives
  // (until the guard ends): a thread born after a load that cannot run the
  // object's code unless the backend calls into it.
  class OwnThread {
   public:
    OwnThread();
    ~OwnThread();
    OwnThread(const OwnThread&) = delete;
    OwnThread& operator=(const OwnThread&) = delete;

   private:
    const pid_t tid_;
  };

  // Unloads `module` (dlclose) and closes `fd` once no thread outside
  // `threads_at_load` and the backend's own is alive; until then keeps
  // both. Retries every object kept so far as well. An empty
  // `threads_at_load` (the threads could not be listed) keeps the object
  // for the process's life.
  void Unload(void* module, int fd, std::vector<pid_t> threads_at_load);

  // Objects kept so far (mapped, their memfds open).
  size_t kept() const;

 private:
  struct Kept {
    void* module;
    int fd;
    std::vector<pid_t> threads_at_load;  // sorted
  };
  // Whether a thread not in `threads_at_load` and not the backend's own is
  // alive in `live`.
  bool StrangerAlive(const std::vector<pid_t>& threads_at_load,
                     const std::vector<pid_t>& live) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_set<pid_t> own_ ABSL_GUARDED_BY(mu_);
  std::vector<Kept> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_OBJECT_UNLOADER_H_
