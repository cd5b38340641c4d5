// Executor uids leased machine-wide. A root hrxd gives each executor a uid
// of its own (uid_base + slot), so that its process limit and signals are
// its alone; two root hrxds on one machine (one per device, or tests side
// by side) would otherwise give the same uids to executors of different
// daemons, and one tenant's thread bomb would fill another daemon's
// tenant's process limit. A lease is an open-file-description lock on the
// byte at offset `uid` of one root-owned file: another hrxd's lock makes
// the uid taken, and the kernel lets it go when that hrxd's descriptor
// closes, however it ends (no stale leases after a crash).
//
// Thread-compatible: the executor pool calls it under its own lock.
#ifndef HRX_DAEMON_EXECUTOR_UID_LEASES_H_
#define HRX_DAEMON_EXECUTOR_UID_LEASES_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "shared/unique_fd.h"

namespace hrx::executor {

// Where root hrxds lease executor uids (in /run: writable by root only,
// so no user can place a link there or hold a lease).
inline constexpr char kDefaultUidLeaseFile[] = "/run/hrxd-executor-uids.lock";

class UidLeases {
 public:
  // Opens (creating, mode 0600) `path`, which must be a regular file owned
  // by hrxd's user and writable by nobody else. FAILED_PRECONDITION with a
  // Fix where it cannot be used.
  static absl::StatusOr<std::unique_ptr<UidLeases>> Open(
      const std::string& path);

  // Leases `uid` for this object's life: false where another holder (an
  // open description of the file elsewhere, usually another hrxd) has it.
  // Leasing a uid this object holds already is true.
  absl::StatusOr<bool> TryLease(uid_t uid);

  const std::string& path() const { return path_; }

 private:
  UidLeases(std::string path, shared::UniqueFd file)
      : path_(std::move(path)), file_(std::move(file)) {}

  const std::string path_;
  const shared::UniqueFd file_;
};

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_UID_LEASES_H_
