#include "daemon/own_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

absl::Status PrepareOwnDirectory(const std::string& path, mode_t mode,
                                 ExistingMode existing,
                                 const DirectoryRefusals& refusals) {
  const bool created = mkdir(path.c_str(), mode) == 0;
  if (!created && errno != EEXIST) {
    return Refusal(
        refusals.failed,
        absl::StrFormat("cannot create directory %s: %s. Fix: "
                        "create its parent, or %s.",
                        path, std::strerror(errno), refusals.fix_elsewhere));
  }
  // Opened without following a link, and checked and set through the
  // descriptor: a name swapped after the mkdir is never what gets a mode.
  shared::UniqueFd dir(
      open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat info {};
  if (!dir.valid() || fstat(dir.get(), &info) != 0) {
    return Refusal(
        refusals.failed,
        absl::StrFormat("%s is not a directory (or a symlink to "
                        "one): %s. Fix: remove it, or %s.",
                        path, std::strerror(errno), refusals.fix_elsewhere));
  }
  const mode_t have = info.st_mode & 07777;
  if (info.st_uid != geteuid()) {
    return Refusal(
        refusals.foreign,
        absl::StrFormat("directory %s belongs to uid %u, not to this "
                        "daemon's uid %u. Fix: remove the directory, or %s.",
                        path, info.st_uid, geteuid(), refusals.fix_elsewhere));
  }
  if (created) {
    // Only the umask can have taken bits from a directory made just now.
    if (have != mode && fchmod(dir.get(), mode) != 0) {
      return Refusal(
          refusals.failed,
          absl::StrFormat("chmod %o %s: %s. Fix: %s.", mode, path,
                          std::strerror(errno), refusals.fix_elsewhere));
    }
    return absl::OkStatus();
  }
  if ((have & S_ISVTX) != 0 || (have & S_IWOTH) != 0) {
    return Refusal(
        refusals.shared,
        absl::StrFormat("directory %s (mode %04o) is shared with other users "
                        "(%s); hrxd does not change the mode of a directory "
                        "it did not create, and will not serve from one "
                        "others can write into. Fix: %s, e.g. %s/hrxd.",
                        path, have,
                        (have & S_ISVTX) != 0 ? "sticky" : "world-writable",
                        refusals.fix_elsewhere, path));
  }
  const mode_t too_loose = existing == ExistingMode::kNoLooser
                               ? have & ~mode
                               : have & (S_IWGRP | S_IWOTH);
  if (too_loose != 0) {
    return Refusal(
        refusals.failed,
        absl::StrFormat("directory %s has mode %04o, which grants %04o beyond "
                        "the %04o hrxd wants; hrxd does not change the mode "
                        "of a directory it did not create. Fix: chmod %04o "
                        "%s, or remove it so that hrxd creates it.",
                        path, have, too_loose, mode, have & ~too_loose, path));
  }
  return absl::OkStatus();
}

}  // namespace hrx::daemon
