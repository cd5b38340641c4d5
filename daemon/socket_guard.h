// Claims the daemon's socket path for one live daemon: makes the directory
// (mode 0700; an existing one is used as it is, own_directory.h), takes an
// exclusive lock beside the socket, refuses when another live daemon holds it,
// and removes a stale socket left by one that died. Releasing the guard removes
// the socket and the lock file.
#ifndef HRX_DAEMON_SOCKET_GUARD_H_
#define HRX_DAEMON_SOCKET_GUARD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hrx::daemon {

class SocketGuard {
 public:
  // FAILED_PRECONDITION ("socket_in_use") when a live daemon holds the path,
  // "socket_dir_foreign" when the directory belongs to another user,
  // "socket_dir_shared" when others may write into it (/tmp);
  // INVALID_ARGUMENT for a path too long for a Unix socket.
  // A directory hrxd creates is 0700, or 0711 when `socket_mode` lets
  // others connect (they may then reach the socket but not list the
  // directory); an existing one keeps its mode, which then decides who
  // reaches the socket.
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
