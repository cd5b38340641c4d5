#include "daemon/server/local_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "grpcpp/server_posix.h"

namespace hrx::daemon {
namespace {

absl::Status Failed(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrFormat(
      "listen_failed: %s %s: %s. Fix: check the socket directory exists and is "
      "writable by the daemon.",
      what, path, std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalListener>> LocalListener::Start(
    const std::string& socket_path, unsigned socket_mode, grpc::Server& server,
    PeerRegistry& peers) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Failed("socket for", socket_path);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(),
               sizeof(address.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const absl::Status status = Failed("bind", socket_path);
    close(fd);
    return status;
  }
  if (chmod(socket_path.c_str(), socket_mode) != 0 || listen(fd, 128) != 0) {
    const absl::Status status = Failed("chmod/listen", socket_path);
    close(fd);
    return status;
  }
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return Failed("eventfd for", socket_path);
  }
  auto listener = std::unique_ptr<LocalListener>(
      new LocalListener(fd, wake, server, peers));
  listener->thread_ = std::thread([raw = listener.get()] { raw->AcceptLoop(); });
  return listener;
}

absl::StatusOr<std::unique_ptr<LocalListener>> LocalListener::FromFd(
    int listen_fd, grpc::Server& server, PeerRegistry& peers) {
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) return Failed("eventfd for", "the inherited socket");
  fcntl(listen_fd, F_SETFD, FD_CLOEXEC);
  auto listener = std::unique_ptr<LocalListener>(
      new LocalListener(listen_fd, wake, server, peers));
  listener->thread_ = std::thread([raw = listener.get()] { raw->AcceptLoop(); });
  return listener;
}

LocalListener::LocalListener(int listen_fd, int wake_fd, grpc::Server& server,
                             PeerRegistry& peers)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), server_(server), peers_(peers) {}

LocalListener::~LocalListener() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

void LocalListener::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

void LocalListener::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // EAGAIN, ECONNABORTED, EMFILE: try the next one
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
      close(fd);
      continue;
    }
    peers_.Record(fd, PeerIdentity{credentials.uid, credentials.gid,
                                   credentials.pid, ""});
    // gRPC needs a non-blocking descriptor; without it the client waits
    // forever for the server's SETTINGS frame.
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    grpc::AddInsecureChannelFromFd(&server_, fd);
  }
}

}  // namespace hrx::daemon
