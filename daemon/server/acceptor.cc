#include "daemon/server/acceptor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/refusal.h"

namespace hrx::daemon {

absl::StatusOr<std::unique_ptr<Acceptor>> Acceptor::Start(int listen_fd,
                                                          Handler handler) {
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    const std::string error = std::strerror(errno);
    close(listen_fd);
    return Refusal(Reason::kListenFailed,
                   absl::StrCat("eventfd: ", error,
                                ". Fix: raise the daemon's open-file limit."));
  }
  auto acceptor = std::unique_ptr<Acceptor>(
      new Acceptor(listen_fd, wake, std::move(handler)));
  acceptor->thread_ = std::thread([raw = acceptor.get()] { raw->Loop(); });
  return acceptor;
}

Acceptor::Acceptor(int listen_fd, int wake_fd, Handler handler)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), handler_(std::move(handler)) {}

Acceptor::~Acceptor() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

void Acceptor::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

void Acceptor::Loop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        // Out of descriptors or memory: the pending connection stays in the
        // backlog and poll would report it again at once. Back off instead
        // of spinning; descriptors come back as connections and buffers go.
        pollfd wake = {wake_fd_, POLLIN, 0};
        if (poll(&wake, 1, kBackoffMs) > 0) return;
      }
      continue;  // EAGAIN, ECONNABORTED: try the next one
    }
    handler_(fd);
  }
}

}  // namespace hrx::daemon
