#include "daemon/executor/uid_leases.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace hrx::executor {
namespace {

absl::Status Unusable(const std::string& path, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "executor uid leases in %s: %s. Fix: let hrxd (root) create and lock "
      "that file (with systemd's ProtectSystem=strict, add it to "
      "ReadWritePaths=), or pass --executor_uid_base=0 to run executors as "
      "--executor_user.",
      path, why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<UidLeases>> UidLeases::Open(
    const std::string& path) {
  // O_NOFOLLOW: a link placed there is refused, never followed.
  shared::UniqueFd file(
      open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!file.valid()) return Unusable(path, std::strerror(errno));
  struct stat status {};
  if (fstat(file.get(), &status) != 0) {
    return Unusable(path, std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) return Unusable(path, "not a regular file");
  if (status.st_uid != geteuid() || (status.st_mode & 0022) != 0) {
    // Another user able to open it could hold every uid (a denial of
    // executors), so it must be hrxd's user's alone.
    return Unusable(
        path,
        absl::StrFormat("owned by uid %u with mode %o; hrxd (uid %u) "
                        "needs it its own, writable by nobody else",
                        status.st_uid, status.st_mode & 07777, geteuid()));
  }
  return std::unique_ptr<UidLeases>(new UidLeases(path, std::move(file)));
}

absl::StatusOr<bool> UidLeases::TryLease(uid_t uid) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(uid);
  lock.l_len = 1;
  // An open-file-description lock: held by this descriptor, not by the
  // process, so it conflicts with every other opening of the file, even
  // one in this process (tests run two leasers side by side).
  if (fcntl(file_.get(), F_OFD_SETLK, &lock) == 0) return true;
  if (errno == EAGAIN || errno == EACCES) return false;
  return Unusable(path_, absl::StrFormat("locking the byte of uid %u: %s", uid,
                                         std::strerror(errno)));
}

}  // namespace hrx::executor
