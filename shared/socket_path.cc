#include "shared/socket_path.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::shared {
namespace {

std::string UserSocketPath() {
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  if (runtime_dir != nullptr && runtime_dir[0] != '\0') {
    return absl::StrCat(runtime_dir, "/hrxd/hrxd.sock");
  }
  return absl::StrCat("/tmp/hrxd-", getuid(), "/hrxd.sock");
}

std::vector<uid_t> TrustedOwners() {
  std::vector<uid_t> owners = {0, getuid(), geteuid()};
  passwd entry{};
  passwd* found = nullptr;
  char buffer[1024];
  if (getpwnam_r(kDaemonUser, &entry, buffer, sizeof(buffer), &found) == 0 &&
      found != nullptr) {
    owners.push_back(found->pw_uid);
  }
  return owners;
}

bool Trusted(uid_t owner, const std::vector<uid_t>& owners) {
  for (uid_t trusted : owners) {
    if (owner == trusted) return true;
  }
  return false;
}

}  // namespace

std::string DefaultSocketPath() {
  if (geteuid() == 0) return kSystemSocketPath;
  return UserSocketPath();
}

std::string DefaultClientSocketPath() {
  struct stat info {};
  if (stat(kSystemSocketPath, &info) == 0) return kSystemSocketPath;
  return UserSocketPath();
}

std::string SideChannelPath(const std::string& socket_path) {
  return socket_path + ".fds";
}

std::string ResolveClientSocketPath(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  const char* env = std::getenv(kSocketEnvVar);
  if (env != nullptr && env[0] != '\0') return env;
  return DefaultClientSocketPath();
}

absl::Status CheckTrustedSocket(const std::string& path) {
  struct stat socket_info {};
  if (lstat(path.c_str(), &socket_info) != 0) return absl::OkStatus();
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  struct stat dir_info {};
  if (stat(dir.c_str(), &dir_info) != 0) return absl::OkStatus();
  const std::vector<uid_t> owners = TrustedOwners();
  const auto refuse = [&](const std::string& what, uid_t owner) {
    return Refusal(
        Reason::kUntrustedSocket,
        absl::StrFormat(
            "%s belongs to uid %u, which is neither root, you "
            "(uid %u) nor the daemon's user \"%s\": anyone could have put it "
            "there to impersonate hrxd. Fix: remove it and start hrxd again, "
            "or "
            "connect to the system daemon's %s.",
            what, owner, getuid(), kDaemonUser, kSystemSocketPath));
  };
  if (!S_ISSOCK(socket_info.st_mode)) {
    return Refusal(
        Reason::kUntrustedSocket,
        absl::StrFormat("%s is not a socket. Fix: point --socket or %s at "
                        "the socket hrxd prints.",
                        path, kSocketEnvVar));
  }
  if (!Trusted(socket_info.st_uid, owners)) {
    return refuse("the socket " + path, socket_info.st_uid);
  }
  if (!Trusted(dir_info.st_uid, owners)) {
    return refuse("its directory " + dir, dir_info.st_uid);
  }
  if ((dir_info.st_mode & 0022) != 0 && (dir_info.st_mode & S_ISVTX) == 0) {
    return Refusal(
        Reason::kUntrustedSocket,
        absl::StrFormat(
            "the directory %s (mode %o) lets others replace the "
            "socket. Fix: make it writable only by its owner (chmod go-w).",
            dir, dir_info.st_mode & 07777));
  }
  return absl::OkStatus();
}

}  // namespace hrx::shared
