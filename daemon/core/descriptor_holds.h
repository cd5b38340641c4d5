// Knowing when a descriptor hrxd handed out is gone. A process that received
// a memory descriptor can keep its pages for as long as it (or any process
// it passed the descriptor to, a forked child included) keeps the
// descriptor open or the pages mapped; the memory must stay charged to its
// owner until then, whatever the session or the process that redeemed it
// does.
//
// Shared-memory (memfd) exports are made as descriptions of their own,
// opened for writing, and "gone" is asked of the kernel: a write lease can
// be placed on a file only while no other writable description of it
// exists (fcntl F_SETLEASE), and a mapping holds its description. So once
// a probe (itself a fresh writable description) can take that lease, no
// exported description of that memory survives, in any process. Nothing a
// client does can fake it. Descriptors of other
// kinds (dma-buf) cannot be asked: they stay charged until the process that
// redeemed them exits.
//
// Thread-compatible; Core keeps it under its own lock.
#ifndef HRX_DAEMON_CORE_DESCRIPTOR_HOLDS_H_
#define HRX_DAEMON_CORE_DESCRIPTOR_HOLDS_H_

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

// A new writable description of `memory`'s shared-memory file, to hand out.
absl::StatusOr<shared::UniqueFd> OpenExportDescription(
    const backend::Memory& memory);

// True once no description of `memory`'s file other than hrxd's own is
// open (nor mapped) anywhere. False while one is, or when the kernel cannot
// tell: the caller then keeps holding.
bool ExportDescriptionsGone(const backend::Memory& memory);

// Whether this kernel answers ExportDescriptionsGone truthfully (leases
// enabled, and a memfd's own description not counted as a writer): checked
// once at start on a scratch memfd. Where it does not, hrxd falls back to
// holding exports until the redeeming process exits.
bool ExportDescriptionsCanBeTracked();

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_DESCRIPTOR_HOLDS_H_
