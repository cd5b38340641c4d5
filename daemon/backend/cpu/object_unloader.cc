#include "daemon/backend/cpu/object_unloader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"

namespace hrx::backend {

std::vector<pid_t> LiveThreads() {
  std::vector<pid_t> threads;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return threads;
  while (dirent* entry = readdir(tasks)) {
    pid_t tid = 0;
    if (absl::SimpleAtoi(entry->d_name, &tid) && tid > 0) {
      threads.push_back(tid);
    }
  }
  closedir(tasks);
  std::sort(threads.begin(), threads.end());
  return threads;
}

ObjectUnloader& ObjectUnloader::Get() {
  static ObjectUnloader* const unloader = new ObjectUnloader();
  return *unloader;
}

ObjectUnloader::OwnThread::OwnThread()
    : tid_(static_cast<pid_t>(syscall(SYS_gettid))) {
  ObjectUnloader& unloader = Get();
  absl::MutexLock lock(&unloader.mu_);
  unloader.own_.insert(tid_);
}

ObjectUnloader::OwnThread::~OwnThread() {
  ObjectUnloader& unloader = Get();
  absl::MutexLock lock(&unloader.mu_);
  unloader.own_.erase(tid_);
}

bool ObjectUnloader::StrangerAlive(const std::vector<pid_t>& threads_at_load,
                                   const std::vector<pid_t>& live) const {
  for (pid_t tid : live) {
    if (own_.contains(tid)) continue;
    if (!std::binary_search(threads_at_load.begin(), threads_at_load.end(),
                            tid)) {
      return true;
    }
  }
  return false;
}

void ObjectUnloader::Unload(void* module, int fd,
                            std::vector<pid_t> threads_at_load) {
  std::vector<Kept> going;
  {
    absl::MutexLock lock(&mu_);
    kept_.push_back(Kept{module, fd, std::move(threads_at_load)});
    const std::vector<pid_t> live = LiveThreads();
    if (live.empty()) return;  // cannot tell: keep everything
    auto stays = [&](const Kept& object) ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return object.threads_at_load.empty() ||
             StrangerAlive(object.threads_at_load, live);
    };
    auto split = std::stable_partition(kept_.begin(), kept_.end(), stays);
    going.assign(std::make_move_iterator(split),
                 std::make_move_iterator(kept_.end()));
    kept_.erase(split, kept_.end());
  }
  for (Kept& object : going) {
    dlclose(object.module);
    close(object.fd);
  }
}

size_t ObjectUnloader::kept() const {
  absl::MutexLock lock(&mu_);
  return kept_.size();
}

}  // namespace hrx::backend
