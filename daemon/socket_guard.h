// Claims the daemon's socket path for one live daemon: makes the directory
// (mode 0700), takes an exclusive lock beside the socket, refuses when
// another live daemon holds it, and removes a stale socket left by one that
// died. Releasing the guard removes the socket and the lock file.
#ifndef HRX_DAEMON_SOCKET_GUARD_H_
#define HRX_DAEMON_SOCKET_GUARD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hrx::daemon {

class SocketGuard {
 public:
  // FAILED_PRECONDITION ("socket_in_use") when a live daemon holds the path,
  // or when the directory belongs to another user; INVALID_ARGUMENT for a
  // path too long for a Unix socket.
  // The directory is 0700, or 0711 when `socket_mode` lets others connect
  // (they may then reach the socket but not list the directory).
  static absl::StatusOr<std::unique_ptr<SocketGuard>> Claim(
      const std::string& socket_path, unsigned socket_mode = 0660);
  ~SocketGuard();
  SocketGuard(const SocketGuard&) = delete;
  SocketGuard& operator=(const SocketGuard&) = delete;

  const std::string& socket_path() const { return socket_path_; }

 private:
  SocketGuard(std::string socket_path, std::string lock_path, int lock_fd);

  const std::string socket_path_;
  const std::string lock_path_;
  const int lock_fd_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SOCKET_GUARD_H_
