// Sharing memory beyond its session: grants (a buffer offered to another
// tenant or session, imported as a handle of its own) and exports (a
// buffer's memory handed to the session's process as a descriptor, through
// a single-use ticket redeemed on the side channel).
//
// Contract: memory keeps its owner's byte charge while any holder has it —
// an importer's handle, an unredeemed ticket, or a redeemed descriptor that
// may still be open or mapped in some process (tracked to its last close
// where the kernel can tell, else until the receiving process exits).
//
// Locking: mu_ guards grants, tickets and retired exports. It is taken
// after a Session::mu is released, never while holding one, and nothing
// waits while holding it.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_SHARING_H_
#define HRX_DAEMON_CORE_SHARING_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/core/identity.h"
#include "daemon/core/process_watcher.h"
#include "daemon/core/session_table.h"
#include "daemon/core/types.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

class Sharing {
 public:
  // `watcher` reports the exit of processes holding retired descriptors.
  Sharing(SessionTable& sessions, ProcessWatcher& watcher,
          absl::Duration ticket_lifetime);

  // --- Grants -------------------------------------------------------------
  // Offers `buffer` to a tenant (by name) or a session (by id); returns an
  // unguessable grant id. See Buffers.Grant in buffer.proto for the rules.
  absl::StatusOr<uint64_t> Grant(uint64_t session, uint64_t buffer,
                                 const std::string& tenant,
                                 uint64_t grantee_session);
  // A handle of `session` to the granted memory. NOT_FOUND "unknown_grant"
  // for an unknown or revoked grant; PERMISSION_DENIED "grant_not_yours"
  // when `session` is not the grantee.
  absl::StatusOr<BufferInfo> Import(uint64_t session, uint64_t grant);
  absl::Status Revoke(uint64_t session, uint64_t grant);
  // Drops the grants of `memory` (null: every grant of `owner_session`).
  void RevokeGrantsOf(uint64_t owner_session, const backend::Memory* memory);

  // --- Exports ------------------------------------------------------------
  // Makes a descriptor of `buffer`'s memory now (so an unavailable kind is
  // refused here, FAILED_PRECONDITION naming what is missing) and returns a
  // single-use ticket for the side channel, valid for the ticket lifetime.
  absl::StatusOr<ExportTicket> Export(uint64_t session, uint64_t buffer,
                                      backend::ExportKind kind);
  // A single-use ticket for `fd`, a descriptor hrxd made for `session`
  // alone (a stream's ring region), redeemed as an export's is.
  absl::StatusOr<std::string> IssueTicket(uint64_t session,
                                          shared::UniqueFd fd);
  // The descriptor a ticket names, for the process that asked for it.
  // NOT_FOUND "unknown_ticket"; FAILED_PRECONDITION "ticket_used" or
  // "ticket_expired"; PERMISSION_DENIED "ticket_not_yours" when `peer` is
  // not the exporting session's process.
  absl::StatusOr<shared::UniqueFd> Redeem(std::string_view ticket,
                                          const PeerIdentity& peer);
  // The session is done with a mapping: its hold on the memory ends.
  absl::Status ReleaseExport(uint64_t session, uint64_t export_id);

  // --- Lifecycle ----------------------------------------------------------
  // A closing session's grants and unredeemed tickets die with it.
  void ForgetSession(uint64_t session);
  // Grants to `tenant`, a removed bound tenant, die with it: a later tenant
  // of the same name is someone else.
  void ForgetGrantee(const std::string& tenant);
  // The descriptors a closed session's process received are retired (see
  // the contract).
  void RetireExports(const Session& closed,
                     absl::flat_hash_map<uint64_t, ExportEntry> exports);
  // `pid` exited: the memory its descriptors kept can go.
  void ProcessExited(pid_t pid);
  // Whether retired descriptors still wait for `pid` to exit.
  bool WaitsFor(pid_t pid) const;
  // Drops expired tickets and releases retired descriptors now closed.
  void Housekeep(absl::Time now);

  // Retired descriptors still held, per tenant.
  struct Retired {
    uint64_t count = 0;
    uint64_t bytes = 0;
  };
  Retired RetiredExports(const std::string& tenant) const;

 private:
  struct GrantEntry {
    uint64_t owner_session;
    backend::MemoryRef memory;
    std::string tenant;        // grantee tenant, or
    uint64_t grantee_session;  // grantee session
    ChargeRef charge;          // the owner tenant's grants ceiling
  };
  struct TicketEntry {
    uint64_t session;
    uint64_t export_id;
    backend::MemoryRef memory;
    shared::UniqueFd fd;  // made at export, moved out at redemption
    ChargeRef charge;     // the tenant's exports ceiling
    absl::Time deadline;
    bool used = false;     // spent: holds nothing, kept to name the refusal
    bool expired = false;  // spent by the clock, not by a redemption
    bool tracked = false;  // `fd` is a description of its own (see Retire)
  };
  struct Detached {
    std::string tenant;
    ExportEntry entry;
  };

  // Drops the descriptor, memory and charge of expired tickets and forgets
  // spent ones a minute past their deadline (or all spent ones past
  // kMaxTicketTombstones).
  void SweepTicketsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands an export its session let go of to the rules of the contract.
  void Retire(ExportEntry entry, const std::string& tenant, pid_t pid);
  void ProbeLingering();

  SessionTable& sessions_;
  ProcessWatcher& watcher_;
  const absl::Duration ticket_lifetime_;
  // Whether shm exports can be tracked to their last close on this kernel.
  const bool track_descriptions_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, GrantEntry> grants_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, TicketEntry> tickets_ ABSL_GUARDED_BY(mu_);
  // Retired exports: tracked ones until the kernel says every exported
  // description is gone (probed at release and then every housekeeping
  // round), untracked ones by the pid that received them, until it exits.
  std::vector<Detached> lingering_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<pid_t, std::vector<Detached>> detached_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_SHARING_H_
