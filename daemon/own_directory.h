// Directories hrxd serves sockets from. hrxd sets the mode only of a
// directory it has just created; a directory that was already there is used
// as it is, never changed, once it is shown to be safe: a real directory
// (no symlink) of hrxd's uid that no other user can write into. A shared
// directory (sticky or world-writable, such as /tmp) is refused by name:
// changing its mode would take it from every other user of the machine, and
// using it as it is would let them replace hrxd's socket.
#ifndef HRX_DAEMON_OWN_DIRECTORY_H_
#define HRX_DAEMON_OWN_DIRECTORY_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "shared/refusal.h"

namespace hrx::daemon {

// What an existing directory may grant beyond `mode`.
enum class ExistingMode {
  // Any read or search bits (the sockets' own modes decide who connects).
  kAsItIs,
  // Nothing beyond `mode`: the mode is itself the defence (a tenant socket
  // directory of 0700 hides every tenant's socket from other users).
  kNoLooser,
};

struct DirectoryRefusals {
  Reason failed;              // cannot be made, not a directory, too loose
  Reason foreign;             // another uid's
  Reason shared;              // sticky or world-writable
  std::string fix_elsewhere;  // e.g. "pass --socket in a directory of its own"
};

// Makes `path` with exactly `mode` (whatever the umask) if it does not
// exist; otherwise checks it as the file comment says. Refusals name the
// directory, its owner and mode, and end with a Fix.
absl::Status PrepareOwnDirectory(const std::string& path, mode_t mode,
                                 ExistingMode existing,
                                 const DirectoryRefusals& refusals);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_OWN_DIRECTORY_H_
