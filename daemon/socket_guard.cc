#include "daemon/socket_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/own_directory.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

std::string Errno(int error) { return std::strerror(error); }

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// True when something accepts connections on `path`.
bool SomeoneListens(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  const bool connected =
      connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

std::string ReadHolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "unknown";
  std::string pid(buffer, static_cast<size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) {
    pid.pop_back();
  }
  return pid;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketGuard>> SocketGuard::Claim(
    const std::string& socket_path, unsigned socket_mode) {
  if (socket_path.empty() ||
      socket_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Refusal(
        Reason::kSocketPathTooLong,
        absl::StrFormat("socket path %s is %u bytes; a Unix socket path "
                        "must be 1 to %u bytes. Fix: pass a shorter --socket.",
                        socket_path, socket_path.size(),
                        sizeof(sockaddr_un{}.sun_path) - 1));
  }
  // A directory hrxd makes: when others may connect they reach the socket
  // through it, never list it. One that exists is used as it is.
  const mode_t dir_mode = (socket_mode & 0007) != 0 ? 0711 : 0700;
  const DirectoryRefusals refusals{
      Reason::kSocketDirFailed, Reason::kSocketDirForeign,
      Reason::kSocketDirShared, "pass --socket in a directory of hrxd's own"};
  if (absl::Status dir = PrepareOwnDirectory(Dirname(socket_path), dir_mode,
                                             ExistingMode::kAsItIs, refusals);
      !dir.ok()) {
    return dir;
  }
  const std::string lock_path = absl::StrCat(socket_path, ".lock");
  const int lock_fd =
      open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return Refusal(
        Reason::kSocketLockFailed,
        absl::StrFormat("open %s: %s. Fix: check the socket directory's "
                        "permissions.",
                        lock_path, Errno(errno)));
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = ReadHolderPid(lock_fd);
    close(lock_fd);
    return Refusal(
        Reason::kSocketInUse,
        absl::StrFormat("another hrxd (pid %s) holds %s. Fix: stop that daemon "
                        "or pass a different --socket.",
                        holder, socket_path));
  }
  // The lock is ours, so a socket file left here belongs to a dead daemon,
  // unless something other than hrxd listens on it.
  if (SomeoneListens(socket_path)) {
    close(lock_fd);
    return Refusal(
        Reason::kSocketInUse,
        absl::StrFormat("a process that is not an hrxd is listening on %s. "
                        "Fix: stop it or pass a different --socket.",
                        socket_path));
  }
  if (unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
    close(lock_fd);
    return Refusal(
        Reason::kSocketStale,
        absl::StrFormat("cannot remove stale socket %s: %s. Fix: remove it by "
                        "hand.",
                        socket_path, Errno(errno)));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(lock_fd, 0) != 0 ||
      pwrite(lock_fd, pid.data(), pid.size(), 0) !=
          static_cast<ssize_t>(pid.size())) {
    // The pid is only for messages; the lock itself is what counts.
  }
  return std::unique_ptr<SocketGuard>(
      new SocketGuard(socket_path, lock_path, lock_fd));
}

SocketGuard::SocketGuard(std::string socket_path, std::string lock_path,
                         int lock_fd)
    : socket_path_(std::move(socket_path)),
      lock_path_(std::move(lock_path)),
      lock_fd_(lock_fd) {}

SocketGuard::~SocketGuard() {
  unlink(socket_path_.c_str());
  unlink(lock_path_.c_str());
  close(lock_fd_);  // releases the lock last
}

}  // namespace hrx::daemon
