#include "daemon/core/descriptor_holds.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::daemon {

absl::StatusOr<shared::UniqueFd> OpenExportDescription(
    const backend::Memory& memory) {
  auto own = memory.ExportFd(backend::ExportKind::kShm);
  if (!own.ok()) return own.status();
  shared::UniqueFd ours(*own);  // a duplicate of hrxd's own description
  // Opening the file again through its /proc link makes a description of
  // its own: its last close (or unmap) is what ExportDescriptionsGone sees.
  const std::string path = absl::StrFormat("/proc/self/fd/%d", ours.get());
  const int fresh = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fresh < 0) {
    return Refusal(
        Reason::kExportFailed,
        absl::StrFormat("export buffer: cannot open a description of its "
                        "memory (%s). Fix: raise hrxd's open-file limit.",
                        std::strerror(errno)));
  }
  return shared::UniqueFd(fresh);
}

namespace {

// Whether `fd`'s file has no writable description but the probe's own. The
// probe is itself a reopened description: the memfd's first description
// (memfd_create's) does not count as a writer, reopened ones do, in every
// process and for as long as any mapping of them lives.
bool OnlyOneWriter(int fd) {
  const std::string path = absl::StrFormat("/proc/self/fd/%d", fd);
  shared::UniqueFd probe(open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (probe.get() < 0) return false;
  if (fcntl(probe.get(), F_SETLEASE, F_WRLCK) != 0) return false;
  (void)fcntl(probe.get(), F_SETLEASE, F_UNLCK);
  return true;
}

}  // namespace

bool ExportDescriptionsGone(const backend::Memory& memory) {
  auto own = memory.ExportFd(backend::ExportKind::kShm);
  if (!own.ok()) return false;
  shared::UniqueFd ours(*own);
  return OnlyOneWriter(ours.get());
}

bool ExportDescriptionsCanBeTracked() {
  shared::UniqueFd file(memfd_create("hrx-probe", MFD_CLOEXEC));
  if (file.get() < 0) return false;
  if (!OnlyOneWriter(file.get())) return false;  // leases unavailable
  const std::string path = absl::StrFormat("/proc/self/fd/%d", file.get());
  shared::UniqueFd exported(open(path.c_str(), O_RDWR | O_CLOEXEC));
  return exported.get() >= 0 && !OnlyOneWriter(file.get());
}

}  // namespace hrx::daemon
