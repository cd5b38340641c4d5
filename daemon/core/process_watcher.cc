#include "daemon/core/process_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace hrx::daemon {
namespace {

int PidfdOpen(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

ProcessWatcher::ProcessWatcher(ExitCallback on_exit)
    : on_exit_(std::move(on_exit)),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_CLOEXEC)) {
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake);
  thread_ = std::thread([this] { Run(); });
}

ProcessWatcher::~ProcessWatcher() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  for (auto& [pid, fd] : pidfds_) close(fd);
  close(epoll_fd_);
  close(wake_fd_);
}

void ProcessWatcher::Watch(pid_t pid) {
  if (pid <= 0) return;
  {
    absl::MutexLock lock(&mu_);
    if (pidfds_.contains(pid)) return;
    const int fd = PidfdOpen(pid);
    if (fd >= 0) {
      epoll_event event{};
      event.events = EPOLLIN;  // readable once the process has exited
      event.data.fd = fd;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
      pidfds_[pid] = fd;
      return;
    }
  }
  on_exit_(pid);  // already gone (ESRCH)
}

void ProcessWatcher::Unwatch(pid_t pid) {
  absl::MutexLock lock(&mu_);
  auto it = pidfds_.find(pid);
  if (it == pidfds_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second, nullptr);
  close(it->second);
  pidfds_.erase(it);
}

void ProcessWatcher::Run() {
  epoll_event events[16];
  while (true) {
    const int count = epoll_wait(epoll_fd_, events, 16, -1);
    if (count < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < count; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) return;
      pid_t exited = 0;
      {
        absl::MutexLock lock(&mu_);
        for (auto it = pidfds_.begin(); it != pidfds_.end(); ++it) {
          if (it->second == fd) {
            exited = it->first;
            pidfds_.erase(it);
            break;
          }
        }
      }
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      close(fd);
      if (exited != 0) on_exit_(exited);
    }
  }
}

}  // namespace hrx::daemon
